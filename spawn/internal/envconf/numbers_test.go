package envconf

import (
	"math"
	"reflect"
	"testing"
)

// TestParseInt: integers are decimal whatever their leading zeros, with -
// the only sign; sizes take K, M or G (powers of 1024), in either case and
// optionally followed by B; nothing else parses, and nothing beyond int64.
func TestParseInt(t *testing.T) {
	const k, m, g = 1 << 10, 1 << 20, 1 << 30
	for _, tc := range []struct {
		s     string
		bytes bool
		want  int64
	}{
		{"0", false, 0}, {"7", false, 7}, {"128", false, 128}, {"-1", false, -1}, {"-0", false, 0},
		{"010", false, 10}, {"0010", true, 10}, {"08", false, 8}, {"09", false, 9},
		{"9223372036854775807", false, math.MaxInt64}, {"-9223372036854775808", false, math.MinInt64},
		{"1K", true, k}, {"4k", true, 4 * k}, {"64M", true, 64 * m}, {"64m", true, 64 * m}, {"1G", true, g}, {"2g", true, 2 * g},
		{"64MB", true, 64 * m}, {"64mb", true, 64 * m}, {"64Mb", true, 64 * m}, {"4KB", true, 4 * k}, {"1GB", true, g},
		{"-1K", true, -k}, {"0K", true, 0}, {"4096", true, 4096}, {"8589934591G", true, 8589934591 * g},
	} {
		if got, err := ParseInt(tc.s, tc.bytes); err != nil || got != tc.want {
			t.Errorf("ParseInt(%q, %v) = %d, %v; want %d", tc.s, tc.bytes, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		s     string
		bytes bool
		want  error
	}{
		{"", false, errNotDecimal}, {"-", false, errNotDecimal}, {"+2", false, errNotDecimal}, {"+2", true, errNotDecimal},
		{"0x10", false, errNotDecimal}, {"0X10", true, errNotDecimal}, {"0b11", false, errNotDecimal}, {"0o17", false, errNotDecimal},
		{"1_0", false, errNotDecimal}, {"1_0K", true, errNotDecimal}, {" 1", false, errNotDecimal}, {"1 ", false, errNotDecimal},
		{"--1", false, errNotDecimal}, {"1e3", false, errNotDecimal}, {"1.5", false, errNotDecimal}, {"1.5K", true, errNotDecimal},
		{"٣", false, errNotDecimal}, {"x", false, errNotDecimal},
		{"1K", false, errNotDecimal}, {"64M", false, errNotDecimal}, {"1G", false, errNotDecimal}, {"64MB", false, errNotDecimal},
		{"K", true, errNotDecimal}, {"KB", true, errNotDecimal}, {"-K", true, errNotDecimal}, {"4096B", true, errNotDecimal},
		{"4096b", true, errNotDecimal}, {"1T", true, errNotDecimal}, {"16E", true, errNotDecimal}, {"1KiB", true, errNotDecimal},
		{"1BK", true, errNotDecimal}, {"1KBB", true, errNotDecimal}, {"1 K", true, errNotDecimal},
		{"9223372036854775808", false, errTooLarge}, {"-9223372036854775809", false, errTooLarge},
		{"99999999999999999999", false, errTooLarge}, {"184467440737095516150", true, errTooLarge},
		{"8589934592G", true, errTooLarge}, {"9007199254740992M", true, errTooLarge}, {"18014398509481984K", true, errTooLarge},
	} {
		if got, err := ParseInt(tc.s, tc.bytes); err != tc.want {
			t.Errorf("ParseInt(%q, %v) = %d, %v; want %v", tc.s, tc.bytes, got, err, tc.want)
		}
	}
}

// TestIntegerSettings: every integer setting is read by ParseInt, so that
// what Go's parser would take (010 as octal, 0x10, 0b11, 1_0, +2) is a
// one-line error naming the variable as the user spelled it, the value and
// what is accepted; the byte sizes, and only they, take K, M and G.
func TestIntegerSettings(t *testing.T) {
	const depth = "a decimal integer from 1 to 1024"
	const sockbuf = "a decimal number of bytes from 4096 to 1073741824, with an optional K, M or G suffix (times 1024, 1024² or 1024³)"
	for _, tc := range []struct{ env, want string }{
		{"GASNET_NETWORKDEPTH=0x10", `GASNET_NETWORKDEPTH="0x10": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=0X10", `GASNET_NETWORKDEPTH="0X10": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=0b11", `GASNET_NETWORKDEPTH="0b11": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=0o17", `GASNET_NETWORKDEPTH="0o17": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=1_0", `GASNET_NETWORKDEPTH="1_0": accepted: ` + depth},
		{"AMUDP_NETWORKDEPTH=+2", `AMUDP_NETWORKDEPTH="+2": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=", `GASNET_NETWORKDEPTH="": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=-", `GASNET_NETWORKDEPTH="-": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH= 8", `GASNET_NETWORKDEPTH=" 8": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=-1", `GASNET_NETWORKDEPTH=-1: accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=4K", `GASNET_NETWORKDEPTH="4K": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=1k", `GASNET_NETWORKDEPTH="1k": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=99999999999999999999", `GASNET_NETWORKDEPTH="99999999999999999999": accepted: ` + depth},
		{"GASNET_NETWORKDEPTH=9223372036854775808", `GASNET_NETWORKDEPTH="9223372036854775808": accepted: ` + depth},
		{"GASNET_PSHM_NETWORK_DEPTH=1M", `GASNET_PSHM_NETWORK_DEPTH="1M": accepted: a decimal integer from 4 to 8192`},
		{"GASNET_SUPERNODE_MAXSIZE=0x0", `GASNET_SUPERNODE_MAXSIZE="0x0": accepted: a decimal integer from 0 to 1048576`},
		{"GASNET_SSH_OUT_DEGREE=+4", `GASNET_SSH_OUT_DEGREE="+4": accepted: a decimal integer from 1 to 4096; or 0 (no tree)`},
		{"GASNET_RECVDEPTH=1_000", `GASNET_RECVDEPTH="1_000": accepted: a decimal integer from 1 to 65534; or 0 (the default)`},
		{"GASNET_SENDDEPTH=-0x1", `GASNET_SENDDEPTH="-0x1": accepted: a decimal integer from 1 to 1048576; or 0 (the default); or -1 (unlimited)`},
		{"GASNET_REQUESTTIMEOUT_MAX=1M", `GASNET_REQUESTTIMEOUT_MAX="1M": accepted: a decimal integer from 1000 to 3600000000; or 0 (never give up)`},
		{"GASNET_REQUESTTIMEOUT_INITIAL=0x186a0", `GASNET_REQUESTTIMEOUT_INITIAL="0x186a0": accepted: a decimal integer from 100 to 60000000`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=0b10", `GASNET_REQUESTTIMEOUT_BACKOFF="0b10": accepted: a decimal integer from 1 to 64`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=4294967296", `GASNET_REQUESTTIMEOUT_BACKOFF="4294967296": accepted: a decimal integer from 1 to 64`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=04294967296", `GASNET_REQUESTTIMEOUT_BACKOFF="04294967296": accepted: a decimal integer from 1 to 64`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=-01", `GASNET_REQUESTTIMEOUT_BACKOFF="-01": accepted: a decimal integer from 1 to 64`},
		{"GASNET_SOCKETBUFFER_MAX=0x400000", `GASNET_SOCKETBUFFER_MAX="0x400000": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=4_194_304", `GASNET_SOCKETBUFFER_MAX="4_194_304": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=+4M", `GASNET_SOCKETBUFFER_MAX="+4M": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=16E", `GASNET_SOCKETBUFFER_MAX="16E": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=1T", `GASNET_SOCKETBUFFER_MAX="1T": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=4194304B", `GASNET_SOCKETBUFFER_MAX="4194304B": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=4 M", `GASNET_SOCKETBUFFER_MAX="4 M": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=8589934592G", `GASNET_SOCKETBUFFER_MAX="8589934592G": accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=2G", `GASNET_SOCKETBUFFER_MAX=2G: accepted: ` + sockbuf},
		{"GASNET_SOCKETBUFFER_MAX=-1K", `GASNET_SOCKETBUFFER_MAX=-1K: accepted: ` + sockbuf},
		{"AMUDP_SOCKETBUFFER_INITIAL=2K", `AMUDP_SOCKETBUFFER_INITIAL=2K: accepted: ` + sockbuf + `; or 0 (the system's default)`},
		{"GASNET_SOCKETBUFFER_INITIAL=8M", `GASNET_SOCKETBUFFER_INITIAL=8388608: accepted: at most GASNET_SOCKETBUFFER_MAX=4194304`},
		{"GASNET_LINEBUFFERSZ=2M", `GASNET_LINEBUFFERSZ=2M: accepted: a decimal number of bytes from 1 to 1048576, with an optional K, M or G suffix (times 1024, 1024² or 1024³); or 0 (unbuffered)`},
	} {
		c, _, err := LoadEnv([]string{tc.env})
		if err == nil || err.Error() != tc.want || c != nil {
			t.Errorf("%s: got %v, want %q", tc.env, err, tc.want)
		}
	}
	for _, tc := range []struct {
		env  []string
		want map[string]int64 // by Config's field
	}{
		{[]string{"GASNET_NETWORKDEPTH=010"}, map[string]int64{"NetworkDepth": 10}},
		{[]string{"GASNET_NETWORKDEPTH=0008", "GASNET_RECVDEPTH=09"}, map[string]int64{"NetworkDepth": 8, "RecvDepth": 9}},
		{[]string{"GASNET_SENDDEPTH=-1", "GASNET_SUPERNODE_MAXSIZE=00"}, map[string]int64{"SendDepth": -1, "SupernodeMax": 0}},
		{[]string{"GASNET_REQUESTTIMEOUT_MAX=0100000000", "GASNET_REQUESTTIMEOUT_BACKOFF=010"}, map[string]int64{"ReqTimeoutMax": 100000000, "ReqTimeoutBackoff": 10}},
		{[]string{"GASNET_SOCKETBUFFER_INITIAL=4k", "GASNET_SOCKETBUFFER_MAX=64M"}, map[string]int64{"SockBufInit": 4096, "SockBufMax": 64 << 20}},
		{[]string{"GASNET_SOCKETBUFFER_INITIAL=16K", "GASNET_SOCKETBUFFER_MAX=1G"}, map[string]int64{"SockBufInit": 16 << 10, "SockBufMax": 1 << 30}},
		{[]string{"GASNET_LINEBUFFERSZ=1K"}, map[string]int64{"LineBufSize": 1024}},
		{[]string{"AMUDP_SOCKETBUFFER_INITIAL=1mb", "GASNET_SOCKETBUFFER_MAX=2MB"}, map[string]int64{"SockBufInit": 1 << 20, "SockBufMax": 2 << 20}},
		{[]string{"GASNET_SOCKETBUFFER_INITIAL=0", "GASNET_SOCKETBUFFER_MAX=04096"}, map[string]int64{"SockBufInit": 0, "SockBufMax": 4096}},
		{[]string{"GASNET_LINEBUFFERSZ=1M"}, map[string]int64{"LineBufSize": 1 << 20}},
		{[]string{"GASNET_LINEBUFFERSZ=010"}, map[string]int64{"LineBufSize": 10}},
		{[]string{"GASNET_LINEBUFFERSZ=64kB"}, map[string]int64{"LineBufSize": 64 << 10}},
	} {
		c, _, err := LoadEnv(tc.env)
		if err != nil {
			t.Errorf("%q: %v", tc.env, err)
			continue
		}
		v := reflect.ValueOf(c).Elem()
		for field, want := range tc.want {
			f := v.FieldByName(field)
			got := int64(0)
			if f.CanInt() {
				got = f.Int()
			} else {
				got = int64(f.Uint())
			}
			if got != want {
				t.Errorf("%q: %s = %d, want %d", tc.env, field, got, want)
			}
		}
	}
}

// TestIntegerDefaults: each integer default is written as ParseInt writes
// it back, so that envconfig, which reads the defaults with Go's parser,
// reads them as ParseInt does.
func TestIntegerDefaults(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		def := f.Tag.Get("default")
		if v, ok := envconfigValue(i, def); !ok || v != def {
			t.Errorf("%s: default %q reads as %q, %v", f.Tag.Get("envconfig"), def, v, ok)
		}
	}
}
