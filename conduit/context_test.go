package conduit

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// TestWaitContextGoesOn: WaitContext on the handle of every NB form
// returns its context's error when the context ends first (rank 1 is
// away, polling nothing), and the operation goes on: a collective in the
// background with a copy of this rank's data (rank 1 gets rank 0's
// original data although rank 0 overwrote it), and gets, puts and atomics
// complete, each once, as their handles then show.
func TestWaitContextGoesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runJob(t, 2, memNet(amudptest.New(12, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			seg, err := j.Attach(nil, 4096)
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
				t.Errorf("rank %d: barrier after the bounded waits: %v", me, err)
			}

			// Remote memory: rank 1 is away again while rank 0 gets, puts
			// and adds.
			buf := bytes.Repeat([]byte{0xee}, 8)
			vbuf := bytes.Repeat([]byte{0xee}, 4)
			if me == 0 {
				time.Sleep(100 * time.Millisecond) // rank 1 away
				var hs []Waiter
				wait := func(name string, h interface {
					Waiter
					WaitContext(context.Context) error
				}, err error) {
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
					defer cancel()
					if err := h.WaitContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: WaitContext while the target is away = %v, want the deadline", name, err)
					}
					hs = append(hs, h)
				}
				h, err := j.GetNB(1, 0, buf)
				wait("GetNB", errOnly[struct{}]{h}, err)
				h, err = j.GetVNB(1, []Piece{{Offset: 8, Data: vbuf[:2]}, {Offset: 16, Data: vbuf[2:]}})
				wait("GetVNB", errOnly[struct{}]{h}, err)
				h, err = j.PutNB(1, 64, []byte("put data"))
				wait("PutNB", errOnly[struct{}]{h}, err)
				h, err = j.PutStridedNB(1, Strided{Offset: 256, Stride: 8, Count: 2, Size: 2}, []byte("abcd"), 2)
				wait("PutStridedNB", errOnly[struct{}]{h}, err)
				fh, err := NewAtomics[uint64](j).FetchNB(1, 128, AtomicAdd, 5, 0)
				wait("FetchNB", errOnly[uint64]{fh}, err)
				h, err = NewAtomics[uint64](j).ApplyNB(1, 136, AtomicInc, 0, 0)
				wait("ApplyNB", errOnly[struct{}]{h}, err)
				if err := WaitAll(hs...); err != nil {
					t.Errorf("the operations whose waits gave up: %v", err)
				}
				if old, _ := fh.Wait(); old != 0 {
					t.Errorf("FetchNB fetched %d, want 0", old)
				}
			} else {
				copy(seg, bytes.Repeat([]byte{0x11}, 32))
				time.Sleep(time.Second)
			}
			j.World().Barrier() // every request of rank 0 answered: the replies have come
			j.World().Barrier()
			if me == 0 {
				if !bytes.Equal(buf, bytes.Repeat([]byte{0x11}, 8)) || !bytes.Equal(vbuf, bytes.Repeat([]byte{0x11}, 4)) {
					t.Errorf("gets whose waits gave up and went on read %x %x, want 0x11 bytes", buf, vbuf)
				}
			} else {
				if got := string(seg[64:72]); got != "put data" {
					t.Errorf("the put whose wait gave up wrote %q", got)
				}
				if got := string([]byte{seg[256], seg[257], seg[264], seg[265]}); got != "abcd" {
					t.Errorf("the strided put whose wait gave up wrote %q", got)
				}
				if a, b := binary.LittleEndian.Uint64(seg[128:]), binary.LittleEndian.Uint64(seg[136:]); a != 5 || b != 1 {
					t.Errorf("atomics whose waits gave up: words %d and %d, want 5 and 1 (each applied once)", a, b)
				}
			}
		})
	})
}

// contextTimeouts is rank 0's part of TestWaitContextGoesOn: a wait bounded by
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

// contextPeer is rank 1's part of TestWaitContextGoesOn: the same collectives,
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
		j.World().Barrier()
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

// errOnly is a handle's WaitContext without its result.
type errOnly[T any] struct{ *Handle[T] }

func (h errOnly[T]) WaitContext(ctx context.Context) error {
	_, err := h.Handle.WaitContext(ctx)
	return err
}
