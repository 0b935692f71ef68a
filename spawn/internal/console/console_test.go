package console

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

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
		{"", "L", 40, true, hostLimits{NoFile: 100, OpenFDs: 8}, "N=40: the console needs about 160 file descriptors (3 per worker) and RLIMIT_NOFILE is 100 (ulimit -n): at most 20 workers"},
		{"", "L", 10, true, hostLimits{NoFile: 70, OpenFDs: 8}, "N=10: the console needs about 80 file descriptors (4 per worker)"}, // no fork server: pidfds
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
		{"GASNET_WORKER_RANK=010", "C", 4, true, roomy, "GASNET_WORKER_RANK=010: every worker would ask for rank 10"},
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
