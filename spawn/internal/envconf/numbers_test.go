package envconf

import (
	"math"
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
