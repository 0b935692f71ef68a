package launch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBindOrder: the L spawner binds its workers to the console's CPUs in
// turn only where they outnumber them and GASNET_CPU_BIND is on, and the
// fork server reads the order the console writes.
func TestBindOrder(t *testing.T) {
	for _, c := range []struct {
		count   int
		bind    bool
		allowed []int
		want    []int // each worker's CPU in turn, nil: none bound
	}{
		{3, true, []int{0, 1}, []int{0, 1, 0}},
		{16, true, []int{0, 1}, []int{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}},
		{5, true, []int{2, 5, 7}, []int{2, 5, 7, 2, 5}},
		{2, true, []int{3}, []int{3, 3}},
		{2, true, []int{0, 1}, nil}, // as many as the CPUs
		{1, true, []int{0, 1}, nil},
		{16, false, []int{0, 1}, nil},
		{16, true, nil, nil}, // the kernel did not say
	} {
		order := bindOrder(c.count, c.bind, c.allowed)
		var got []int
		if order != nil {
			for i := range c.count {
				got = append(got, cpuFor(order, i))
			}
		} else if cpuFor(order, 0) != -1 {
			t.Errorf("cpuFor(nil, 0) = %d, want -1", cpuFor(order, 0))
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("bindOrder(%d, %v, %v) (-want +got):\n%s", c.count, c.bind, c.allowed, d)
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
