package conduit

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestWaitAllAny: one Handle type for a Put, a fetching atomic and a
// collective: WaitAll waits for all three, each Wait then gives its
// result; WaitAny returns a completed one; with no handle it says so.
func TestWaitAllAny(t *testing.T) {
	code := runLocalWithin(t, 30*time.Second, 2, func(j *Job) {
		seg, err := j.Attach(nil, 64)
		if err != nil {
			t.Error(err)
		}
		seg[8] = 40
		if err := j.World().Barrier(); err != nil {
			t.Error(err)
		}
		sum := AllReduceNB(j.World(), Sum, []uint64{uint64(j.Rank() + 1)})
		if j.Rank() == 0 {
			put, err := j.PutNB(1, 0, []byte("hi"))
			if err != nil {
				t.Fatal(err)
			}
			add, err := NewAtomics[uint64](j).FetchNB(1, 8, AtomicAdd, 2, 0)
			if err != nil {
				t.Fatal(err)
			}
			if i, err := WaitAny(nil, add); i != 1 || err != nil {
				t.Errorf("WaitAny(nil, add) = %d, %v; want 1, nil", i, err)
			}
			if err := WaitAll(put, add, sum, nil); err != nil {
				t.Errorf("WaitAll: %v", err)
			}
			if !put.Test() || !add.Test() || !sum.Test() {
				t.Errorf("Test after WaitAll: %v %v %v", put.Test(), add.Test(), sum.Test())
			}
			if old, err := add.Wait(); old != 40 || err != nil {
				t.Errorf("the atomic's Wait: %d, %v; want 40", old, err)
			}
		}
		if s, err := sum.Wait(); !slices.Equal(s, []uint64{3}) || err != nil {
			t.Errorf("rank %d: the all-reduce's Wait: %v, %v; want [3]", j.Rank(), s, err)
		}
		if i, err := WaitAny(); i != -1 || !errors.Is(err, ErrNoHandle) {
			t.Errorf("WaitAny() = %d, %v; want -1, ErrNoHandle", i, err)
		}
		if err := j.World().Barrier(); err != nil {
			t.Error(err)
		}
		if j.Rank() == 1 && (string(seg[:2]) != "hi" || seg[8] != 42) {
			t.Errorf("rank 1's segment: %q, word %d; want \"hi\" and 42", seg[:2], seg[8])
		}
		j.Finalize(0)
	})
	if code != 0 {
		t.Errorf("code %d", code)
	}
}
