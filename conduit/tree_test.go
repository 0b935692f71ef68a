package conduit

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// returnedAll is the result of a job whose ranks all returned.
func returnedAll(n int) jobResult {
	want := jobResult{}
	for range n {
		want.Ends = append(want.Ends, "returned")
	}
	return want
}

// TestBroadcastAndReduceOverAMs: broadcasts, reductions and all-reductions
// on 1 to 13 ranks under loss and duplication, from every root, with
// vectors that span several messages; every rank gets what the
// definitions say. The root broadcasts several times in a row while the
// others are late, so what it sends ahead must wait for them. Over the
// binomial tree, and over the two-level tree (groups of three consecutive
// ranks, as on hosts of three).
func TestBroadcastAndReduceOverAMs(t *testing.T) {
	for _, tree := range []string{"binomial", "hierarchical"} {
		for _, n := range []int{1, 2, 3, 5, 8, 13} {
			t.Run(fmt.Sprint(tree, "/", n), func(t *testing.T) { testBroadcastAndReduce(t, n, tree == "hierarchical") })
		}
	}
}

func testBroadcastAndReduce(t *testing.T, n int, hier bool) {
	synctest.Test(t, func(t *testing.T) {
		// Vector of rank r in step s: long enough to span two
		// medium messages.
		const elems = MaxMedium/8 + 5
		vec := func(r, s int) []uint64 {
			v := make([]uint64, elems)
			for i := range v {
				v[i] = uint64((r*7919+i*31+s)%1000) << (i % 50)
			}
			v[0] = math.MaxUint64 - uint64(r) // sums wrap
			return v
		}
		fvec := func(r, s int) []float64 {
			v := make([]float64, 17)
			for i := range v {
				v[i] = float64((r*131+i*7+s)%97) - 40 // integers: exact sums in any order
			}
			return v
		}
		blob := func(root, s int) []byte {
			b := make([]byte, []int{0, 1, MaxMedium, 2*MaxMedium + 9}[(root+s)%4])
			for i := range b {
				b[i] = byte(root*13 + s + i)
			}
			return b
		}
		jn := memNet(amudptest.New(uint64(n), 0.1, 0.05, 100*time.Microsecond))
		if hier {
			jn.barrier = barrierHier
		}
		res, _ := runJob(t, n, jn, false, func(j *Job) {
			me := j.Rank()
			for s := range 3 { // the root's broadcasts run ahead
				if me != 0 {
					time.Sleep(10 * time.Millisecond)
				}
				got, err := j.World().Broadcast(0, blob(0, s))
				if err != nil || !bytes.Equal(got, blob(0, s)) {
					t.Errorf("rank %d: broadcast %d from 0: %d bytes, %v", me, s, len(got), err)
				}
			}
			for root := range n {
				s := root + 10
				var data []byte
				if me == root {
					data = blob(root, s)
				}
				got, err := j.World().Broadcast(root, data)
				if err != nil || !bytes.Equal(got, blob(root, s)) {
					t.Errorf("rank %d: broadcast from %d: %d bytes, %v", me, root, len(got), err)
				}
				for _, op := range []Op{Sum, Min, Max} {
					want, fwant := vec(0, s), fvec(0, s)
					for r := 1; r < n; r++ {
						for i, x := range vec(r, s) {
							want[i] = map[Op]uint64{Sum: want[i] + x, Min: min(want[i], x), Max: max(want[i], x)}[op]
						}
						for i, x := range fvec(r, s) {
							fwant[i] = map[Op]float64{Sum: fwant[i] + x, Min: min(fwant[i], x), Max: max(fwant[i], x)}[op]
						}
					}
					got, err := Reduce(j.World(), root, op, vec(me, s))
					if me != root {
						want = nil
					}
					if err != nil || !cmp.Equal(got, want) {
						t.Errorf("rank %d: %v reduction to %d: %v (%d elements)", me, op, root, err, len(got))
					}
					fgot, err := AllReduce(j.World(), op, fvec(me, s))
					if d := cmp.Diff(fwant, fgot); err != nil || d != "" {
						t.Errorf("rank %d: %v all-reduction: %v %s", me, op, err, d)
					}
				}
			}
		})
		if d := cmp.Diff(returnedAll(n), res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// TestReduceDefinitions: the operators on the edge values, each against a
// definition written out.
func TestReduceDefinitions(t *testing.T) {
	u := func(op Op, a, b uint64) uint64 {
		acc := encodeVec([]uint64{a})
		coll.OpCombine(op, amo.Uint64)(acc, encodeVec([]uint64{b}))
		return decodeVec[uint64](acc)[0]
	}
	f := func(op Op, a, b float64) float64 {
		acc := encodeVec([]float64{a})
		coll.OpCombine(op, amo.Float64)(acc, encodeVec([]float64{b}))
		return decodeVec[float64](acc)[0]
	}
	if got := u(Sum, math.MaxUint64, 2); got != 1 {
		t.Errorf("uint64 sum wraps to %d, want 1", got)
	}
	if got := u(Min, 3, math.MaxUint64); got != 3 {
		t.Errorf("uint64 min = %d", got)
	}
	if got := u(Max, 3, math.MaxUint64); got != math.MaxUint64 {
		t.Errorf("uint64 max = %d", got)
	}
	if got := f(Sum, 0.5, -2); got != -1.5 {
		t.Errorf("float64 sum = %v", got)
	}
	if got := f(Min, math.Inf(-1), 1); !math.IsInf(got, -1) {
		t.Errorf("float64 min = %v", got)
	}
	if got := f(Max, 1, math.NaN()); !math.IsNaN(got) {
		t.Errorf("float64 max with a NaN = %v, want NaN", got)
	}
}

// TestTreeCollectiveMisuse: a root out of range and an unknown operator
// are refused on every rank (each wraps ErrBadRank or ErrReduceOp, and
// ErrCollectiveArgument), and the next call matches on every rank; ranks
// that call different reductions are told so instead of combining what
// does not belong together.
func TestTreeCollectiveMisuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		errs := make([][]error, n)
		res, _ := runJob(t, n, memNet(amudptest.New(9, 0, 0, 0)), false, func(j *Job) {
			me := j.Rank()
			_, err := j.World().Broadcast(n, nil)
			errs[me] = append(errs[me], err)
			_, err = Reduce(j.World(), 0, Op(9), []uint64{1})
			errs[me] = append(errs[me], err)
			if got, err := AllReduce(j.World(), Sum, []uint64{uint64(me)}); err != nil || !cmp.Equal(got, []uint64{6}) {
				t.Errorf("rank %d: after the refused calls, the sum is %v, %v", me, got, err)
			}
			// Rank 0 reduces uint64 while the others reduce float64:
			// rank 1's message reaches rank 0, which names it.
			if me == 0 {
				_, err = Reduce(j.World(), 0, Max, []uint64{1})
				errs[me] = append(errs[me], err)
			} else {
				Reduce(j.World(), 0, Max, []float64{1})
			}
			// The program goes on, as programs do: a rank that
			// returned at once could end before the difference
			// reached it, and a job whose every rank returned ends
			// with 0.
			j.World().Barrier()
		})
		for r, e := range errs {
			if len(e) < 2 || !errors.Is(e[0], ErrBadRank) || !errors.Is(e[0], ErrCollectiveArgument) || !strings.Contains(e[0].Error(), "root 4: accepted: a team rank from 0 to 3") ||
				!errors.Is(e[1], ErrReduceOp) || !errors.Is(e[1], ErrCollectiveArgument) || !strings.Contains(e[1].Error(), "Op(9)") {
				t.Errorf("rank %d's errors: %v", r, e)
			}
		}
		if len(errs[0]) != 3 || !errors.Is(errs[0][2], ErrCollectiveMismatch) || !strings.Contains(errs[0][2].Error(), "reduce max of float64 (length 1) to root 0") ||
			!strings.Contains(errs[0][2].Error(), "team rank 0 reduce max of uint64") {
			t.Errorf("rank 0's errors: %v", errs[0])
		}
		// The others left their reduction with nothing to wait for: the
		// difference reaches them after, in the barrier at the latest
		// (rank 0 sent it before it arrived there, and this network
		// neither loses nor reorders), and the job aborts naming it.
		if res.Code != 1 || !strings.Contains(res.Why, "the ranks called different collectives") {
			t.Errorf("job ended %d (%q): %q; want 1 and the mismatch", res.Code, res.Ends, res.Why)
		}
	})
}

// TestAllReduceMismatchErrsEverywhere: ranks whose all-reduces differ in
// element type, vector length or operator all return an error wrapping
// ErrCollectiveMismatch that names the difference (the rank that meets it
// sends it up the tree in place of data, and the root sends it down), none
// waits forever, and the next all-reduce of every rank still matches.
// Over messages under loss, and with the ranks sharing memory, where every
// rank sees the difference in the slots and runs the all-reduce over
// messages instead.
func TestAllReduceMismatchErrsEverywhere(t *testing.T) {
	for _, tt := range []struct {
		name string
		odd  func(j *Job) error // what rank 3 calls; the others sum uint64s
		want string
	}{
		{"float64 on one rank", func(j *Job) error { _, err := AllReduce(j.World(), Sum, []float64{1}); return err },
			"all-reduce sum of float64"},
		{"a longer vector on one rank", func(j *Job) error { _, err := AllReduce(j.World(), Sum, []uint64{1, 2}); return err },
			"all-reduce sum of uint64 (length 2)"},
		{"another operator on one rank", func(j *Job) error { _, err := AllReduce(j.World(), Max, []uint64{1}); return err },
			"all-reduce max of uint64"},
	} {
		run := func(t *testing.T, jn jobNet) {
			const n = 6
			errs := make([]error, n)
			runJob(t, n, jn, false, func(j *Job) {
				me := j.Rank()
				if me == 3 {
					errs[me] = tt.odd(j)
				} else {
					_, errs[me] = AllReduce(j.World(), Sum, []uint64{1})
				}
				got, err := AllReduce(j.World(), Sum, []uint64{uint64(me)})
				if err != nil || !cmp.Equal(got, []uint64{15}) {
					t.Errorf("rank %d: the next all-reduce gave %v, %v", me, got, err)
				}
				j.World().Barrier()
			})
			for r, err := range errs {
				if !errors.Is(err, ErrCollectiveMismatch) || !strings.HasPrefix(err.Error(), "all-reduce 1: ") || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("rank %d: %v; want ErrCollectiveMismatch naming %q", r, err, tt.want)
				}
			}
		}
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { run(t, memNet(amudptest.New(11, 0.1, 0.05, 0))) })
		})
		t.Run(tt.name+"/shared words", func(t *testing.T) { run(t, loopbackShared(t)) })
	}
}

// TestBroadcastRootsDiffer: ranks that pass different roots to one
// broadcast (each its own rank, or two groups of two roots) never all
// return data as if it had matched: every rank returns an error wrapping
// ErrCollectiveMismatch that names both roots, or the job aborts with
// code 1 (a message that reaches a rank after it left the broadcast); no
// rank waits forever, and the job never ends 0 with a rank that returned
// nil.
func TestBroadcastRootsDiffer(t *testing.T) {
	for _, tt := range []struct {
		name string
		n    int
		root func(me int) int
	}{
		{"each its own, 2 ranks", 2, func(me int) int { return me }},
		{"each its own, 5 ranks", 5, func(me int) int { return me }},
		{"rank 3 another root", 6, func(me int) int { return map[bool]int{true: 1, false: 0}[me == 3] }},
		{"halves", 4, func(me int) int { return me / 2 }},
	} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", tt.name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					errs := make([]error, tt.n)
					returned := make([]bool, tt.n)
					res, _ := runJob(t, tt.n, memNet(amudptest.New(seed, 0.1, 0.05, 100*time.Microsecond)), false, func(j *Job) {
						me := j.Rank()
						_, errs[me] = j.World().Broadcast(tt.root(me), []byte{byte(me)})
						returned[me] = true
						j.World().Barrier()
					})
					aborted := res.Code == 1 && slices.Contains(res.Ends, "abort 1")
					if !aborted && res.Code != 0 {
						t.Fatalf("job code %d, ends %q: want 1 with an abort, or 0", res.Code, res.Ends)
					}
					for r, err := range errs {
						switch {
						case err != nil && !errors.Is(err, ErrCollectiveMismatch):
							t.Errorf("rank %d: %v, want ErrCollectiveMismatch", r, err)
						case err != nil && !strings.Contains(err.Error(), "broadcast from root "):
							t.Errorf("rank %d: %v names no broadcast", r, err)
						case err == nil && returned[r] && !aborted:
							t.Errorf("rank %d returned nil from a broadcast whose roots differ, and the job ended 0 (%q)", r, res.Ends)
						}
					}
				})
			})
		}
	}
}
