package conduit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// checkTeam runs every collective of t once and checks each result against
// what the members passed, which follow from their job ranks. It reports
// through t.Errorf, naming the team by label.
func checkTeam(tb testing.TB, label string, tm *Team) {
	n, me := tm.Size(), tm.Rank()
	jr := func(r int) int { return tm.JobRank(r) }
	fail := func(what string, got, want any, err error) {
		tb.Helper()
		if err != nil || !cmp.Equal(got, want, cmpopts.EquateEmpty()) {
			tb.Errorf("%s, team rank %d of %d: %s = %v, %v; want %v", label, me, n, what, got, err, want)
		}
	}
	if err := tm.Barrier(); err != nil {
		tb.Errorf("%s: barrier: %v", label, err)
	}
	root := n - 1
	got, err := tm.Broadcast(root, pattern(jr(root), 100+70000*(root%2)))
	fail("broadcast", got, pattern(jr(root), 100+70000*(root%2)), err)

	all, err := tm.AllGather(pattern(jr(me), me*10))
	want := make([][]byte, n)
	for r := range want {
		want[r] = pattern(jr(r), r*10)
	}
	fail("all-gather", all, want, err)

	g, err := tm.Gather(n/2, pattern(jr(me), 3+me))
	if me == n/2 {
		w := make([][]byte, n)
		for r := range w {
			w[r] = pattern(jr(r), 3+r)
		}
		fail("gather", g, w, err)
	} else {
		fail("gather", g, [][]byte(nil), err)
	}

	var parts [][]byte
	if me == 0 {
		for r := range n {
			parts = append(parts, pattern(100+jr(r), r+1))
		}
	}
	s, err := tm.Scatter(0, parts)
	fail("scatter", s, pattern(100+jr(me), me+1), err)

	// Block r of rank me's all-to-all names both.
	block := func(from, to int) []byte { return []byte{byte(jr(from)), byte(jr(to)), 7, byte(from * to)} }
	var send, wantA []byte
	for r := range n {
		send = append(send, block(me, r)...)
		wantA = append(wantA, block(r, me)...)
	}
	a, err := tm.Alltoall(send)
	fail("all-to-all", a, wantA, err)
	// Blocks over coll.BruckMax go straight to their member.
	bigBlock := func(from, to int) []byte { return pattern(jr(from)*64+jr(to), coll.BruckMax+44) }
	send, wantA = nil, nil
	for r := range n {
		send = append(send, bigBlock(me, r)...)
		wantA = append(wantA, bigBlock(r, me)...)
	}
	a, err = tm.Alltoall(send)
	fail("all-to-all of large blocks", a, wantA, err)

	vparts := make([][]byte, n)
	wantV := make([][]byte, n)
	for r := range n {
		vparts[r] = pattern(jr(me)*1000+jr(r), (me+r)%5*3)
		wantV[r] = pattern(jr(r)*1000+jr(me), (r+me)%5*3)
	}
	v, err := tm.Alltoallv(vparts)
	fail("all-to-all-v", v, wantV, err)

	var sum int64
	for r := range n {
		sum += int64(jr(r))
	}
	red, err := AllReduce(tm, Sum, []int64{int64(jr(me)), 1})
	fail("all-reduce", red, []int64{sum, int64(n)}, err)
	mx, err := Reduce(tm, 1%n, Max, []float32{float32(jr(me))})
	if me == 1%n {
		hi := float32(0)
		for r := range n {
			hi = max(hi, float32(jr(r)))
		}
		fail("reduce max", mx, []float32{hi}, err)
	} else {
		fail("reduce max", mx, []float32(nil), err)
	}
	if err := tm.Barrier(); err != nil {
		tb.Errorf("%s: barrier: %v", label, err)
	}
}

// TestTeamGrid: 16 ranks as a 4×4 grid, split into rows and into columns
// (whose keys reverse the ranks' order); every collective runs on all
// rows at once, then on all columns, then on the halves of each row (a
// nested split), and each team translates between its ranks and the job's.
func TestTeamGrid(t *testing.T) {
	const side = 4
	res, _ := runJob(t, side*side, loopbackUDP, false, func(j *Job) {
		me := j.Rank()
		row, err := j.World().Split(me/side, me%side)
		if err != nil {
			t.Fatalf("rank %d: row split: %v", me, err)
		}
		col, err := j.World().Split(me%side, -me)
		if err != nil {
			t.Fatalf("rank %d: column split: %v", me, err)
		}
		if row.Size() != side || row.Rank() != me%side || col.Size() != side || col.Rank() != side-1-me/side {
			t.Errorf("rank %d: row rank %d of %d, column rank %d of %d", me, row.Rank(), row.Size(), col.Rank(), col.Size())
		}
		for r := range side {
			if got := row.JobRank(r); got != me/side*side+r {
				t.Errorf("rank %d: row rank %d is job rank %d", me, r, got)
			}
			if got := col.JobRank(r); got != (side-1-r)*side+me%side {
				t.Errorf("rank %d: column rank %d is job rank %d", me, r, got)
			}
		}
		if r, ok := col.TeamRank(me); !ok || r != col.Rank() {
			t.Errorf("rank %d: TeamRank of itself in its column = %d, %v", me, r, ok)
		}
		if _, ok := row.TeamRank((me + side) % (side * side)); ok {
			t.Errorf("rank %d: the rank below is in its row", me)
		}
		checkTeam(t, fmt.Sprintf("row %d", me/side), row)
		checkTeam(t, fmt.Sprintf("column %d", me%side), col)
		half, err := row.Split(row.Rank()/2, 0)
		if err != nil || half.Size() != 2 || half.JobRank(half.Rank()) != me {
			t.Fatalf("rank %d: nested split: %v, %v", me, half, err)
		}
		checkTeam(t, fmt.Sprintf("half of row %d", me/side), half)
		none, err := col.Split(-1, 0)
		if none != nil || err != nil {
			t.Errorf("rank %d: Split with a negative color = %v, %v; want nil, nil", me, none, err)
		}
		j.World().Barrier()
	})
	if res.Code != 0 || res.Why != "" {
		t.Errorf("job ended %d (%s): %q", res.Code, res.Why, res.Ends)
	}
}

// TestTeamCollectivesUnderLoss runs every collective on the whole job and
// on the odd and even ranks, at N = 1, 2, 3, 5, 8 and 13, over an
// in-memory network that drops 20% and duplicates 5% of the datagrams,
// with the algorithms of a job whose ranks fit their CPUs and of a crowded
// one (AMTREE: the all-to-all of small data through the tree).
func TestTeamCollectivesUnderLoss(t *testing.T) {
	for _, tc := range []struct {
		name string
		algo barrierAlgo
	}{{"dissemination", barrierDissem}, {"crowded", barrierTree}} {
		for _, n := range []int{1, 2, 3, 5, 8, 13} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				teamUnderLoss(t, n, tc.algo)
			})
		}
	}
}

// teamUnderLoss is a run of TestTeamCollectivesUnderLoss.
func teamUnderLoss(t *testing.T, n int, algo barrierAlgo) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(uint64(n), 0.20, 0.05, 200*time.Microsecond)
		jn := memNet(lnet)
		jn.barrier = algo
		res, _ := runJob(t, n, jn, false, func(j *Job) {
			checkTeam(t, "world", j.World())
			parity, err := j.World().Split(j.Rank()%2, j.Rank())
			if err != nil {
				t.Fatalf("rank %d: split: %v", j.Rank(), err)
			}
			checkTeam(t, fmt.Sprintf("parity %d", j.Rank()%2), parity)
			j.World().Barrier()
		})
		if res.Code != 0 {
			t.Errorf("job ended %d: %q", res.Code, res.Ends)
		}
		if n > 1 && (lnet.Dropped() == 0 || lnet.Duplicated() == 0) {
			t.Errorf("the network dropped %d and duplicated %d datagrams", lnet.Dropped(), lnet.Duplicated())
		}
	})
}

// TestTeamReductions checks every operator on every element type, and a
// program's own operator, against the members' values combined in rank
// order, on a sub-team and on the whole job (whose uint64 and float64
// Sum, Min and Max take the Job's own way).
func TestTeamReductions(t *testing.T) {
	const n = 5
	runJob(t, n, loopbackUDP, false, func(j *Job) {
		me := j.Rank()
		sub, err := j.World().Split(0, -me) // all ranks, in reverse
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range []*Team{j.World(), sub} {
			testReductions[int32](t, tm, func(r int) int32 { return int32(r*7 - 9) })
			testReductions[uint32](t, tm, func(r int) uint32 { return uint32(r*0x40000001 + 3) })
			testReductions[int64](t, tm, func(r int) int64 { return int64(r)<<40 - 5 })
			testReductions[uint64](t, tm, func(r int) uint64 { return uint64(r)*0x9e3779b97f4a7c15 + 1 })
			testReductions[float32](t, tm, func(r int) float32 { return float32(r) - 1.5 })
			testReductions[float64](t, tm, func(r int) float64 { return float64(r)*0.25 - 0.5 })
		}
		j.World().Barrier()
	})
}

func testReductions[T Word](t *testing.T, tm *Team, val func(jobRank int) T) {
	k := kindOf[T]()
	n, me := tm.Size(), tm.Rank()
	ops := []Op{Sum, Min, Max, Prod}
	if !k.IsFloat() {
		ops = append(ops, And, Or, Xor)
	}
	mine := []T{val(tm.JobRank(me)), val(tm.JobRank(me)) + 1}
	for _, op := range ops {
		want := slices.Clone(mine)
		for e := range want {
			acc := val(tm.JobRank(0)) + T(e)
			for r := 1; r < n; r++ {
				acc = applyOp(op, acc, val(tm.JobRank(r))+T(e))
			}
			want[e] = acc
		}
		got, err := AllReduce(tm, op, mine)
		if err != nil || !closeEnough(got, want) {
			t.Errorf("team of %d, rank %d: all-reduce %v of %v = %v, %v; want %v", n, me, op, k, got, err, want)
		}
		got, err = Reduce(tm, n-1, op, mine)
		if me == n-1 && (err != nil || !closeEnough(got, want)) || me != n-1 && (err != nil || got != nil) {
			t.Errorf("team of %d, rank %d: reduce %v of %v to %d = %v, %v; want %v there", n, me, op, k, n-1, got, err, want)
		}
	}
	got, err := AllReduceFunc(tm, func(a, b T) T { return max(a, b) - min(a, b) + 1 }, []T{1})
	if want := T(1); err != nil || len(got) != 1 || n > 1 && got[0] < want {
		t.Errorf("team of %d, rank %d: AllReduceFunc = %v, %v", n, me, got, err)
	}
	sum, err := AllReduceFunc(tm, func(a, b T) T { return a + b }, []T{2})
	if err != nil || !cmp.Equal(sum, []T{T(2 * n)}) {
		t.Errorf("team of %d, rank %d: AllReduceFunc(+) = %v, %v; want %d", n, me, sum, err, 2*n)
	}
	if k.IsFloat() {
		if _, err := AllReduce(tm, Xor, mine); !errors.Is(err, ErrReduceOp) {
			t.Errorf("Xor on %v: %v, want ErrReduceOp", k, err)
		}
	}
	if _, err := AllReduce(tm, Op(99), mine); !errors.Is(err, ErrReduceOp) {
		t.Errorf("Op(99): %v, want ErrReduceOp", err)
	}
}

// applyOp is op on two values, the model the reductions are checked on.
func applyOp[T Word](op Op, a, b T) T {
	switch op {
	case Sum:
		return a + b
	case Min:
		return min(a, b)
	case Max:
		return max(a, b)
	case Prod:
		return a * b
	}
	x, y := uint64(0), uint64(0)
	switch v := any(a).(type) {
	case int32:
		x, y = uint64(uint32(v)), uint64(uint32(any(b).(int32)))
	case uint32:
		x, y = uint64(v), uint64(any(b).(uint32))
	case int64:
		x, y = uint64(v), uint64(any(b).(int64))
	case uint64:
		x, y = v, any(b).(uint64)
	}
	var r uint64
	switch op {
	case And:
		r = x & y
	case Or:
		r = x | y
	case Xor:
		r = x ^ y
	}
	var out any
	switch any(a).(type) {
	case int32:
		out = int32(uint32(r))
	case uint32:
		out = uint32(r)
	case int64:
		out = int64(r)
	case uint64:
		out = r
	}
	return out.(T)
}

// closeEnough compares exactly, except that float sums and products may
// differ in their last bits (the tree adds in its own order).
func closeEnough[T Word](got, want []T) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if got[i] != want[i] && !(kindOf[T]().IsFloat() && math.Abs(g-w) <= 1e-5*math.Max(1, math.Abs(w))) {
			return false
		}
	}
	return true
}

// TestTeamMismatch: members that call one team collective differently
// (another length, operator, element type, root or kind) all return an
// ErrCollectiveMismatch naming the difference, none waits forever, and the
// team's next collective works: the member that meets the difference tells
// the others, whose calls end with its error.
func TestTeamMismatch(t *testing.T) {
	for _, tt := range []struct {
		name string
		odd  func(tm *Team) error // what team rank 2 calls
		want string
	}{
		{"a longer vector", func(tm *Team) error { _, err := AllReduce(tm, Sum, []int32{1, 2}); return err }, "all-reduce sum of int32 (length 2)"},
		{"another operator", func(tm *Team) error { _, err := AllReduce(tm, Max, []int32{1}); return err }, "all-reduce max of int32"},
		{"another type", func(tm *Team) error { _, err := AllReduce(tm, Sum, []uint32{1}); return err }, "all-reduce sum of uint32"},
		{"another kind", func(tm *Team) error { return tm.Barrier() }, "barrier"},
		{"another root", func(tm *Team) error { _, err := Reduce(tm, 2, Sum, []int32{1}); return err }, "to root 2"},
	} {
		for seed := uint64(1); seed <= 8; seed++ { // loss and delays differ: who meets it first
			t.Run(fmt.Sprintf("%s/seed %d", tt.name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { teamMismatch(t, seed, tt.odd, tt.want) })
			})
		}
	}
}

// teamMismatch runs one case of TestTeamMismatch: team rank 2 calls odd,
// the others an all-reduce.
func teamMismatch(t *testing.T, seed uint64, odd func(*Team) error, want string) {
	const n = 6
	errs := make([]error, n)
	res, _ := runJob(t, n, memNet(amudptest.New(seed, 0.1, 0.05, 100*time.Microsecond)), false, func(j *Job) {
		tm, err := j.World().Split(0, j.Rank())
		if err != nil {
			t.Fatal(err)
		}
		if tm.Rank() == 2 {
			errs[j.Rank()] = odd(tm)
		} else {
			_, errs[j.Rank()] = AllReduce(tm, Sum, []int32{1})
		}
		got, err := AllReduce(tm, Sum, []int32{int32(tm.Rank())})
		if err != nil || got[0] != 15 {
			t.Errorf("rank %d: the next all-reduce gave %v, %v", j.Rank(), got, err)
		}
		j.World().Barrier()
	})
	if res.Code != 0 {
		t.Errorf("job ended %d, %q (%q); want 0", res.Code, res.Ends, res.Why)
	}
	for r, err := range errs {
		if !errors.Is(err, ErrCollectiveMismatch) || !strings.Contains(err.Error(), " 1: ") || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %v; want ErrCollectiveMismatch naming %q", r, err, want)
		}
	}
}

// TestTeamBadArguments: arguments one member refuses fail the call on
// every member (a root out of range wraps ErrBadRank), and the next
// collective matches.
func TestTeamBadArguments(t *testing.T) {
	runJob(t, 3, loopbackUDP, false, func(j *Job) {
		w := j.World()
		if _, err := w.Broadcast(3, nil); !errors.Is(err, ErrBadRank) || !errors.Is(err, ErrCollectiveArgument) {
			t.Errorf("broadcast from root 3 of 3: %v", err)
		}
		if _, err := w.Gather(-1, nil); !errors.Is(err, ErrBadRank) {
			t.Errorf("gather to root -1: %v", err)
		}
		if _, err := w.Alltoall(make([]byte, 4)); !errors.Is(err, ErrCollectiveArgument) {
			t.Errorf("all-to-all of 4 bytes over 3 ranks: %v", err)
		}
		if _, err := w.Alltoallv(make([][]byte, 2)); !errors.Is(err, ErrCollectiveArgument) {
			t.Errorf("all-to-all-v of 2 parts over 3 ranks: %v", err)
		}
		var parts [][]byte
		if j.Rank() == 0 {
			parts = make([][]byte, 4)
		}
		if _, err := w.Scatter(0, parts); !errors.Is(err, ErrCollectiveArgument) || !strings.Contains(err.Error(), "4 parts for a team of 3") {
			t.Errorf("rank %d: scatter of 4 parts over 3 ranks: %v", j.Rank(), err)
		}
		if _, err := Reduce(w, -1, Prod, []int32{1}); !errors.Is(err, ErrBadRank) {
			t.Errorf("reduce to root -1: %v", err)
		}
		if _, err := Reduce(j.World(), 3, Xor, []uint64{1}); !errors.Is(err, ErrBadRank) {
			t.Errorf("ReduceUint64 Xor to root 3: %v", err)
		}
		if w.JobRank(3) != -1 || w.JobRank(-1) != -1 {
			t.Error("JobRank outside the team is not -1")
		}
		got, err := w.Alltoall(bytes.Repeat([]byte{byte(j.Rank())}, 3))
		if err != nil || !cmp.Equal(got, []byte{0, 1, 2}) {
			t.Errorf("rank %d: all-to-all after the refusals = %v, %v", j.Rank(), got, err)
		}
		j.World().Barrier()
	})
}

// TestTeamNonBlocking: collectives started without waiting, several at
// once on one team and on two, complete with the results of their
// blocking forms in the order they were started, whatever order each
// rank waits in; a blocking call after them takes its turn behind them.
func TestTeamNonBlocking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 6
		runJob(t, n, memNet(amudptest.New(5, 0.1, 0.05, 100*time.Microsecond)), false, func(j *Job) {
			me := j.Rank()
			half, err := j.World().Split(me%2, me)
			if err != nil {
				t.Fatal(err)
			}
			w := j.World()
			bar := w.BarrierNB()
			sum := AllReduceNB(half, Sum, []int64{int64(me)})
			bc := half.BroadcastNB(0, []byte{byte(me)})
			a2a := w.AlltoallNB(bytes.Repeat([]byte{byte(me)}, n))
			gat := GatherNBOf(w, me)
			mx := AllReduceNB(w, Max, []uint32{uint32(me)})
			// A blocking call waits for its turn behind the started ones.
			all, err := w.AllGather([]byte{byte(me)})
			if err != nil || len(all) != n || all[n-1][0] != n-1 {
				t.Errorf("rank %d: all-gather after the started ones = %v, %v", me, all, err)
			}
			if me%3 == 0 { // some ranks wait in reverse order
				if got, err := mx.Wait(); err != nil || got[0] != n-1 {
					t.Errorf("rank %d: max = %v, %v", me, got, err)
				}
			}
			if _, err := bar.Wait(); err != nil {
				t.Errorf("rank %d: barrier: %v", me, err)
			}
			want := int64(0)
			for r := me % 2; r < n; r += 2 {
				want += int64(r)
			}
			if got, err := sum.Wait(); err != nil || got[0] != want {
				t.Errorf("rank %d: half sum = %v, %v; want %d", me, got, err, want)
			}
			if got, err := bc.Wait(); err != nil || !cmp.Equal(got, []byte{byte(me % 2)}) {
				t.Errorf("rank %d: broadcast = %v, %v", me, got, err)
			}
			if got, err := a2a.Wait(); err != nil || !cmp.Equal(got, []byte{0, 1, 2, 3, 4, 5}) {
				t.Errorf("rank %d: all-to-all = %v, %v", me, got, err)
			}
			if got, err := gat.Wait(); err != nil || me == 0 && len(got) != n || me != 0 && got != nil {
				t.Errorf("rank %d: gather = %v, %v", me, got, err)
			}
			if got, err := mx.Wait(); err != nil || got[0] != n-1 || !mx.Test() {
				t.Errorf("rank %d: max = %v, %v", me, got, err)
			}
			j.World().Barrier()
		})
	})
}

// GatherNBOf starts a gather of the rank's number to team rank 0.
func GatherNBOf(t *Team, me int) *Handle[[][]byte] { return t.GatherNB(0, []byte{byte(me)}) }

// TestWaitContext: a wait bounded by a context that ends first returns
// its error and leaves the operation going; a later wait completes it.
func TestWaitContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		runJob(t, 2, memNet(amudptest.New(6, 0, 0, 100*time.Microsecond)), false, func(j *Job) {
			if _, err := j.Attach(nil, 64); err != nil {
				t.Fatal(err)
			}
			me := j.Rank()
			w := j.World()
			if me == 1 {
				time.Sleep(time.Second) // enters the barrier late
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := w.BarrierNB().WaitContext(ctx)
			if me == 0 && !errors.Is(err, context.DeadlineExceeded) || me == 1 && err != nil {
				t.Errorf("rank %d: BarrierContext = %v", me, err)
			}
			// The barrier went on: the next matches rank 1's second.
			if err := w.Barrier(); err != nil {
				t.Errorf("rank %d: barrier after: %v", me, err)
			}
			h, err := j.GetNB(1-me, 0, make([]byte, 8))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := h.WaitContext(context.Background()); err != nil {
				t.Errorf("rank %d: Handle.WaitContext = %v", me, err)
			}
			ah, err := NewAtomics[uint64](j).FetchNB(1-me, 8, AtomicAdd, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ah.WaitContext(context.Background()); err != nil {
				t.Errorf("rank %d: AtomicHandle.WaitContext = %v", me, err)
			}
			done, stop := context.WithCancel(context.Background())
			stop()
			if _, err := w.BarrierNB().WaitContext(done); !errors.Is(err, context.Canceled) && err != nil {
				t.Errorf("rank %d: WaitContext of a cancelled context = %v", me, err)
			}
			w.Barrier() // the cancelled wait's barrier went on: this is the next
		})
	})
}

// TestTeamCallOrder: calls on a team run one at a time in the order they
// were made, started non-blocking or not: a call waits for the one
// before it to end, not merely to begin.
func TestTeamCallOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tm := newTeam(&Team{})
		gate := make(chan struct{})
		var ran []int
		first := startNB(tm, func() (int, error) { <-gate; ran = append(ran, 1); return 1, nil })
		second := startNB(tm, func() (int, error) { ran = append(ran, 2); return 2, nil })
		third := make(chan int)
		go func() {
			v, _ := ordered(tm, func() (int, error) { ran = append(ran, 3); return 3, nil })
			third <- v
		}()
		synctest.Wait()
		if len(ran) != 0 || first.Test() || second.Test() {
			t.Fatalf("calls ran while the first waited: %v", ran)
		}
		close(gate)
		if v, _ := second.Wait(); v != 2 || <-third != 3 {
			t.Fatal("results out of place")
		}
		if !cmp.Equal(ran, []int{1, 2, 3}) {
			t.Errorf("calls ran in the order %v, want [1 2 3]", ran)
		}
	})
}

// TestTeamMismatchShowsLater: members whose calls differ without any of
// them waiting for the other's message (each broadcasts from its own rank
// on a team of two) abort the job when the other's message comes after
// they left.
func TestTeamMismatchShowsLater(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, _ := runJob(t, 2, memNet(amudptest.New(8, 0.1, 0.05, 100*time.Microsecond)), false, func(j *Job) {
			tm, err := j.World().Split(0, j.Rank())
			if err != nil {
				t.Fatal(err)
			}
			tm.Broadcast(tm.Rank(), []byte{1})
			tm.Barrier()
			t.Errorf("rank %d went on after mismatched broadcasts", j.Rank())
		})
		if res.Code != 1 || !strings.Contains(res.Why, "which this member has left") || !strings.Contains(res.Why, "broadcast") {
			t.Errorf("job ended %d (%q): %q; want an abort naming the left-over broadcast", res.Code, res.Ends, res.Why)
		}
	})
}
