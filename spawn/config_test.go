package spawn

import (
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/sshc"
)

var update = flag.Bool("update", false, "rewrite the README's variable table")

const envBegin, envEnd = "<!-- env:begin -->\n", "<!-- env:end -->"

// TestREADMEEnvTable fails when the README's table and Config disagree; run
// `go test ./spawn -run README -update` to regenerate it.
func TestREADMEEnvTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, envBegin), strings.Index(s, envEnd)
	if i < 0 || j < i {
		t.Fatal("README.md has no env:begin/env:end markers")
	}
	want := envconf.Table()
	got := s[i+len(envBegin) : j]
	if got == want {
		return
	}
	if *update {
		os.WriteFile("../README.md", []byte(s[:i+len(envBegin)]+want+s[j:]), 0o644)
		return
	}
	t.Errorf("README variable table is stale (-want +got):\n%s", cmp.Diff(want, got))
}

func TestChooseSpawner(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "L"},
		{[]string{"GASNET_CSPAWN_CMD=srun -n %N %C"}, "C"},
		{[]string{"GASNET_SSH_SERVERS=a"}, "S"},
		{[]string{"GASNET_SSH_SERVERS=a", "GASNET_SPAWNFN=l"}, "L"},
	} {
		c, _, err := envconf.LoadEnv(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ChooseSpawner(); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.env, got, tc.want)
		}
	}
}

func TestAssignRanks(t *testing.T) {
	j := func(host string, idx, rank int) ctl.Join {
		return ctl.Join{Host: host, Index: idx, Rank: rank, Name: host}
	}
	tests := []struct {
		name   string
		joins  []ctl.Join
		want   []int
		err    string
		listed bool
	}{
		{"contiguous per host", []ctl.Join{j("b", -1, -1), j("a", -1, -1), j("b", -1, -1), j("a", -1, -1)}, []int{0, 2, 1, 3}, "", false},
		{"spawn index order within host", []ctl.Join{j("a", 2, -1), j("a", 0, -1), j("a", 1, -1)}, []int{2, 0, 1}, "", false},
		{"requested", []ctl.Join{j("a", -1, 1), j("a", -1, 0)}, []int{1, 0}, "", false},
		{"all or none", []ctl.Join{j("a", -1, 1), j("a", -1, -1)}, nil, "set for 1 of 2 workers", false},
		{"disjoint", []ctl.Join{j("a", -1, 1), j("b", -1, 1)}, nil, "claimed by two workers", false},
		{"in range", []ctl.Join{j("a", -1, 0), j("b", -1, 2)}, nil, "accepted 0..1", false},
		{"listed: rank is the spawn index", []ctl.Join{j("b", 1, -1), j("a", 2, -1), j("a", 0, -1)}, []int{1, 2, 0}, "", true},
		{"listed: an index twice", []ctl.Join{j("b", 1, -1), j("a", 1, -1)}, nil, "want each of 0..1 once", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := assignRanks(tc.joins, len(tc.joins), tc.listed)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	var out strings.Builder
	c := &console{}
	c.out[1] = &out
	w := newLineWriter(c, 1, 8)
	w.Write([]byte("ab\ncd"))
	w.Write([]byte("ef\n0123456789\nlast"))
	w.Close()
	if got, want := out.String(), "ab\ncdef\n0123456789\nlast"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

// TestConfigRanges: every value out of range or malformed is refused with a
// line naming the variable as the user spelled it, the value and what is
// accepted.
func TestConfigRanges(t *testing.T) {
	for _, tc := range []struct{ env, want string }{
		{"GASNET_LINEBUFFERSZ=9223372036854775807", "GASNET_LINEBUFFERSZ=9223372036854775807: accepted: an integer from 1 to 1048576; or 0 (unbuffered)"},
		{"GASNET_REQUESTTIMEOUT_MAX=18446744073709552", "GASNET_REQUESTTIMEOUT_MAX=18446744073709552: accepted: an integer from 1000 to 3600000000; or 0 (never give up)"},
		{"GASNET_REQUESTTIMEOUT_MAX=9223372036854775807", "GASNET_REQUESTTIMEOUT_MAX=9223372036854775807: accepted: an integer from 1000"},
		{"GASNET_REQUESTTIMEOUT_MAX=5000", "GASNET_REQUESTTIMEOUT_MAX=5000 with GASNET_REQUESTTIMEOUT_INITIAL=5000 and GASNET_REQUESTTIMEOUT_BACKOFF=2 gives up on a silent peer after 10ms: accepted: settings whose give-up time is at least 1s"},
		{"GASNET_REQUESTTIMEOUT_MAX=500000\x00AMUDP_REQUESTTIMEOUT_INITIAL=600000", "AMUDP_REQUESTTIMEOUT_INITIAL=600000: accepted: at most GASNET_REQUESTTIMEOUT_MAX=500000"},
		{"GASNET_REQUESTTIMEOUT_MAX=1000\x00GASNET_REQUESTTIMEOUT_INITIAL=100\x00GASNET_REQUESTTIMEOUT_BACKOFF=1", "GASNET_REQUESTTIMEOUT_MAX=1000 with GASNET_REQUESTTIMEOUT_INITIAL=100 and GASNET_REQUESTTIMEOUT_BACKOFF=1 gives up on a silent peer after 7.4ms"},
		{"GASNET_REQUESTTIMEOUT_MAX=400000\x00GASNET_REQUESTTIMEOUT_INITIAL=1000", "GASNET_REQUESTTIMEOUT_MAX=400000 with GASNET_REQUESTTIMEOUT_INITIAL=1000 and GASNET_REQUESTTIMEOUT_BACKOFF=2 gives up on a silent peer after 9"},
		{"GASNET_SOCKETBUFFER_MAX=-5", "GASNET_SOCKETBUFFER_MAX=-5: accepted: an integer from 4096 to 1073741824"},
		{"AMUDP_SOCKETBUFFER_INITIAL=8388608", "AMUDP_SOCKETBUFFER_INITIAL=8388608: accepted: at most GASNET_SOCKETBUFFER_MAX=4194304"},
		{"GASNET_CONNECT_TIMEOUT=abc", `GASNET_CONNECT_TIMEOUT="abc": accepted: a duration from 100ms to 24h, such as "250ms" or "5s"`},
		{"GASNET_CONNECT_TIMEOUT=-5s", `GASNET_CONNECT_TIMEOUT=-5s: accepted: a duration from 100ms to 24h`},
		{"GASNET_EXIT_TIMEOUT=1ns", `GASNET_EXIT_TIMEOUT=1ns: accepted: a duration from 100ms to 1h`},
		{"GASNET_EXIT_TIMEOUT=99999h", `GASNET_EXIT_TIMEOUT=99999h: accepted: a duration from 100ms to 1h`},
		{"GASNET_POLL_SPIN=-5ms", `GASNET_POLL_SPIN=-5ms: accepted: a duration from 0s to 1s, such as "250ms" or "5s"; or -1ns (spin forever)`},
		{"GASNET_POLL_SPIN=-5", `GASNET_POLL_SPIN="-5": accepted: a duration from 0s to 1s`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=-1", `GASNET_REQUESTTIMEOUT_BACKOFF="-1": accepted: an integer from 1 to 64`},
		{"GASNET_REQUESTTIMEOUT_BACKOFF=4294967295", `GASNET_REQUESTTIMEOUT_BACKOFF=4294967295: accepted: an integer from 1 to 64`},
		{"GASNET_NETWORKDEPTH=x", `GASNET_NETWORKDEPTH="x": accepted: an integer from 1 to 1024`},
		{"GASNET_SENDDEPTH=-2", `GASNET_SENDDEPTH=-2: accepted: an integer from 1 to 1048576; or 0 (the default); or -1 (unlimited)`},
		{"GASNET_HANG_WARN=5ms", `GASNET_HANG_WARN=5ms: accepted: a duration from 100ms to 24h, such as "250ms" or "5s"; or 0 (never)`},
		{"GASNET_ROUTE_OUTPUT=maybe", `GASNET_ROUTE_OUTPUT="maybe": accepted: 1, 0, true or false`},
		{"GASNET_WORKERIP=zz", "GASNET_WORKERIP=zz: accepted: a CIDR"},
		{"GASNET_WORKER_RANK=1x", "GASNET_WORKER_RANK=1x: accepted: an integer >= 0 or the name of a variable"},
		{"GASNET_WORKER_RANK=-1", "GASNET_WORKER_RANK=-1: accepted"},
		{"GASNET_BARRIER=tree", `GASNET_BARRIER=tree: accepted: AMDISSEM (or DISSEM), AMCENTRAL or AMTREE, or empty for the default`},
		{"AMUDP_BARRIER=RDMADISSEM", `AMUDP_BARRIER=RDMADISSEM: accepted: AMDISSEM`},
	} {
		_, _, err := envconf.LoadEnv(strings.Split(tc.env, "\x00"))
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.env, err, tc.want)
		}
	}
	for _, ok := range []string{"GASNET_POLL_SPIN=-1ns", "GASNET_POLL_SPIN=0", "GASNET_LINEBUFFERSZ=0", "GASNET_REQUESTTIMEOUT_MAX=0",
		"GASNET_SENDDEPTH=-1", "GASNET_HANG_WARN=0", "GASNET_WORKERIP=10.77.", "GASNET_WORKERIP=fd00::/8", "GASNET_WORKER_RANK=SLURM_PROCID",
		"GASNET_SOCKETBUFFER_INITIAL=0", "GASNET_EXIT_TIMEOUT=1h", "GASNET_BARRIER=amtree", "GASNET_BARRIER=DISSEM",
		"GASNET_REQUESTTIMEOUT_MAX=500000\x00GASNET_REQUESTTIMEOUT_INITIAL=1000"} {
		if _, _, err := envconf.LoadEnv(strings.Split(ok, "\x00")); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	// MAX alone below the default initial wait lowers that wait: the user
	// set no initial wait to conflict with.
	if c, _, err := envconf.LoadEnv([]string{"GASNET_REQUESTTIMEOUT_MAX=2000000"}); err != nil || c.ReqTimeoutInitial != 100000 {
		t.Errorf("MAX=2000000: %v, initial %d", err, c.ReqTimeoutInitial)
	}
	if c, _, err := envconf.LoadEnv([]string{"GASNET_REQUESTTIMEOUT_MAX=60000"}); err == nil || c != nil {
		t.Errorf("MAX=60000: accepted (give-up 120 ms)")
	}
	if c, _, err := envconf.LoadEnv([]string{"GASNET_REQUESTTIMEOUT_MAX=0"}); err != nil || c.ReqTimeoutInitial != 100000 {
		t.Errorf("MAX=0: %v", err)
	}
}

func TestCheckJob(t *testing.T) {
	roomy := hostLimits{NoFile: 1 << 20, PIDMax: 4 << 20, OpenFDs: 10}
	for _, tc := range []struct {
		env    string
		spawn  string
		n      int
		routed bool
		lim    hostLimits
		want   string // "" = accepted
	}{
		{"", "L", 1024, true, roomy, ""},
		{"", "L", 40, true, hostLimits{NoFile: 100, OpenFDs: 8}, "N=40: the console needs about 200 file descriptors (4 per worker) and RLIMIT_NOFILE is 100 (ulimit -n): at most 15 workers"},
		{"", "C", 40, true, hostLimits{NoFile: 100, OpenFDs: 8}, "N=40: the console needs about 160 file descriptors (3 per worker)"},
		{"", "L", 29, false, hostLimits{NoFile: 100, OpenFDs: 8}, ""},
		{"", "L", 31, false, hostLimits{NoFile: 100, OpenFDs: 8}, "N=31: the console needs about 102 file descriptors (2 per worker)"},
		{"", "L", 4096, false, hostLimits{NProc: 4096}, "N=4096: RLIMIT_NPROC is 4096"},
		{"", "C", 4096, false, hostLimits{NProc: 4096}, ""}, // the launcher's hosts run them
		{"", "L", 1 << 20, false, hostLimits{PIDMax: 32768}, "N=1048576: this host has at most 32768 process ids (kernel.pid_max)"},
		{"GASNET_WORKER_RANK=SLURM_PROCID", "L", 2, true, roomy, "GASNET_WORKER_RANK=SLURM_PROCID: the L spawner numbers its workers itself"},
		{"GASNET_WORKER_RANK=SLURM_PROCID", "C", 2, true, roomy, ""},
		{"GASNET_WORKER_RANK=0", "C", 1, true, roomy, ""},
		{"GASNET_WORKER_RANK=1", "C", 1, true, roomy, "GASNET_WORKER_RANK=1: every worker would ask for rank 1"},
		{"AMUDP_WORKER_RANK=0", "C", 2, true, roomy, "AMUDP_WORKER_RANK=0: every worker would ask for rank 0"},
		{"GASNET_WORKERIP=198.51.100.0/24", "L", 2, true, roomy, "GASNET_WORKERIP=198.51.100.0/24: no interface of this host is on that subnet"},
		{"GASNET_WORKERIP=127.0.0.0/8", "L", 2, true, roomy, ""},
	} {
		var env []string
		if tc.env != "" {
			env = []string{tc.env}
		}
		cfg, src, err := envconf.LoadEnv(env)
		if err != nil {
			t.Fatal(err)
		}
		err = checkJob(cfg, src, tc.spawn, tc.n, tc.routed, tc.lim)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s N=%d: %v", tc.env, tc.spawn, tc.n, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want)):
			t.Errorf("%s %s N=%d: got %v, want %q", tc.env, tc.spawn, tc.n, err, tc.want)
		}
	}
}

// TestSSHOptionsDocumented: GASNET_SSH_OPTIONS' description (and so the
// README's table) names every -o key the built-in ssh client honours.
func TestSSHOptionsDocumented(t *testing.T) {
	f, _ := reflect.TypeOf(Config{}).FieldByName("SSHOptions")
	desc := f.Tag.Get("desc")
	for _, k := range sshc.BuiltinKeys() {
		if !strings.Contains(desc, k) {
			t.Errorf("GASNET_SSH_OPTIONS' description does not name %s", k)
		}
	}
}
