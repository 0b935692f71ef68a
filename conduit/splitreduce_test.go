package conduit

// Tests of the split NB reductions and all-to-all (splitnb.go).

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSplitReduce: the NB reductions (ReduceNB, AllReduceNB and their
// Func forms) post at their call and complete at Wait or Test where a
// BarrierNB would (splitColl), with the results of their blocking forms,
// and none completes before every rank has entered it; so does
// AlltoallNB. A vector too long
// for a slot, and an operator that does not suit the type, run on a
// goroutine instead (its error ErrReduceOp on every rank); one split
// where another rank calls a collective of another length, or one whose
// datum goes over messages, gives every rank ErrCollectiveMismatch. A
// collective between the Test that completes one and its Wait leaves
// its result as it was.
func TestSplitReduce(t *testing.T) {
	for _, m := range wordModes[:3] {
		for _, n := range []int{2, 5} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				var entered [4]atomic.Int32
				var splits atomic.Int32
				res, jobs := runJob(t, n, m.net(t), false, func(j *Job) {
					me, w := j.Rank(), j.World()
					sum, max := int64(n*(n-1)/2), float64(n-1)
					type reduction struct {
						name string
						call func() *Handle[[]int64]
						want []int64 // on every rank, or at root 1
						root bool
					}
					rs := []reduction{
						{"AllReduceNB", func() *Handle[[]int64] { return AllReduceNB(w, Sum, []int64{int64(me), 1}) }, []int64{sum, int64(n)}, false},
						{"ReduceNB", func() *Handle[[]int64] { return ReduceNB(w, 1, Max, []int64{int64(me)}) }, []int64{int64(max)}, true},
						{"AllReduceFuncNB", func() *Handle[[]int64] {
							return AllReduceFuncNB(w, func(a, b int64) int64 { return a + 2*b }, []int64{1})
						}, nil, false},
						{"ReduceFuncNB", func() *Handle[[]int64] {
							return ReduceFuncNB(w, 1, func(a, b int64) int64 { return a * b }, []int64{int64(me + 1)})
						}, nil, true},
					}
					for e, r := range rs {
						time.Sleep(time.Duration((me*7+e*3)%5) * 200 * time.Microsecond)
						entered[e].Add(1)
						h := r.call()
						if _, ok := h.op.(*splitColl); ok {
							splits.Add(1)
						}
						for !h.Test() {
							time.Sleep(20 * time.Microsecond)
						}
						if got := entered[e].Load(); got != int32(n) {
							t.Errorf("rank %d: %s done when %d of %d ranks had entered it", me, r.name, got, n)
						}
						// A reduction between the Test that completed it
						// and its Wait leaves its result as it was.
						if got, err := AllReduce(w, Sum, []int64{-1, -1}); err != nil || !cmp.Equal(got, []int64{int64(-n), int64(-n)}) {
							t.Errorf("rank %d: AllReduce after %s = %v, %v", me, r.name, got, err)
						}
						got, err := h.Wait()
						want := r.want
						switch r.name {
						case "AllReduceFuncNB":
							want = []int64{int64(2*n - 1)} // 1, then + 2·1 in rank order
						case "ReduceFuncNB":
							want = []int64{1}
							for k := 2; k <= n; k++ {
								want[0] *= int64(k)
							}
						}
						if r.root && me != 1 {
							want = nil
						}
						if err != nil || !cmp.Equal(got, want) || (got == nil) != (want == nil) {
							t.Errorf("rank %d: %s = %v, %v; want %v", me, r.name, got, err, want)
						}
					}

					blocks := make([]byte, 2*n) // block r: this rank and r
					for r := range n {
						blocks[2*r], blocks[2*r+1] = byte(me), byte(r)
					}
					a := w.AlltoallNB(blocks)
					if _, ok := a.op.(*splitColl); ok {
						splits.Add(1)
					}
					got, err := a.Wait()
					if err != nil || len(got) != 2*n {
						t.Errorf("rank %d: AlltoallNB = %v, %v", me, got, err)
					} else {
						for r := range n {
							if got[2*r] != byte(r) || got[2*r+1] != byte(me) {
								t.Errorf("rank %d: AlltoallNB's block %d = %v", me, r, got[2*r:2*r+2])
							}
						}
					}

					long := make([]int64, maxPost/8+1)
					h := AllReduceNB(w, Sum, long)
					if _, ok := h.op.(*splitColl); ok {
						t.Errorf("rank %d: AllReduceNB of %d bytes was split", me, 8*len(long))
					}
					if got, err := h.Wait(); err != nil || len(got) != len(long) {
						t.Errorf("rank %d: AllReduceNB of %d bytes = %d elements, %v", me, 8*len(long), len(got), err)
					}
					if _, err := AllReduceNB(w, And, []float64{1}).Wait(); !errors.Is(err, ErrReduceOp) {
						t.Errorf("rank %d: AllReduceNB And of float64 = %v, want ErrReduceOp", me, err)
					}

					if me == 0 {
						_, err = AllReduceNB(w, Sum, []int64{1}).Wait()
					} else {
						_, err = AllReduce(w, Sum, []int64{1, 2})
					}
					if !errors.Is(err, ErrCollectiveMismatch) {
						t.Errorf("rank %d: all-reductions of 1 and 2 elements = %v, want ErrCollectiveMismatch", me, err)
					}
					if me == 0 {
						_, err = AllReduceNB(w, Sum, []int64{1}).Wait()
					} else {
						_, err = w.AllGather(make([]byte, maxPost+1))
					}
					if !errors.Is(err, ErrCollectiveMismatch) {
						t.Errorf("rank %d: an all-reduction against all-gathers over messages = %v, want ErrCollectiveMismatch", me, err)
					}
					if err := w.Barrier(); err != nil {
						t.Errorf("rank %d: the barrier after: %v", me, err)
					}
				})
				// The four reductions and the all-to-all of every passive
				// rank are split.
				checkSplitJob(t, res, jobs, int(splits.Load()), len(entered)+1, m.crowded)
			})
		}
	}
}

// checkSplitJob checks that every rank of the job returned, and that
// splits NB collectives were split: per for each rank whose words'
// synchronisation is passive, and some where the host is crowded.
func checkSplitJob(t *testing.T, res jobResult, jobs []*Job, splits, per int, crowded bool) {
	t.Helper()
	if d := cmp.Diff(jobResult{Ends: slices.Repeat([]string{"returned"}, len(jobs))}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	want := 0
	for _, j := range jobs {
		if j.words.passive() {
			want += per
		}
	}
	if splits != want || crowded && splits == 0 {
		t.Errorf("%d NB collectives were split, want %d", splits, want)
	}
}

// TestReduceNBOperatorPanics: where the program's operator panics, a
// split NB reduction's Test and Wait panic with it, not the team's next
// calls, blocking or NB, which complete it on their turn and run.
func TestReduceNBOperatorPanics(t *testing.T) {
	res, _ := runJob(t, 2, wordModes[0].net(t), false, func(j *Job) {
		me, w := j.Rank(), j.World()
		mustPanic := func(what string, f func()) {
			defer func() {
				if p := recover(); p != "operator" {
					t.Errorf("rank %d: %s panicked with %v, want the operator's panic", me, what, p)
				}
			}()
			f()
		}
		for _, next := range []string{"Wait", "Barrier", "BarrierNB"} {
			h := AllReduceFuncNB(w, func(a, b int64) int64 { panic("operator") }, []int64{1})
			if _, ok := h.op.(*splitColl); !ok {
				t.Errorf("rank %d: AllReduceFuncNB was not split", me)
			}
			var err error
			switch next {
			case "Barrier":
				err = w.Barrier()
			case "BarrierNB":
				h2 := w.BarrierNB() // its goroutine completes h on its turn
				_, err = h2.Wait()
			}
			if err != nil {
				t.Errorf("rank %d: %s after: %v", me, next, err)
			}
			if next != "Wait" {
				mustPanic("Test after "+next, func() { h.Test() })
			}
			mustPanic("Wait after "+next, func() { h.Wait() })
		}
		if err := w.Barrier(); err != nil {
			t.Errorf("rank %d: the barrier after: %v", me, err)
		}
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestSplitGatheredOverflow: gathered and released, a collective whose
// posts would overflow the leader's buffer runs over messages on every
// rank; an AlltoallNB of such posts is not split, and a rank that waits
// for a message that another rank sends only after its all-to-all, before
// its own Wait, does not hold that rank up. One whose posts fit is split.
func TestSplitGatheredOverflow(t *testing.T) {
	const n = 8
	var got atomic.Int32
	res, _ := runJob(t, n, wordModes[2].net(t), false, func(j *Job) {
		me, w := j.Rank(), j.World()
		if _, err := j.Attach([]HandlerEntry{{Index: 200, Fn: func(*Token, []uint32, []byte) { got.Add(1) }}}, 0); err != nil {
			t.Fatal(err)
		}
		for _, size := range []int{maxPost / n * n, n} {
			// Posts that differ: the leader's buffer cannot hold one
			// for all.
			data := bytes.Repeat([]byte{byte(me + 1)}, size)
			h := w.AlltoallNB(data)
			_, split := h.op.(*splitColl)
			if want := size == n && me != 0; split != want {
				t.Errorf("rank %d: AlltoallNB of %d bytes split: %v, want %v", me, size, split, want)
			}
			if me == 1 && size > n {
				// Rank 0 sends once its all-to-all completed.
				if err := j.WaitUntil(func() bool { return got.Load() > 0 }); err != nil {
					t.Error(err)
				}
			}
			if _, err := h.Wait(); err != nil {
				t.Errorf("rank %d: AlltoallNB of %d bytes: %v", me, size, err)
			}
			if me == 0 && size > n {
				if err := j.RequestShort(1, 200); err != nil {
					t.Error(err)
				}
			}
			// Every request answered, so that the next one may split.
			if err := w.Barrier(); err != nil {
				t.Errorf("rank %d: barrier: %v", me, err)
			}
		}
	})
	if d := cmp.Diff(jobResult{Ends: slices.Repeat([]string{"returned"}, n)}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestSplitAllocs: a split BarrierNB and its Wait allocate a sixteenth
// of an object, its handle and state in one handed out from a chunk of
// the team's (newSplitOp), and so does a split AllReduceNB of one
// element and its Wait, its result carved from the team's slab
// (resultVec), on every rank of a crowded group (counted, each rank's
// split); a blocking AllReduce allocates only a slab, once every 256
// calls.
func TestSplitAllocs(t *testing.T) {
	const n, k = 3, 400
	var perOp [3]float64
	// A rank that waits turns its thread over (sched_yield): each needs
	// a thread of its own, as a process has, or the Go scheduler's
	// preemption (10 ms) paces them.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(n + 1))
	res, jobs := runJob(t, n, wordModes[1].net(t), false, func(j *Job) {
		me, w := j.Rank(), j.World()
		v := []uint64{uint64(me)}
		check := func(sum []uint64, err error) error {
			if err == nil && (len(sum) != 1 || sum[0] != n*(n-1)/2) {
				err = fmt.Errorf("sum %v", sum)
			}
			return err
		}
		ops := []func() error{
			func() error { _, err := w.BarrierNB().Wait(); return err },
			func() error { return check(AllReduceNB(w, Sum, v).Wait()) },
			func() error { return check(AllReduce(w, Sum, v)) },
		}
		for i, op := range ops {
			var before, after runtime.MemStats
			for r := range 2 * k {
				if r == k {
					if err := w.Barrier(); err != nil {
						t.Errorf("rank %d: barrier: %v", me, err)
					}
					if me == 0 {
						runtime.ReadMemStats(&before)
					}
					if err := w.Barrier(); err != nil {
						t.Errorf("rank %d: barrier: %v", me, err)
					}
				}
				if err := op(); err != nil {
					t.Errorf("rank %d: op %d: %v", me, i, err)
					return
				}
			}
			if err := w.Barrier(); err != nil {
				t.Errorf("rank %d: barrier: %v", me, err)
			}
			if me == 0 {
				runtime.ReadMemStats(&after)
				perOp[i] = float64(after.Mallocs-before.Mallocs) / (n * k)
			}
		}
	})
	checkSplitJob(t, res, jobs, 0, 0, false)
	// The jobs' other goroutines allocate a little too: a quarter of an
	// allocation a call at most.
	for i, want := range []float64{1.0 / opChunk, 1.0 / opChunk, 0} {
		if perOp[i] < want || perOp[i] > want+0.25 {
			t.Errorf("%s: %.2f allocations a call and rank, want %v", []string{"BarrierNB", "AllReduceNB", "AllReduce"}[i], perOp[i], want)
		}
	}
}

// TestNewSplitOp: the split collectives a team hands out are zeroed and
// each its own, of whichever types of result in turn: as many types as
// the team keeps chunks for, and then one more (each call then replaces
// a chunk); one type's cost an allocation a chunk.
func TestNewSplitOp(t *testing.T) {
	tm := &Team{}
	seen := map[any]bool{}
	for i := range 6 * opChunk {
		takeOp(t, tm, seen, struct{}{})
		takeOp(t, tm, seen, []byte{1})
		takeOp(t, tm, seen, []int32{1})
		takeOp(t, tm, seen, []int64{1})
		takeOp(t, tm, seen, []uint32{1})
		takeOp(t, tm, seen, []uint64{1})
		takeOp(t, tm, seen, []float32{1})
		takeOp(t, tm, seen, []float64{1})
		if i >= 3*opChunk {
			takeOp(t, tm, seen, []int16{1}) // opKinds+1
		}
	}
	const calls = 64 * opChunk
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range calls {
		newSplitOp[struct{}](tm)
	}
	runtime.ReadMemStats(&after)
	if a := float64(after.Mallocs-before.Mallocs) / calls; a > 1.0/opChunk+0.01 {
		t.Errorf("%.3f allocations a split collective, want one a chunk of %d", a, opChunk)
	}
}

// takeOp takes a split collective of T from tm and checks that it is
// zeroed and not one handed out before (seen), then fills it with v.
func takeOp[T any](t *testing.T, tm *Team, seen map[any]bool, v T) {
	t.Helper()
	x := newSplitOp[T](tm)
	if x.s.t != nil || x.dec != nil || !reflect.ValueOf(&x.v).Elem().IsZero() || seen[x] {
		t.Fatalf("%T: not zeroed, or handed out before (%v)", x, seen[x])
	}
	seen[x] = true
	x.s.t, x.v = tm, v
}
