package envconf

import (
	"strings"
	"testing"
)

// TestConfigRanges: every value out of range or malformed is refused with a
// line naming the variable as the user spelled it, the value and what is
// accepted.
func TestConfigRanges(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"GASNET_LINEBUFFERSZ=9223372036854775807", "GASNET_LINEBUFFERSZ=9223372036854775807: accepted: a decimal number of bytes from 1 to 1048576, with an optional K, M or G suffix (times 1024, 1024² or 1024³); or 0 (unbuffered)"},
		{"GASNET_REQUESTTIMEOUT_MAX=18446744073709552", "GASNET_REQUESTTIMEOUT_MAX=18446744073709552: accepted: a decimal integer from 1000 to 3600000000; or 0 (never give up)"},
		{"GASNET_REQUESTTIMEOUT_MAX=9223372036854775807", "GASNET_REQUESTTIMEOUT_MAX=9223372036854775807: accepted: a decimal integer from 1000"},
		{"GASNET_REQUESTTIMEOUT_MAX=5000", "GASNET_REQUESTTIMEOUT_MAX=5000 with GASNET_REQUESTTIMEOUT_INITIAL=5000 and GASNET_REQUESTTIMEOUT_BACKOFF=2 gives up on a silent peer after 10ms: accepted: settings whose give-up time is at least 1s"},
		{"GASNET_REQUESTTIMEOUT_MAX=500000\x00AMUDP_REQUESTTIMEOUT_INITIAL=600000", "AMUDP_REQUESTTIMEOUT_INITIAL=600000: accepted: at most GASNET_REQUESTTIMEOUT_MAX=500000"},
		{"GASNET_REQUESTTIMEOUT_MAX=1000\x00GASNET_REQUESTTIMEOUT_INITIAL=100\x00GASNET_REQUESTTIMEOUT_BACKOFF=1", "GASNET_REQUESTTIMEOUT_MAX=1000 with GASNET_REQUESTTIMEOUT_INITIAL=100 and GASNET_REQUESTTIMEOUT_BACKOFF=1 gives up on a silent peer after 7.4ms"},
		{"GASNET_REQUESTTIMEOUT_MAX=400000\x00GASNET_REQUESTTIMEOUT_INITIAL=1000", "GASNET_REQUESTTIMEOUT_MAX=400000 with GASNET_REQUESTTIMEOUT_INITIAL=1000 and GASNET_REQUESTTIMEOUT_BACKOFF=2 gives up on a silent peer after 9"},
		{"GASNET_SOCKETBUFFER_MAX=-5", "GASNET_SOCKETBUFFER_MAX=-5: accepted: a decimal number of bytes from 4096 to 1073741824"},
		{"GASNET_PSHM_NETWORK_DEPTH=3", "GASNET_PSHM_NETWORK_DEPTH=3: accepted: a decimal integer from 4 to 8192"},
		{"AMUDP_PSHM_NETWORK_DEPTH=8193", "AMUDP_PSHM_NETWORK_DEPTH=8193: accepted: a decimal integer from 4 to 8192"},
		{"GASNET_PSHM_BARRIER_HIER=maybe", `GASNET_PSHM_BARRIER_HIER="maybe": accepted: 1, 0, true or false`},
		{"AMUDP_SOCKETBUFFER_INITIAL=8388608", "AMUDP_SOCKETBUFFER_INITIAL=8388608: accepted: at most GASNET_SOCKETBUFFER_MAX=4194304"},
		{"GASNET_CONNECT_TIMEOUT=abc", `GASNET_CONNECT_TIMEOUT="abc": accepted: a duration from 100ms to 24h, such as "250ms" or "5s"`},
		{"GASNET_CONNECT_TIMEOUT=-5s", `GASNET_CONNECT_TIMEOUT=-5s: accepted: a duration from 100ms to 24h`},
		{"GASNET_EXIT_TIMEOUT=1ns", `GASNET_EXIT_TIMEOUT=1ns: accepted: a duration from 100ms to 1h`},
		{"GASNET_EXIT_TIMEOUT=99999h", `GASNET_EXIT_TIMEOUT=99999h: accepted: a duration from 100ms to 1h`},
		{"GASNET_POLL_SPIN=-5ms", `GASNET_POLL_SPIN=-5ms: accepted: a duration from 0s to 1s, such as "250ms" or "5s"; or -1ns (spin forever)`},
		{"GASNET_POLL_SPIN=-5", `GASNET_POLL_SPIN="-5": accepted: a duration from 0s to 1s`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=-1", `GASNET_REQUESTTIMEOUT_BACKOFF="-1": accepted: a decimal integer from 1 to 64`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=4294967295", `GASNET_REQUESTTIMEOUT_BACKOFF=4294967295: accepted: a decimal integer from 1 to 64`},
		{"GASNET_NETWORKDEPTH=x", `GASNET_NETWORKDEPTH="x": accepted: a decimal integer from 1 to 1024`},
		{"GASNET_SENDDEPTH=-2", `GASNET_SENDDEPTH=-2: accepted: a decimal integer from 1 to 1048576; or 0 (the default); or -1 (unlimited)`},
		{"GASNET_HANG_WARN=5ms", `GASNET_HANG_WARN=5ms: accepted: a duration from 100ms to 24h, such as "250ms" or "5s"; or 0 (never)`},
		{"GASNET_ROUTE_OUTPUT=maybe", `GASNET_ROUTE_OUTPUT="maybe": accepted: 1, 0, true or false`},
		{"GASNET_WORKERIP=zz", "GASNET_WORKERIP=zz: accepted: CIDRs"},
		{"GASNET_MASTERIP=console", "GASNET_MASTERIP=console: accepted: an IPv4 or IPv6 address"},
		{"GASNET_MASTERIP=fe80::1%eth0", "GASNET_MASTERIP=fe80::1%eth0: accepted: an IPv4 or IPv6 address"},
		{"GASNET_WORKERIP=10.0.0.0/8,zz", "GASNET_WORKERIP=10.0.0.0/8,zz: accepted: CIDRs"},
		{"GASNET_WORKERIP= , ", "GASNET_WORKERIP= , : accepted: CIDRs"},
		{"GASNET_WORKER_RANK=1x", "GASNET_WORKER_RANK=1x: accepted: a decimal integer >= 0 or the name of a variable"},
		{"GASNET_WORKER_RANK=-1", "GASNET_WORKER_RANK=-1: accepted"},
		{"GASNET_WORKER_RANK=+2", "GASNET_WORKER_RANK=+2: accepted: a decimal integer >= 0 or the name of a variable"},
		{"GASNET_WORKER_RANK=0x1", "GASNET_WORKER_RANK=0x1: accepted: a decimal integer >= 0"},
		{"GASNET_WORKER_RANK=1_0", "GASNET_WORKER_RANK=1_0: accepted: a decimal integer >= 0"},
		{"GASNET_WORKER_RANK=99999999999999999999", "GASNET_WORKER_RANK=99999999999999999999: accepted: a decimal integer >= 0"},
		{"GASNET_BARRIER=tree", `GASNET_BARRIER=tree: accepted: AMDISSEM (or DISSEM), AMCENTRAL or AMTREE, or empty for the default`},
		{"AMUDP_BARRIER=RDMADISSEM", `AMUDP_BARRIER=RDMADISSEM: accepted: AMDISSEM`},
	} {
		_, _, err := LoadEnv(strings.Split(tc.env, "\x00"))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.env, err, tc.want)
		}
	}
	for _, ok := range []string{"GASNET_POLL_SPIN=-1ns", "GASNET_POLL_SPIN=0", "GASNET_LINEBUFFERSZ=0", "GASNET_REQUESTTIMEOUT_MAX=0",
		"GASNET_SENDDEPTH=-1", "GASNET_HANG_WARN=0", "GASNET_WORKERIP=10.77.", "GASNET_WORKERIP=fd00::/8", "GASNET_WORKERIP=10.1.0.0/16, fd00::/8,127.", "GASNET_WORKER_RANK=SLURM_PROCID", "GASNET_WORKER_RANK=010",
		"GASNET_MASTERIP=fd00:77::fe", "GASNET_MASTERIP=::", "GASNET_MASTERIP=10.77.0.254",
		"GASNET_SOCKETBUFFER_INITIAL=0", "GASNET_EXIT_TIMEOUT=1h", "GASNET_BARRIER=amtree", "GASNET_BARRIER=DISSEM",
		"GASNET_REQUESTTIMEOUT_MAX=500000\x00GASNET_REQUESTTIMEOUT_INITIAL=1000"} {
		if _, _, err := LoadEnv(strings.Split(ok, "\x00")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// MAX alone below the default initial wait lowers that wait: the user
	// set no initial wait to conflict with.
	if c, _, err := LoadEnv([]string{"GASNET_REQUESTTIMEOUT_MAX=2000000"}); err != nil || c.ReqTimeoutInitial != 100000 {
		t.Errorf("MAX=2000000: %v, initial %d", err, c.ReqTimeoutInitial)
	}
	if c, _, err := LoadEnv([]string{"GASNET_REQUESTTIMEOUT_MAX=60000"}); err == nil || c != nil {
		t.Errorf("MAX=60000: accepted (give-up 120 ms)")
	}
	if c, _, err := LoadEnv([]string{"GASNET_REQUESTTIMEOUT_MAX=0"}); err != nil || c.ReqTimeoutInitial != 100000 {
		t.Errorf("MAX=0: %v", err)
	}
}
