package conduit

// Tests of teams at their edges: concurrent splits, a non-blocking
// collective cut short by the job's end, forged sizes in an assembly,
// waits that only a probe ends.

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// TestTeamConcurrentSplits: two goroutines of every rank split one team
// at once; each pair of calls makes the same team on every member, and
// its collectives work.
func TestTeamConcurrentSplits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		runJob(t, n, memNet(amudptest.New(9, 0.1, 0.05, 100*time.Microsecond)), false, func(j *Job) {
			done := make(chan struct{}, 2)
			for g := range 2 {
				go func() {
					defer func() { done <- struct{}{} }()
					if g == 1 {
						time.Sleep(time.Duration(j.Rank()) * time.Millisecond) // other orders on other ranks
					}
					tm, err := j.World().Split(0, j.Rank())
					if err != nil {
						t.Errorf("rank %d: split: %v", j.Rank(), err)
						return
					}
					sum, err := AllReduce(tm, Sum, []int32{1})
					if err != nil || sum[0] != n {
						t.Errorf("rank %d: sum on a concurrent split's team = %v, %v", j.Rank(), sum, err)
					}
				}()
			}
			<-done
			<-done
			j.World().Barrier()
		})
	})
}

// TestNonBlockingCutShort: a non-blocking collective that the job's end
// cuts short never reports success: its Wait ends the rank, as any call
// does once the job has ended.
func TestNonBlockingCutShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, _ := runJob(t, 2, memNet(amudptest.New(10, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			tm, err := j.World().Split(0, j.Rank())
			if err != nil {
				t.Fatal(err)
			}
			if j.Rank() == 1 {
				j.Exit(3)
			}
			h := tm.BarrierNB() // rank 1 never enters it
			_, err = h.Wait()
			t.Errorf("rank 0: Wait of a barrier the job's end cut short returned %v", err)
		})
		if res.Code != 3 || res.Ends[0] != "terminated" {
			t.Errorf("job ended %d, %q; want 3 with rank 0 terminated", res.Code, res.Ends)
		}
	})
}

// TestProbeEndsMismatchedWaits: over messages, rank 0 reduces to itself
// and the others to rank 1. Rank 2 sends its vector to rank 1, in both
// trees its parent, and leaves; ranks 0 and 1 each wait for the other,
// which sends it nothing: only the probe each sends after probeAfter
// (teamCall.Recv) tells the other what it waits in, and both then fail
// with ErrCollectiveMismatch instead of hanging. Twice, so that the
// team's probe timer is set again.
func TestProbeEndsMismatchedWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 3
		runJob(t, n, memNet(amudptest.New(11, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			for round := range 2 {
				root := min(j.Rank(), 1)
				_, err := Reduce(j.World(), root, Sum, []uint64{1})
				if j.Rank() < 2 && !errors.Is(err, ErrCollectiveMismatch) {
					t.Errorf("round %d, rank %d: reduce to root %d: %v; want ErrCollectiveMismatch", round, j.Rank(), root, err)
				}
			}
		})
	})
}

// TestAssemblyRefusesForgedSizes: a first chunk whose size its count of
// chunks cannot carry is refused before anything is allocated.
func TestAssemblyRefusesForgedSizes(t *testing.T) {
	for _, c := range []struct{ idx, chunks, size int }{
		{0, 1, 1<<32 - 1}, {0, 1, MaxMedium + 1}, {0, 2, MaxMedium}, {0, 0, 0}, {-1, 1, 1}, {0, maxChunks + 1, 0}, {0, 1, -5},
	} {
		var a assembly
		a.add(c.idx, c.chunks, c.size, nil, "a test string")
		if _, err := a.take(); err == nil || a.buf != nil {
			t.Errorf("chunk %d/%d of %d bytes: accepted", c.idx, c.chunks, c.size)
		}
	}
	var a assembly
	a.add(0, 1, 0, nil, "an empty string")
	if b, err := a.take(); err != nil || len(b) != 0 {
		t.Errorf("an empty string: %v, %v", b, err)
	}
}
