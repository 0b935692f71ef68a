//go:build race

package amudp

import (
	"bytes"
	"testing"
)

// TestFenceOrdersHandlerWrites is for the race detector (the file builds
// with -race only; make test runs it). A Long request's payload is written
// into A's segment by a background poller. The test learns that the
// request completed from B's side, over the kernel's UDP, which gives the
// race detector no happens-before edge; only Fence can. Reading the
// segment after Fence must not be reported as a race (and without Fence it
// is: a data race fails the test).
func TestFenceOrdersHandlerWrites(t *testing.T) {
	eps := newJob(t, 2, Config{})
	a, b := eps[0], eps[1]
	seg := make([]byte, 4096)
	a.SetSegment(seg)
	a.Register(130, func(*Token, []uint32, []byte) {})
	serve(t, a) // A's background poller, as GASNET_RCV_THREAD=1 has it
	for round := range 20 {
		payload := bytes.Repeat([]byte{byte(round + 1)}, 1000)
		if err := b.RequestLong(0, 130, payload, uint64(round*100), 0); err != nil {
			t.Fatal(err)
		}
		waitFor(t, b, "the auto-reply", func() bool { return b.Outstanding() == 0 })
		a.Fence()
		if got := seg[round*100]; got != byte(round+1) {
			t.Fatalf("round %d: segment holds %d after the request completed, want %d", round, got, round+1)
		}
	}
}
