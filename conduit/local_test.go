package conduit

import (
	"strings"
	"sync"
	"testing"

	"github.com/udpconduit/udpconduit/amudp"
)

// TestRunLocal: RunLocal refuses a job size out of range with the accepted
// range, and runs a job of more ranks than CPUs (polite waits) through
// collectives to its code.
func TestRunLocal(t *testing.T) {
	for _, n := range []int{0, -1, amudp.MaxPeers + 1} {
		if _, err := RunLocal(n, func(*Job) {}); err == nil || !strings.Contains(err.Error(), "accepted: 1 to") {
			t.Errorf("RunLocal(%d): %v", n, err)
		}
	}
	const n = 16
	var sums sync.Map
	code, err := RunLocal(n, func(j *Job) {
		for range 20 {
			if err := j.World().Barrier(); err != nil {
				t.Error(err)
			}
		}
		s, err := AllReduce(j.World(), Sum, []uint64{1})
		if err != nil {
			t.Error(err)
		}
		sums.Store(j.Rank(), s[0])
		j.World().Barrier() // Exit ends the ranks still waiting
		if j.Rank() == n-1 {
			j.Exit(7)
		}
	})
	if err != nil || code != 7 {
		t.Errorf("code %d, %v; want 7", code, err)
	}
	for r := range n {
		if v, _ := sums.Load(r); v != uint64(n) {
			t.Errorf("rank %d: sum %v, want %d", r, v, n)
		}
	}
}
