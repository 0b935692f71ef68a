package conduit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// TestContextForms: every Context form returns its context's error when
// the context ends first (rank 1 is away, polling nothing), and what it
// leaves behind is as documented: a collective goes on in the background
// with a copy of this rank's data (rank 1 gets rank 0's original data
// although rank 0 overwrote it), a request that waited for credit is not
// sent, a put and an atomic that were sent are done, and a get writes
// nothing into its buffer once its Context form has returned.
func TestContextForms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ran atomic.Int64
		runJob(t, 2, memNet(amudptest.New(12, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			seg, err := j.Attach([]HandlerEntry{{Index: 200, Fn: func(*Token, []uint32, []byte) { ran.Add(1) }}}, 4096)
			if err != nil {
				t.Fatal(err)
			}
			me := j.Rank()
			tm, err := j.World().Split(0, me) // a sub-team: the engine's collectives
			if err != nil {
				t.Fatal(err)
			}
			if me == 1 {
				time.Sleep(time.Second) // away
				contextPeer(t, tm)
			} else {
				contextTimeouts(t, tm)
			}
			if err := tm.Barrier(); err != nil {
				t.Errorf("rank %d: barrier after the Context forms: %v", me, err)
			}

			// Requests: 16 (the network depth) take every credit to rank
			// 1; the next waits for credit, which it never gets in time.
			if me == 0 {
				time.Sleep(100 * time.Millisecond) // rank 1 has left the barrier: away
				for range 16 {
					if err := j.RequestShort(1, 200); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				err := j.RequestShortContext(ctx, 1, 200)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("RequestShortContext without credit = %v, want the deadline", err)
				}
				done, stop := context.WithCancel(context.Background())
				stop()
				if err := j.RequestMediumContext(done, 1, 200, []byte{1}); !errors.Is(err, context.Canceled) {
					t.Errorf("RequestMediumContext with an ended context = %v", err)
				}
			} else {
				time.Sleep(time.Second)
			}
			j.Barrier()
			if me == 1 && ran.Load() != 16 {
				t.Errorf("the handler ran %d times, want 16: a request whose context ended while it waited for credit was sent", ran.Load())
			}

			// Remote memory: rank 1 is away again while rank 0 gets, puts
			// and adds.
			buf := bytes.Repeat([]byte{0xee}, 8)
			vbuf := bytes.Repeat([]byte{0xee}, 4)
			if me == 0 {
				time.Sleep(100 * time.Millisecond) // rank 1 away
				short := func() (context.Context, context.CancelFunc) {
					return context.WithTimeout(context.Background(), 50*time.Millisecond)
				}
				for _, c := range []struct {
					name string
					call func(context.Context) error
				}{
					{"GetContext", func(ctx context.Context) error { return j.GetContext(ctx, 1, 0, buf) }},
					{"GetVContext", func(ctx context.Context) error {
						return j.GetVContext(ctx, 1, []Piece{{Offset: 8, Data: vbuf[:2]}, {Offset: 16, Data: vbuf[2:]}})
					}},
					{"PutContext", func(ctx context.Context) error { return j.PutContext(ctx, 1, 64, []byte("put data")) }},
					{"PutStridedContext", func(ctx context.Context) error {
						return j.PutStridedContext(ctx, 1, Strided{Offset: 256, Stride: 8, Count: 2, Size: 2}, []byte("abcd"), 2)
					}},
					{"FetchContext", func(ctx context.Context) error {
						_, err := NewAtomics[uint64](j).FetchContext(ctx, 1, 128, AtomicAdd, 5, 0)
						return err
					}},
					{"ApplyContext", func(ctx context.Context) error {
						return NewAtomics[uint64](j).ApplyContext(ctx, 1, 136, AtomicInc, 0, 0)
					}},
				} {
					ctx, cancel := short()
					if err := c.call(ctx); !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s while the target is away = %v, want the deadline", c.name, err)
					}
					cancel()
				}
			} else {
				copy(seg, bytes.Repeat([]byte{0x11}, 32))
				time.Sleep(time.Second)
			}
			j.Barrier() // every request of rank 0 answered: the replies have come
			j.Barrier()
			if me == 0 {
				if !bytes.Equal(buf, bytes.Repeat([]byte{0xee}, 8)) || !bytes.Equal(vbuf, bytes.Repeat([]byte{0xee}, 4)) {
					t.Errorf("gets abandoned by their Context form wrote into their buffers later: %x %x", buf, vbuf)
				}
			} else {
				if got := string(seg[64:72]); got != "put data" {
					t.Errorf("the put sent before its deadline wrote %q", got)
				}
				if got := string([]byte{seg[256], seg[257], seg[264], seg[265]}); got != "abcd" {
					t.Errorf("the strided put sent before its deadline wrote %q", got)
				}
				if a, b := binary.LittleEndian.Uint64(seg[128:]), binary.LittleEndian.Uint64(seg[136:]); a != 5 || b != 1 {
					t.Errorf("atomics sent before their deadline: words %d and %d, want 5 and 1 (each applied once)", a, b)
				}
			}
		})
	})
}

// contextTimeouts is rank 0's part of TestContextForms: a wait bounded by
// a context (Handle.WaitContext) on each collective's NB form on tm, while
// rank 1 is away, must end with the deadline.
func contextTimeouts(t *testing.T, tm *Team) {
	expire := func(name string, call func(ctx context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if err := call(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s while rank 1 is away = %v, want the deadline", name, err)
		}
	}
	data := []byte("a0")
	expire("AllGatherNB", func(ctx context.Context) error { _, err := tm.AllGatherNB(data).WaitContext(ctx); return err })
	expire("BroadcastNB", func(ctx context.Context) error { _, err := tm.BroadcastNB(1, nil).WaitContext(ctx); return err })
	g := []byte("g0")
	expire("GatherNB", func(ctx context.Context) error { _, err := tm.GatherNB(0, g).WaitContext(ctx); return err })
	expire("ScatterNB", func(ctx context.Context) error { _, err := tm.ScatterNB(1, nil).WaitContext(ctx); return err })
	blocks := []byte("t0t1")
	expire("AlltoallNB", func(ctx context.Context) error { _, err := tm.AlltoallNB(blocks).WaitContext(ctx); return err })
	parts := [][]byte{[]byte("v00"), []byte("v01")}
	expire("AlltoallvNB", func(ctx context.Context) error { _, err := tm.AlltoallvNB(parts).WaitContext(ctx); return err })
	v := []int64{5}
	expire("AllReduceNB", func(ctx context.Context) error { _, err := AllReduceNB(tm, Sum, v).WaitContext(ctx); return err })
	w := []int64{7}
	expire("ReduceNB", func(ctx context.Context) error { _, err := ReduceNB(tm, 1, Sum, w).WaitContext(ctx); return err })
	mul := func(a, b int64) int64 { return a * b }
	x := []int64{3}
	expire("ReduceFuncNB", func(ctx context.Context) error { _, err := ReduceFuncNB(tm, 1, mul, x).WaitContext(ctx); return err })
	expire("AllReduceFuncNB", func(ctx context.Context) error {
		_, err := AllReduceFuncNB(tm, mul, []int64{2}).WaitContext(ctx)
		return err
	})
	expire("SplitNB", func(ctx context.Context) error { _, err := tm.SplitNB(0, 0).WaitContext(ctx); return err })
}

// contextPeer is rank 1's part of TestContextForms: the same collectives,
// plainly, once back; what rank 0 contributed must be its data as it was
// when it called.
func contextPeer(t *testing.T, tm *Team) {
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil || !cmp.Equal(got, want) {
			t.Errorf("%s on rank 1 = %v, %v; want %v", name, got, err, want)
		}
	}
	all, err := tm.AllGather([]byte("a1"))
	check("AllGather", all, [][]byte{[]byte("a0"), []byte("a1")}, err)
	b, err := tm.Broadcast(1, []byte("b1"))
	check("Broadcast", b, []byte("b1"), err)
	g, err := tm.Gather(0, []byte("g1"))
	check("Gather", g, [][]byte(nil), err)
	s, err := tm.Scatter(1, [][]byte{[]byte("s0"), []byte("s1")})
	check("Scatter", s, []byte("s1"), err)
	a, err := tm.Alltoall([]byte("u0u1"))
	check("Alltoall", a, []byte("t1u1"), err)
	av, err := tm.Alltoallv([][]byte{[]byte("w10"), []byte("w11")})
	check("Alltoallv", av, [][]byte{[]byte("v01"), []byte("w11")}, err)
	sum, err := AllReduce(tm, Sum, []int64{1})
	check("AllReduce", sum, []int64{6}, err)
	r, err := Reduce(tm, 1, Sum, []int64{1})
	check("Reduce", r, []int64{8}, err)
	mul := func(a, b int64) int64 { return a * b }
	rf, err := ReduceFunc(tm, 1, mul, []int64{4})
	check("ReduceFunc", rf, []int64{12}, err)
	af, err := AllReduceFunc(tm, mul, []int64{5})
	check("AllReduceFunc", af, []int64{10}, err)
	sub, err := tm.Split(0, 0)
	if err != nil || sub.Size() != 2 {
		t.Errorf("Split on rank 1 = %v, %v", sub, err)
	}
}

// TestRequestContextShared: over shared memory (the direct path), a
// request whose context ends while it waits for credit to a rank that is
// away is not sent either.
func TestRequestContextShared(t *testing.T) {
	var ran atomic.Int64
	away := make(chan struct{})
	runJob(t, 2, loopbackShared(t), false, func(j *Job) {
		if _, err := j.Attach([]HandlerEntry{{Index: 200, Fn: func(*Token, []uint32, []byte) { ran.Add(1) }}}, 64); err != nil {
			t.Fatal(err)
		}
		if j.Rank() == 1 {
			close(away)
			time.Sleep(300 * time.Millisecond) // polls nothing
		} else {
			<-away
			for range 16 {
				if err := j.RequestShort(1, 200); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := j.RequestShortContext(ctx, 1, 200)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("RequestShortContext without credit = %v, want the deadline", err)
			}
		}
		j.Barrier()
		if n := ran.Load(); j.Rank() == 1 && n != 16 {
			t.Errorf("the handler ran %d times, want 16", n)
		}
		if st := j.ep.Stats(); j.Rank() == 0 && st.Sent > 4 {
			// The requests went through the inboxes, not UDP datagrams.
			t.Errorf("rank 0 sent %d datagrams: the test did not run over the direct path", st.Sent)
		}
	})
}

// TestAttachContext: an Attach whose context ends before the other ranks
// have attached returns the context's error and completes in the
// background; the rank's segment is then LocalView(Rank()), and Puts work.
func TestAttachContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runJob(t, 2, memNet(amudptest.New(13, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			me := j.Rank()
			var seg []byte
			if me == 1 {
				time.Sleep(time.Second)
				var err error
				if seg, err = j.Attach(nil, 64); err != nil {
					t.Fatal(err)
				}
			} else {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				s, err := j.AttachContext(ctx, nil, 64)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) || s != nil {
					t.Errorf("AttachContext before rank 1 attached = %v, %v; want the deadline", s, err)
				}
				if err := j.WaitUntil(func() bool { return j.LocalView(0) != nil }); err != nil {
					t.Fatal(err)
				}
				seg = j.LocalView(0)
			}
			if len(seg) != 64 {
				t.Fatalf("rank %d: segment of %d bytes", me, len(seg))
			}
			if err := j.Put(1-me, 0, []byte{byte(10 + me)}); err != nil {
				t.Errorf("rank %d: put after the attach: %v", me, err)
			}
			j.Barrier()
			if seg[0] != byte(11-me) {
				t.Errorf("rank %d: segment holds %d, want %d", me, seg[0], 11-me)
			}
		})
	})
}

// TestAttachContextKeepsOrder: an AttachContext whose context has ended
// already still takes its place in the rank's order of all-gathers before
// the rank's next one, as it does on the other ranks.
func TestAttachContextKeepsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runJob(t, 2, memNet(amudptest.New(14, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			me := j.Rank()
			if me == 0 {
				done, stop := context.WithCancel(context.Background())
				stop()
				if _, err := j.AttachContext(done, nil, 64); !errors.Is(err, context.Canceled) {
					t.Errorf("AttachContext with an ended context = %v", err)
				}
			} else if _, err := j.Attach(nil, 128); err != nil {
				t.Fatal(err)
			}
			parts, err := j.World().AllGather([]byte(fmt.Sprintf("user data of %d", me)))
			if err != nil || len(parts) != 2 || string(parts[1-me]) != fmt.Sprintf("user data of %d", 1-me) {
				t.Errorf("rank %d: the all-gather after the attach gave %q, %v", me, parts, err)
			}
			if err := j.WaitUntil(func() bool { return j.SegmentSize(1-me) != 0 }); err != nil {
				t.Fatal(err)
			}
			if got, want := j.SegmentSize(1-me), 64+64*(1-me); got != want {
				t.Errorf("rank %d: rank %d's segment size %d, want %d", me, 1-me, got, want)
			}
		})
	})
}

// TestGetFromHandlerRefused: a get started inside a handler is refused
// with ErrRequestInHandler (as every request there is), at once.
func TestGetFromHandlerRefused(t *testing.T) {
	var got [3]error
	var ran atomic.Bool
	runJob(t, 2, loopbackUDP, false, func(j *Job) {
		_, err := j.Attach([]HandlerEntry{{Index: 200, Fn: func(tok *Token, _ []uint32, _ []byte) {
			buf := make([]byte, 8)
			_, got[0] = j.GetNB(0, 0, buf)
			_, got[1] = j.GetVNB(0, []Piece{{Offset: 0, Data: buf}})
			_, got[2] = j.PutVNB(0, []Piece{{Offset: 0, Data: buf}})
			ran.Store(true)
		}}}, 64)
		if err != nil {
			t.Fatal(err)
		}
		if j.Rank() == 0 {
			if err := j.RequestShort(1, 200); err != nil {
				t.Fatal(err)
			}
		}
		j.Barrier()
	})
	if !ran.Load() {
		t.Fatal("the handler did not run")
	}
	for i, err := range got {
		if !errors.Is(err, ErrRequestInHandler) {
			t.Errorf("call %d inside a handler: %v, want ErrRequestInHandler", i, err)
		}
	}
}
