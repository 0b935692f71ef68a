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
)

// TestCrowdedRanksBound: where the L spawner's workers outnumber the CPUs
// it binds each, every thread of it, to one CPU in turn (GASNET_CPU_BIND),
// whether the console starts them or its fork server does (16 workers and
// more); ranks that fit, and ranks with GASNET_CPU_BIND=0, run on every
// CPU the console may.
func TestCrowdedRanksBound(t *testing.T) {
	all := cpusAllowed(t)
	n := len(strings.Split(expandCPUs(t, all), ","))
	for _, tt := range []struct {
		env   []string
		ranks int
		bound bool
	}{
		{nil, n + 1, true},
		{nil, max(16, n+1), true}, // through the fork server
		{nil, n, false},
		{[]string{"GASNET_CPU_BIND=0"}, max(16, n+1), false},
	} {
		r := run(t, t.Name(), append([]string{"PRINT_CPUS=1"}, tt.env...), "printer", strconv.Itoa(tt.ranks))
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
		}
		if !tt.bound {
			if d := cmp.Diff(map[string]int{all: tt.ranks}, per); d != "" {
				t.Errorf("printer %d with %q: ranks by CPUs (-want +got):\n%s", tt.ranks, tt.env, d)
			}
			continue
		}
		want := map[string]int{}
		for i, c := range strings.Split(expandCPUs(t, all), ",") {
			if k := tt.ranks/n + min(1, max(0, tt.ranks%n-i)); k > 0 {
				want[c] = k
			}
		}
		if d := cmp.Diff(want, per); d != "" {
			t.Errorf("printer %d with %q: ranks by CPUs (-want +got):\n%s", tt.ranks, tt.env, d)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// cpusAllowed returns the CPUs this process may run on, as the kernel
// lists them (Cpus_allowed_list): the workers' unless bound.
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

// expandCPUs turns a kernel's CPU list ("0-3,8") into its CPUs, each
// written out ("0,1,2,3,8").
func expandCPUs(t *testing.T, list string) string {
	var out []string
	for _, part := range strings.Split(list, ",") {
		lo, hi, ok := strings.Cut(part, "-")
		if !ok {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a {
			t.Fatalf("CPU list %q: not a list of CPUs", list)
		}
		for c := a; c <= b; c++ {
			out = append(out, strconv.Itoa(c))
		}
	}
	return strings.Join(out, ",")
}
