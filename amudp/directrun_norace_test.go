//go:build !race

package amudp

import (
	"sync/atomic"
	"testing"
)

// The runs TestDirectFloodRuns counts come from a hold of up to 10 µs
// (autoHold), a time: under the race detector a request takes its
// sender longer than that, and runs of one are then what the code does
// (22 failures in 30 runs at 98c3af2 with -race, none in 20 without), so
// this file builds without -race.

// TestDirectFloodRuns: a flood of large requests to a rank that waits,
// each taking its sender longer than the waiting rank's quick passes
// between two full ones, is answered in runs: fewer records than three
// quarters of the requests (runs of one at each full pass, as before
// autoHold, made about all of them; held, 27-108 of 256 on 2 busy CPUs),
// each handler running once.
func TestDirectFloodRuns(t *testing.T) {
	eps := sharedJob(t, 2, DefaultInbox)
	var ran atomic.Int32
	eps[1].Register(130, func(*Token, []uint32, []byte) { ran.Add(1) })
	serve(t, eps[1])
	const k = 256
	payload := make([]byte, MaxMedium)
	for range k {
		if err := eps[0].RequestMedium(1, 130, payload); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "every credit back", func() bool { return eps[0].Outstanding() == 0 })
	if n := ran.Load(); n != k {
		t.Errorf("%d handlers ran, want %d", n, k)
	}
	if r := eps[0].tr.(*Shared).Stats().ShmReceived; r > 3*k/4 {
		t.Errorf("%d requests answered in %d records, want runs", k, r)
	}
	if d := eps[0].Stats().DupReplies; d != 0 {
		t.Errorf("%d duplicate replies", d)
	}
}
