package conduit

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/amudp/amudptest"
	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// atomicNets are the networks the atomics' job tests run on: real UDP on
// loopback; every rank sharing memory (processor atomics on the
// mappings); pairs sharing memory, so that one word is changed by a
// processor atomic of its owner's neighbour and by requests from the
// other pair at once; and, in a synctest bubble, an in-memory network that
// drops 20% and duplicates 5% of the datagrams.
func atomicNets(t *testing.T, body func(t *testing.T, jn jobNet)) {
	t.Run("udp", func(t *testing.T) { body(t, loopbackUDP) })
	t.Run("shared", func(t *testing.T) { body(t, loopbackShared(t)) })
	t.Run("pairs", func(t *testing.T) { body(t, loopbackGroups(t, 2, false)) })
	t.Run("loss", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			lnet := amudptest.New(7, 0.20, 0.05, 300*time.Microsecond)
			body(t, memNet(lnet))
			if lnet.Dropped() == 0 || lnet.Duplicated() == 0 {
				t.Errorf("the network dropped %d and duplicated %d datagrams: the test did not test loss", lnet.Dropped(), lnet.Duplicated())
			}
		})
	})
}

// TestAtomicCounters: every rank adds 1 to one word of rank 0 many times,
// fetching, and increments a 32-bit word of rank 1 without fetching, in
// batches of non-blocking operations. Each operation happens exactly once:
// the fetched values are 0..total-1, each once, and both words end at the
// total.
func TestAtomicCounters(t *testing.T) {
	atomicNets(t, func(t *testing.T, jn jobNet) {
		const n = 4
		k := 2500
		if testing.Short() || jn.limit == time.Hour {
			k = 500
		}
		var mu sync.Mutex
		var fetched []uint64
		final := make([]uint64, 2)
		res, jobs := runJob(t, n, jn, false, func(j *Job) {
			if _, err := j.Attach(nil, 64); err != nil {
				t.Errorf("rank %d: Attach: %v", j.Rank(), err)
				return
			}
			a64, a32 := NewAtomics[uint64](j), NewAtomics[uint32](j)
			mine := make([]uint64, 0, k)
			var batch []*Handle[struct{}]
			for i := range k {
				old, err := a64.Fetch(0, 8, AtomicAdd, 1, 0)
				if err != nil {
					t.Errorf("rank %d: Fetch: %v", j.Rank(), err)
					return
				}
				mine = append(mine, old)
				h, err := a32.ApplyNB(1, 4, AtomicInc, 0, 0)
				if err != nil {
					t.Errorf("rank %d: ApplyNB: %v", j.Rank(), err)
					return
				}
				if batch = append(batch, h); len(batch) == 8 || i == k-1 {
					for _, h := range batch {
						if _, err := h.Wait(); err != nil {
							t.Errorf("rank %d: Wait: %v", j.Rank(), err)
							return
						}
					}
					batch = batch[:0]
				}
			}
			mu.Lock()
			fetched = append(fetched, mine...)
			mu.Unlock()
			if err := j.World().Barrier(); err != nil {
				t.Errorf("rank %d: Barrier: %v", j.Rank(), err)
			}
			if j.Rank() < 2 {
				v, err := a64.Fetch(0, 8, AtomicGet, 0, 0)
				w, err2 := a32.Fetch(1, 4, AtomicGet, 0, 0)
				if err != nil || err2 != nil {
					t.Errorf("rank %d: reading the counters: %v, %v", j.Rank(), err, err2)
				}
				final[j.Rank()] = v + uint64(w)<<32
			}
			if err := j.World().Barrier(); err != nil { // rank 0 and 1 serve the reads
				t.Errorf("rank %d: Barrier: %v", j.Rank(), err)
			}
		})
		if res.Code != 0 {
			t.Fatalf("job ended %+v", res)
		}
		total := uint64(n * k)
		slices.Sort(fetched)
		for i, v := range fetched {
			if v != uint64(i) {
				t.Fatalf("fetched values: %d at position %d of %d (a lost or repeated add)", v, i, len(fetched))
			}
		}
		for r, v := range final {
			if v != total|total<<32 {
				t.Errorf("rank %d reads the 64-bit counter %d and the 32-bit one %d, want %d each", r, uint32(v), v>>32, total)
			}
		}
		if jn.limit != time.Hour {
			return
		}
		var resent uint64
		for _, j := range jobs {
			resent += j.ep.Stats().Retransmits
		}
		if resent == 0 {
			t.Errorf("no retransmission under loss")
		}
	})
}

// wordOp is one operation of the model test, on word w.
type wordOp struct {
	w     int
	op    amo.Op
	x, y  uint64
	fetch bool
	rank  int
	want  uint64 // the model's fetched value
}

// atomicBits applies o through the Atomics of the word's kind and returns
// its handle.
func atomicBits(j *Job, k amo.Kind, o *wordOp, off uint64) (func() (uint64, error), error) {
	switch k {
	case amo.Int32:
		return startBits(NewAtomics[int32](j), o, off)
	case amo.Uint32:
		return startBits(NewAtomics[uint32](j), o, off)
	case amo.Int64:
		return startBits(NewAtomics[int64](j), o, off)
	case amo.Uint64:
		return startBits(NewAtomics[uint64](j), o, off)
	case amo.Float32:
		return startBits(NewAtomics[float32](j), o, off)
	}
	return startBits(NewAtomics[float64](j), o, off)
}

func startBits[T Word](a *Atomics[T], o *wordOp, off uint64) (func() (uint64, error), error) {
	x, y := fromBits[T](o.x), fromBits[T](o.y)
	if o.fetch {
		h, err := a.FetchNB(o.rank, off, AtomicOp(o.op), x, y)
		if err != nil {
			return nil, err
		}
		return func() (uint64, error) { v, err := h.Wait(); return toBits(v), err }, nil
	}
	h, err := a.ApplyNB(o.rank, off, AtomicOp(o.op), x, y)
	if err != nil {
		return nil, err
	}
	return func() (uint64, error) { _, err := h.Wait(); return 0, err }, nil
}

// TestAtomicModel is a quick-check against a sequential model: each rank
// owns words of every kind in every rank's segment and applies random
// operations with random operands to them (several at once, on different
// words), which the model (package amo's Compute) predicts one by one;
// every fetched value, and at the end every word, read by Get, must be
// the model's.
func TestAtomicModel(t *testing.T) {
	atomicNets(t, func(t *testing.T, jn jobNet) {
		const (
			n     = 4
			words = 12 // per owner and rank: two of each kind
		)
		ops := 600
		if jn.limit == time.Hour {
			ops = 250
		}
		kindOf := func(w int) amo.Kind { return amo.Kind(1 + w%6) }
		// Word w of owner o in rank r's segment is at (o*words + w) * 8.
		offset := func(owner, w int) uint64 {
			off := uint64(owner*words+w) * 8
			if kindOf(w).Size() == 4 && w%12 >= 6 {
				off += 4 // the other half of a double word
			}
			return off
		}
		res, _ := runJob(t, n, jn, false, func(j *Job) {
			me := j.Rank()
			if _, err := j.Attach(nil, n*words*8); err != nil {
				t.Errorf("rank %d: Attach: %v", me, err)
				return
			}
			rng := rand.New(rand.NewPCG(uint64(me), 99))
			model := make([][]uint64, n) // [rank][word]
			for r := range model {
				model[r] = make([]uint64, words)
			}
			val := func(k amo.Kind) uint64 {
				v := []uint64{rng.Uint64() >> rng.IntN(64), 0, 1, math.MaxUint64}[rng.IntN(4)]
				switch k {
				case amo.Float32:
					return uint64(math.Float32bits(float32(rng.NormFloat64() * 100)))
				case amo.Float64:
					return math.Float64bits(rng.NormFloat64() * 1e6)
				}
				return v
			}
			type pending struct {
				o    wordOp
				wait func() (uint64, error)
			}
			var inflight []pending
			busy := map[[2]int]bool{}
			drain := func() bool {
				for _, p := range inflight {
					got, err := p.wait()
					if err != nil {
						t.Errorf("rank %d: %v on rank %d word %d: %v", me, p.o.op, p.o.rank, p.o.w, err)
						return false
					}
					if p.o.fetch && got != p.o.want {
						t.Errorf("rank %d: %v %v on rank %d word %d (x %#x, y %#x) fetched %#x, the model %#x", me, kindOf(p.o.w), p.o.op, p.o.rank, p.o.w, p.o.x, p.o.y, got, p.o.want)
						return false
					}
				}
				inflight = inflight[:0]
				clear(busy)
				return true
			}
			for range ops {
				o := wordOp{w: rng.IntN(words), rank: rng.IntN(n), op: amo.Op(1 + rng.IntN(14)), fetch: rng.IntN(3) > 0}
				k := kindOf(o.w)
				if amo.Check(k, o.op) != nil || (!o.fetch && o.op == amo.Get) || busy[[2]int{o.rank, o.w}] {
					continue
				}
				o.x, o.y = val(k), val(k)
				if o.op == amo.CompareSwap && rng.IntN(2) == 0 {
					o.x = model[o.rank][o.w]
				}
				cur := model[o.rank][o.w]
				o.want = cur
				model[o.rank][o.w] = amo.Compute(k, o.op, cur, o.x, o.y)
				wait, err := atomicBits(j, k, &o, offset(me, o.w))
				if err != nil {
					t.Errorf("rank %d: %v on rank %d: %v", me, o.op, o.rank, err)
					return
				}
				inflight = append(inflight, pending{o, wait})
				busy[[2]int{o.rank, o.w}] = true
				if len(inflight) >= 1+rng.IntN(6) && !drain() {
					return
				}
			}
			if !drain() {
				return
			}
			if err := j.World().Barrier(); err != nil {
				t.Errorf("rank %d: Barrier: %v", me, err)
				return
			}
			buf := make([]byte, words*8)
			for r := range n {
				if err := j.Get(r, uint64(me*words*8), buf); err != nil {
					t.Errorf("rank %d: Get from %d: %v", me, r, err)
					return
				}
				for w := range words {
					off := offset(me, w) - uint64(me*words*8)
					var got uint64
					for b := range kindOf(w).Size() {
						got |= uint64(buf[off+uint64(b)]) << (8 * b)
					}
					if got != model[r][w] {
						t.Errorf("rank %d: word %d (%v) of rank %d holds %#x, the model %#x", me, w, kindOf(w), r, got, model[r][w])
					}
				}
			}
			if err := j.World().Barrier(); err != nil { // every rank serves the Gets
				t.Errorf("rank %d: Barrier: %v", me, err)
			}
		})
		if res.Code != 0 {
			t.Fatalf("job ended %+v", res)
		}
	})
}

// TestAtomicCASLock: a lock taken by compare-and-swap and released by an
// atomic set guards a counter that ranks read with Get and write with Put:
// no update is lost.
func TestAtomicCASLock(t *testing.T) {
	for _, c := range []struct {
		name string
		jn   func(t *testing.T) jobNet
	}{{"udp", func(*testing.T) jobNet { return loopbackUDP }}, {"pairs", func(t *testing.T) jobNet { return loopbackGroups(t, 2, false) }}} {
		t.Run(c.name, func(t *testing.T) {
			const n, k = 4, 100
			var final uint64
			res, _ := runJob(t, n, c.jn(t), false, func(j *Job) {
				me := j.Rank()
				if _, err := j.Attach(nil, 64); err != nil {
					t.Errorf("rank %d: Attach: %v", me, err)
					return
				}
				lock := NewAtomics[int64](j)
				buf := make([]byte, 8)
				for range k {
					for {
						old, err := lock.Fetch(0, 0, AtomicCompareSwap, 0, int64(me+1))
						if err != nil {
							t.Errorf("rank %d: lock: %v", me, err)
							return
						}
						if old == 0 {
							break
						}
					}
					if err := j.Get(0, 8, buf); err != nil {
						t.Errorf("rank %d: Get: %v", me, err)
						return
					}
					buf[0]++ // the counter's bytes, little-endian
					for i := 0; buf[i] == 0 && i < 7; i++ {
						buf[i+1]++
					}
					if err := j.Put(0, 8, buf); err != nil {
						t.Errorf("rank %d: Put: %v", me, err)
						return
					}
					if err := lock.Apply(0, 0, AtomicSet, 0, 0); err != nil {
						t.Errorf("rank %d: unlock: %v", me, err)
						return
					}
				}
				if err := j.World().Barrier(); err != nil {
					t.Errorf("rank %d: Barrier: %v", me, err)
				}
				if me == 0 {
					v, _ := NewAtomics[uint64](j).Fetch(0, 8, AtomicGet, 0, 0)
					final = v
				}
			})
			if res.Code != 0 {
				t.Fatalf("job ended %+v", res)
			}
			if final != n*k {
				t.Errorf("counter %d, want %d: the lock let two ranks in", final, n*k)
			}
		})
	}
}

// TestAtomicErrors: what does not fit is an error that says why, and
// nothing is sent; a request that the owner's segment does not hold (as
// a corrupt one would be) is refused there, and its handle says so.
func TestAtomicErrors(t *testing.T) {
	res, _ := runJob(t, 2, loopbackUDP, false, func(j *Job) {
		a := NewAtomics[uint64](j)
		if _, err := a.Fetch(1, 0, AtomicAdd, 1, 0); !errors.Is(err, ErrNotAttached) {
			t.Errorf("before Attach: %v", err)
		}
		if _, err := j.Attach(nil, 64); err != nil {
			t.Errorf("Attach: %v", err)
			return
		}
		if j.Rank() != 0 {
			j.World().Barrier()
			return
		}
		f := NewAtomics[float64](j)
		sent := sentBy(j)
		for _, c := range []struct {
			name string
			err  error
			want string
			is   error // the package error it wraps
		}{
			{"misaligned", a.Apply(1, 4, AtomicAdd, 1, 0), "offset not aligned", ErrMisaligned},
			{"past the end", a.Apply(1, 64, AtomicAdd, 1, 0), "outside the remote segment", ErrOutOfSegment},
			{"past the end, 32 bits", func() error { _, err := NewAtomics[uint32](j).Fetch(1, 64, AtomicInc, 0, 0); return err }(), "outside the remote segment", ErrOutOfSegment},
			{"bitwise on a float", f.Apply(1, 0, AtomicXor, 1, 0), "integer words only", ErrAtomicOp},
			{"get without fetching", a.Apply(1, 0, AtomicGet, 0, 0), "only fetches", ErrAtomicOp},
			{"unknown operation", a.Apply(1, 0, AtomicOp(99), 0, 0), "unknown atomic operation", ErrAtomicOp},
			{"bad rank", a.Apply(2, 0, AtomicAdd, 1, 0), "outside the job", ErrBadRank},
			{"negative rank", a.Apply(-1, 0, AtomicAdd, 1, 0), "outside the job", ErrBadRank},
		} {
			if c.err == nil || !strings.Contains(c.err.Error(), c.want) || !errors.Is(c.err, c.is) {
				t.Errorf("%s: %v, want an error saying %q that wraps %v", c.name, c.err, c.want, c.is)
			}
		}
		if s := sentBy(j); s != sent {
			t.Errorf("%d datagrams sent for refused atomics", s-sent)
		}
		// A request past the owner's segment, as only a corrupt or forged
		// one can be: the owner refuses it.
		h := &rmaOp{peer: 1, job: j, what: "an atomic add"}
		j.rma.add(h)
		h.pending.Store(1)
		if err := j.ep.RequestShort(1, hAtomicReq, uint32(amo.Add)|uint32(amo.Uint64)<<8, 4096, 0, 1, 0, 0, 0, h.id); err != nil {
			t.Errorf("request: %v", err)
		}
		if err := h.wait(); !errors.Is(err, ErrOutOfSegment) || !strings.Contains(err.Error(), "refused an atomic add") {
			t.Errorf("a request past the owner's segment: %v", err)
		}
		j.World().Barrier()
	})
	if res.Code != 0 {
		t.Fatalf("job ended %+v", res)
	}
}

// TestHandleIDs: ids skip 0 (the handles of operations on a mapping) and
// those still waited for when they wrap; a forgotten id-0 handle removes
// nothing.
func TestHandleIDs(t *testing.T) {
	r := rma{next: math.MaxUint32 - 2}
	live := &rmaOp{}
	r.add(live) // MaxUint32-1
	r.next = math.MaxUint32 - 3
	var ids []uint32
	for range 3 {
		h := &rmaOp{}
		r.add(h)
		ids = append(ids, h.id)
	}
	if want := []uint32{math.MaxUint32 - 2, math.MaxUint32, 1}; !slices.Equal(ids, want) {
		t.Errorf("ids %v, want %v", ids, want)
	}
	r.forget(&rmaOp{}) // id 0
	if r.get(1) == nil || r.get(live.id) != live {
		t.Errorf("forgetting an id-0 handle removed another")
	}
}

// TestHandleDoneLeavesNothing: a non-blocking atomic whose caller only
// looks at Done leaves no entry behind once it completes.
func TestHandleDoneLeavesNothing(t *testing.T) {
	res, _ := runJob(t, 2, loopbackUDP, false, func(j *Job) {
		if _, err := j.Attach(nil, 64); err != nil {
			t.Errorf("Attach: %v", err)
			return
		}
		if j.Rank() == 0 {
			h, err := NewAtomics[uint64](j).ApplyNB(1, 0, AtomicAdd, 1, 0)
			if err != nil {
				t.Errorf("ApplyNB: %v", err)
			} else if err := j.WaitUntil(h.Test); err != nil {
				t.Errorf("WaitUntil: %v", err)
			}
			j.rma.mu.Lock()
			if n := len(j.rma.handles); n != 0 {
				t.Errorf("%d handles left after the atomic completed", n)
			}
			j.rma.mu.Unlock()
		}
		j.World().Barrier()
	})
	if res.Code != 0 {
		t.Fatalf("job ended %+v", res)
	}
}
