package launch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBindOrder: the L spawner binds its workers to the console's CPUs in
// turn, from one that depends on the job, only where they outnumber the
// CPUs, each CPU gets as many, and GASNET_CPU_BIND is on; the fork server
// reads the order the console writes, and refuses anything else.
func TestBindOrder(t *testing.T) {
	for _, c := range []struct {
		count   int
		bind    bool
		allowed []int
		from    int
		want    []int // each worker's CPU in turn, nil: none bound
	}{
		{4, true, []int{0, 1}, 0, []int{0, 1, 0, 1}},
		{4, true, []int{0, 1}, 7, []int{1, 0, 1, 0}},
		{16, true, []int{0, 1}, 2, []int{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}},
		{6, true, []int{2, 5, 7}, 1, []int{5, 7, 2, 5, 7, 2}},
		{2, true, []int{3}, 5, []int{3, 3}},
		{3, true, []int{0, 1}, 0, nil}, // CPU 0 would run two, CPU 1 one
		{2, true, []int{0, 1}, 0, nil}, // as many as the CPUs
		{1, true, []int{0, 1}, 0, nil},
		{16, false, []int{0, 1}, 0, nil},
		{16, true, nil, 0, nil}, // the kernel did not say
	} {
		order := bindOrder(c.count, c.bind, c.allowed, c.from)
		var got []int
		if order != nil {
			for i := range c.count {
				got = append(got, cpuFor(order, i))
			}
		} else if cpuFor(order, 0) != -1 {
			t.Errorf("cpuFor(nil, 0) = %d, want -1", cpuFor(order, 0))
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("bindOrder(%d, %v, %v, %d) (-want +got):\n%s", c.count, c.bind, c.allowed, c.from, d)
		}
		if order == nil {
			continue
		}
		back, err := parseCPUs(formatCPUs(order))
		if err != nil || !cmp.Equal(back, order) {
			t.Errorf("parseCPUs(formatCPUs(%v)) = %v, %v", order, back, err)
		}
	}
	for _, bad := range []string{"", "a", "0,,1", "-1", "1024", "0, 1"} {
		if _, err := parseCPUs(bad); err == nil || !strings.Contains(err.Error(), "accepted: CPU numbers 0 to 1023") {
			t.Errorf("parseCPUs(%q): %v, want an error saying what is accepted", bad, err)
		}
	}
}
