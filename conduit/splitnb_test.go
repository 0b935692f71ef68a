package conduit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/spawn"
)

// TestSplitBarrier: a BarrierNB on words whose synchronisation is passive
// arrives at its call and completes at its Wait, its Test or the team's
// next call (splitColl), and keeps a barrier's rules: no Test or
// Wait reports it done before every rank has entered it; a blocking call
// made before its Wait completes it first; Test does not wait; another BarrierNB after it,
// waited for first, completes both; WaitAny completes it; one called
// where the others call AllGather gives every rank ErrCollectiveMismatch,
// and the team goes on. Where the synchronisation asks more of the rank
// (a dissemination of several rounds, the gathering leader) BarrierNB
// starts the barrier instead, and the same holds.
func TestSplitBarrier(t *testing.T) {
	for _, m := range wordModes[:3] {
		for _, n := range []int{2, 5} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				var entered [8]atomic.Int32
				var splits atomic.Int32
				var tested atomic.Bool
				res, jobs := runJob(t, n, m.net(t), false, func(j *Job) {
					me, w := j.Rank(), j.World()
					check := func(e int, what string, err error) {
						t.Helper()
						if err != nil {
							t.Errorf("rank %d: %s: %v", me, what, err)
						} else if got := entered[e].Load(); got != int32(n) {
							t.Errorf("rank %d: %s done when %d of %d ranks had entered it", me, what, got, n)
						}
					}
					enter := func(e int) *Handle[struct{}] {
						time.Sleep(time.Duration((me*7+e*3)%5) * 200 * time.Microsecond)
						entered[e].Add(1)
						h := w.BarrierNB()
						if _, ok := h.op.(*splitColl); ok {
							splits.Add(1)
						}
						return h
					}
					for me != 0 && !tested.Load() {
						time.Sleep(100 * time.Microsecond) // rank 0 alone in
					}
					h := enter(0)
					if me == 0 {
						if h.Test() {
							t.Errorf("rank 0: Test of a barrier the others have not entered is true")
						}
						tested.Store(true)
					}
					for !h.Test() {
						time.Sleep(20 * time.Microsecond)
					}
					check(0, "Test", nil)
					_, err := h.Wait()
					check(0, "Wait after Test", err)

					h = enter(1)
					sum, err := AllReduce(w, Sum, []int64{int64(me)})
					check(1, "a blocking all-reduce after it", err)
					if want := int64(n * (n - 1) / 2); err == nil && sum[0] != want {
						t.Errorf("rank %d: all-reduce = %d, want %d", me, sum[0], want)
					}
					if !h.Test() {
						t.Errorf("rank %d: the barrier before a blocking call is not done after it", me)
					}

					h = enter(2)
					entered[3].Add(1)
					h2 := w.BarrierNB()
					_, err = h2.Wait()
					check(3, "the second of two BarrierNB", err)
					_, err = h.Wait()
					check(2, "the first of two BarrierNB", err)

					h = enter(4)
					i, err := WaitAny(h)
					check(4, "WaitAny", err)
					if i != 0 {
						t.Errorf("rank %d: WaitAny = %d", me, i)
					}

					if me == 0 {
						_, err = w.BarrierNB().Wait()
					} else {
						_, err = w.AllGather([]byte{byte(me)})
					}
					if !errors.Is(err, ErrCollectiveMismatch) {
						t.Errorf("rank %d: a barrier against all-gathers = %v, want ErrCollectiveMismatch", me, err)
					}
					_, err = enter(5).Wait()
					check(5, "the barrier after a mismatch", err)
				})
				// Counted, and a dissemination of one round, split every
				// BarrierNB but the second of two in a row; gathered, the
				// members' do (5 of 6 each) and the leader's none.
				checkSplitJob(t, res, jobs, int(splits.Load()), 5, m.crowded)
			})
		}
	}
}

// TestSplitBarrierHangWatch: a rank is in the hang watch while it waits
// for a BarrierNB, not while it works between the call and its Wait.
// Rank 1 enters both barriers late: rank 0 waits in the first, and
// works past the second's end before its Wait.
func TestSplitBarrierHangWatch(t *testing.T) {
	warn := testbound.Scale(200 * time.Millisecond)
	for _, m := range []wordMode{wordModes[0], wordModes[1]} {
		t.Run(m.name, func(t *testing.T) {
			jn := m.net(t)
			var mu sync.Mutex
			var got []string
			setup := jn.setup
			jn.setup = func(lj *localJob) {
				setup(lj)
				for r, j := range lj.jobs {
					j.hangWarn = warn
					j.watch.report = func(c spawn.Coll) error {
						mu.Lock()
						defer mu.Unlock()
						got = append(got, fmt.Sprintf("rank %d %s %d in %v", r, c.Kind, c.Seq, c.In))
						return nil
					}
				}
			}
			res, _ := runJob(t, 2, jn, false, func(j *Job) {
				me, w := j.Rank(), j.World()
				if me == 1 {
					time.Sleep(3 * warn)
				}
				h := w.BarrierNB()
				if _, ok := h.op.(*splitColl); !ok {
					t.Errorf("rank %d: BarrierNB was not split", me)
				}
				if _, err := h.Wait(); err != nil {
					t.Errorf("rank %d: first barrier: %v", me, err)
				}
				if me == 1 {
					time.Sleep(3 * warn)
				}
				h = w.BarrierNB()
				if me == 0 {
					time.Sleep(6 * warn)
				}
				if _, err := h.Wait(); err != nil {
					t.Errorf("rank %d: second barrier: %v", me, err)
				}
			})
			if d := cmp.Diff(jobResult{Ends: slices.Repeat([]string{"returned"}, 2)}, res); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			want := []string{"rank 0 barrier 1 in true", "rank 0 barrier 1 in false"}
			mu.Lock()
			defer mu.Unlock()
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("hang reports (-want +got):\n%s", d)
			}
		})
	}
}

// TestSplitBarrierProgress: a loop on Test of a BarrierNB makes progress
// as any wait does: it runs the handler of a request that the other
// rank's Barrier waits for, and ends the rank when the job has ended
// (rank 1 exits without entering a second one). A WaitContext that
// sleeps in the network wakes when another goroutine (a later
// BarrierNB's, at its turn) completes the barrier, not at a later
// message; from a handler, a wait for it is refused.
func TestSplitBarrierProgress(t *testing.T) {
	for _, m := range wordModes[:2] {
		t.Run(m.name, func(t *testing.T) {
			var ran, second, handled atomic.Bool
			late := testbound.Scale(1500 * time.Millisecond)
			var hp atomic.Pointer[Handle[struct{}]]
			res, _ := runJob(t, 2, m.net(t), false, func(j *Job) {
				me, w := j.Rank(), j.World()
				if _, err := j.Attach([]HandlerEntry{
					{Index: 200, Fn: func(*Token, []uint32, []byte) { ran.Store(true) }},
					{Index: 201, Fn: func(*Token, []uint32, []byte) {
						if _, err := hp.Load().WaitContext(context.Background()); !errors.Is(err, ErrWaitInHandler) {
							t.Errorf("WaitContext from a handler = %v, want ErrWaitInHandler", err)
						}
						handled.Store(true)
					}},
				}, 64); err != nil {
					t.Fatal(err)
				}
				if me == 1 {
					if err := j.RequestShort(0, 200); err != nil {
						t.Error(err)
					}
					w.Barrier() // drains the request first
					time.Sleep(50 * time.Millisecond)
					w.Barrier()
					time.Sleep(late)
					second.Store(true)
					w.Barrier()
					j.RequestShort(0, 201)
					j.Drain()
					j.Exit(0)
				}
				time.Sleep(50 * time.Millisecond)
				h := w.BarrierNB()
				if _, ok := h.op.(*splitColl); !ok {
					t.Error("rank 0: BarrierNB was not split")
				}
				if !testUntil(h) {
					t.Error("rank 0: a Test loop did not end")
				}
				if !ran.Load() {
					t.Error("rank 0: the barrier completed before the handler its drain waits for ran")
				}
				h = w.BarrierNB()
				h2 := w.BarrierNB() // its goroutine completes h at its turn
				if _, err := h.WaitContext(context.Background()); err != nil || second.Load() {
					t.Errorf("rank 0: WaitContext = %v, returned after rank 1's next barrier began: %v", err, second.Load())
				}
				h2.Wait()
				h = w.BarrierNB() // rank 1 exits instead
				hp.Store(h)
				testUntil(h)
				t.Error("rank 0: a Test loop on a barrier that rank 1 never enters ended")
			})
			if want := (jobResult{Ends: []string{"terminated", "exit 0"}}); !cmp.Equal(want, res) || !handled.Load() {
				t.Errorf("job = %+v, want %+v; handler ran: %v", res, want, handled.Load())
			}
		})
	}
}

// testUntil loops on h.Test until it reports true, for at most a bound
// that scales with the machine's load, and reports whether it did.
func testUntil(h *Handle[struct{}]) bool {
	end := time.Now().Add(testbound.Scale(10 * time.Second))
	for !h.Test() {
		if time.Now().After(end) {
			return false
		}
		time.Sleep(50 * time.Microsecond)
	}
	return true
}

// TestSplitBarrierOfOne: a BarrierNB, and an AllReduceNB, of a team of
// one member, World of a job of one rank or a sub-team of one, completes
// at its call, with no goroutine; a blocking call after it runs.
func TestSplitBarrierOfOne(t *testing.T) {
	for _, n := range []int{1, 2} {
		res, _ := runJob(t, n, loopbackUDP, false, func(j *Job) {
			tm := j.World()
			if n > 1 {
				var err error
				if tm, err = tm.Split(j.Rank(), 0); err != nil {
					t.Fatal(err)
				}
			}
			h := tm.BarrierNB()
			if s, ok := h.op.(*splitColl); !ok || !s.fin.Load() {
				t.Errorf("N=%d rank %d: BarrierNB of a team of one did not complete at its call", n, j.Rank())
			}
			if _, err := h.Wait(); err != nil {
				t.Errorf("N=%d rank %d: %v", n, j.Rank(), err)
			}
			r := AllReduceNB(tm, Sum, []int64{int64(j.Rank() + 1)})
			if s, ok := r.op.(*splitColl); !ok || !s.fin.Load() {
				t.Errorf("N=%d rank %d: AllReduceNB of a team of one did not complete at its call", n, j.Rank())
			}
			if got, err := r.Wait(); err != nil || !cmp.Equal(got, []int64{int64(j.Rank() + 1)}) {
				t.Errorf("N=%d rank %d: AllReduceNB of a team of one = %v, %v", n, j.Rank(), got, err)
			}
			if err := tm.Barrier(); err != nil {
				t.Errorf("N=%d rank %d: barrier after: %v", n, j.Rank(), err)
			}
		})
		if d := cmp.Diff(jobResult{Ends: slices.Repeat([]string{"returned"}, n)}, res); d != "" {
			t.Errorf("N=%d (-want +got):\n%s", n, d)
		}
	}
}

// TestWaitInHandler: from a handler, a wait for a collective's handle
// that has not completed is refused with ErrWaitInHandler, on the
// goroutine of an NB collective (a job without shared memory) as for a
// split BarrierNB, and the collective goes on.
func TestWaitInHandler(t *testing.T) {
	var hp atomic.Pointer[Handle[[]int64]]
	var handled, entered atomic.Bool
	res, _ := runJob(t, 2, loopbackUDP, false, func(j *Job) {
		if _, err := j.Attach([]HandlerEntry{{Index: 200, Fn: func(*Token, []uint32, []byte) {
			if _, err := hp.Load().Wait(); !errors.Is(err, ErrWaitInHandler) {
				t.Errorf("Wait from a handler = %v, want ErrWaitInHandler", err)
			}
			if _, err := hp.Load().WaitContext(context.Background()); !errors.Is(err, ErrWaitInHandler) {
				t.Errorf("WaitContext from a handler = %v, want ErrWaitInHandler", err)
			}
			handled.Store(true)
		}}}, 64); err != nil {
			t.Fatal(err)
		}
		w := j.World()
		if j.Rank() == 1 {
			for !entered.Load() {
				time.Sleep(100 * time.Microsecond)
			}
			if err := j.RequestShort(0, 200); err != nil {
				t.Error(err)
			}
			if err := j.Drain(); err != nil {
				t.Error(err)
			}
		}
		h := AllReduceNB(w, Sum, []int64{1})
		if j.Rank() == 0 {
			hp.Store(h)
			entered.Store(true)
		}
		if got, err := h.Wait(); err != nil || got[0] != 2 {
			t.Errorf("rank %d: all-reduce = %v, %v", j.Rank(), got, err)
		}
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" || !handled.Load() {
		t.Errorf("(-want +got):\n%s\nhandler ran: %v", d, handled.Load())
	}
}

// TestSplitBarrierPollError: a poll pass of a split BarrierNB's Test that
// fails (here on rank 1's socket, after its arrival) does not keep the
// barrier from completing on the words, and its Wait returns that error,
// as a Barrier's wait returns its polls' errors, to the program to act on.
func TestSplitBarrierPollError(t *testing.T) {
	broken := errors.New("the socket broke")
	var fail atomic.Bool
	var failed atomic.Int32
	jn := loopbackGroupsOver(t, 0, false, func(i int) (amudp.Transport, error) {
		tr, err := loopbackUDP.listen(i)
		if i == 1 && err == nil {
			tr = failingRecv{tr, &fail, &failed, broken}
		}
		return tr, err
	})
	var waited atomic.Pointer[error]
	res, _ := runJob(t, 2, jn, false, func(j *Job) {
		w := j.World()
		if j.Rank() == 0 {
			// Rank 1 tests first, alone in, until its poll fails.
			end := time.Now().Add(testbound.Scale(10 * time.Second))
			for failed.Load() == 0 && time.Now().Before(end) {
				time.Sleep(time.Millisecond)
			}
			if _, err := w.BarrierNB().Wait(); err != nil {
				t.Errorf("rank 0: %v", err)
			}
			return
		}
		h := w.BarrierNB()
		if _, ok := h.op.(*splitColl); !ok {
			t.Fatal("rank 1: BarrierNB was not split")
		}
		fail.Store(true)
		if !testUntil(h) {
			t.Error("rank 1: a Test loop did not end")
		}
		fail.Store(false)
		_, err := h.Wait()
		waited.Store(&err)
	})
	if p := waited.Load(); p == nil {
		t.Error("rank 1 did not wait")
	} else if !errors.Is(*p, broken) {
		t.Errorf("rank 1's Wait after a Test whose poll failed = %v, want %v", *p, broken)
	}
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// failingRecv is a Transport whose Recv returns err while fail is set,
// and counts those in failed.
type failingRecv struct {
	amudp.Transport
	fail   *atomic.Bool
	failed *atomic.Int32
	err    error
}

func (f failingRecv) Recv(b []byte) (int, netip.AddrPort, error) {
	if f.fail.Load() {
		f.failed.Add(1)
		return 0, netip.AddrPort{}, f.err
	}
	return f.Transport.Recv(b)
}
