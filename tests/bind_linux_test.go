package tests

// The L spawner's binding of crowded workers to CPUs (GASNET_CPU_BIND).

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// TestCrowdedRanksBound: where the L spawner's workers outnumber the CPUs
// and each CPU gets as many, it binds each, every thread of it, to one
// CPU in turn (GASNET_CPU_BIND), whether the console starts them or its
// fork server does (16 workers and more), and no worker sees the fork
// server's marker; ranks that fit, ranks that would load the CPUs
// unevenly, and ranks with GASNET_CPU_BIND=0 run on every CPU the console
// may.
func TestCrowdedRanksBound(t *testing.T) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	var cpus []string
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, strconv.Itoa(c))
		}
	}
	n := len(cpus)
	all := cpusAllowed(t) // what an unbound rank says
	cases := []struct {
		env   []string
		ranks int
		bound bool
	}{
		{nil, 2 * n, true},
		{nil, n * ((16 + n - 1) / n), true}, // through the fork server
		{nil, n, false},
		{[]string{"GASNET_CPU_BIND=0"}, n * ((16 + n - 1) / n), false},
		{nil, n + 1, n == 1}, // uneven, but on one CPU: every rank on it
	}
	for _, tt := range cases {
		env := append([]string{"GASNET_SPAWNFN=L", "GASNET_ROUTE_OUTPUT=1", "GASNET_CPU_BIND=1", "PRINT_CPUS=1", "PRINT_ENV=GASNET_SPAWN_BIND"}, tt.env...)
		r := run(t, t.Name(), env, "printer", strconv.Itoa(tt.ranks))
		if r.code != 0 {
			t.Errorf("printer %d with %q: exit %d\nstderr:\n%s", tt.ranks, tt.env, r.code, r.stderr)
			continue
		}
		per := map[string]int{} // ranks by their CPUs
		for rank := range tt.ranks {
			m := regexp.MustCompile(fmt.Sprintf(`(?m)^rank %d: CPUs (.*)$`, rank)).FindStringSubmatch(r.stdout)
			if m == nil {
				t.Errorf("printer %d with %q: rank %d said no CPUs; stdout:\n%s", tt.ranks, tt.env, rank, r.stdout)
				continue
			}
			per[m[1]]++
			if w := fmt.Sprintf("rank %d: GASNET_SPAWN_BIND=\"\"\n", rank); !strings.Contains(r.stdout, w) {
				t.Errorf("printer %d with %q: want %q in stdout:\n%s", tt.ranks, tt.env, w, r.stdout)
			}
		}
		want := map[string]int{all: tt.ranks}
		if tt.bound {
			want = map[string]int{}
			for _, c := range cpus {
				want[c] = tt.ranks / n
			}
		}
		if d := cmp.Diff(want, per); d != "" {
			t.Errorf("printer %d with %q: ranks by CPUs (-want +got):\n%s", tt.ranks, tt.env, d)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// cpusAllowed returns the CPUs this process may run on as the kernel
// lists them in its status (Cpus_allowed_list), as an unbound worker
// reports them.
func cpusAllowed(t *testing.T) string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no Cpus_allowed_list in /proc/self/status:\n%s", b)
	}
	return string(m[1])
}
