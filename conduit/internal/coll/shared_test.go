package coll

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// shared runs specs as one exchange (every member's Post, Check, and its
// Shared result), each member's datum Big when longer than max bytes:
// each member's result as text, as spec.run gives it, or its error; big
// when the collective would run over the link.
func shared(specs []spec, max int) (outs []outcome, big bool) {
	n := len(specs)
	posts := make([]Post, n)
	runs := make([]*Run, n)
	for m, sp := range specs {
		runs[m] = New(&memLink{net: newMemNet(n), me: m}, nil, sp.call(n))
		data, parts := sp.args(m, n)
		posts[m] = runs[m].Post(data, parts, max)
	}
	big, err := Check(posts)
	outs = make([]outcome, n)
	for m, sp := range specs {
		if err != nil || big {
			outs[m].err = err
			continue
		}
		v, err := runs[m].Shared(posts, OpCombine(sp.Op, sp.Elem))
		switch sp.Kind {
		case Split:
			outs[m] = outcome{fmt.Sprint(v.Split.Members, v.Split.Me), err}
		case Barrier:
			outs[m] = outcome{"", err}
		case Gather, AllGather, Alltoallv:
			outs[m] = outcome{fmt.Sprintf("%x", v.Parts), err}
		default:
			outs[m] = outcome{fmt.Sprintf("%x", v.Data), err}
		}
	}
	return outs, big
}

// TestSharedMatchesLink: a collective run as one exchange gives each
// member what it gives over the link (float reductions aside, whose
// order differs), and goes over the link when a datum is too large.
func TestSharedMatchesLink(t *testing.T) {
	calls := []string{"barrier", "broadcast 0", "broadcast 2 3000", "reduce 1 sum uint64 3", "allreduce sum int32 4",
		"allreduce xor uint64 2", "gather 2 5", "allgather 3", "allgather 0", "scatter 1", "alltoall 4", "alltoallv", "split 0"}
	for n := 1; n <= 7; n++ {
		for _, c := range calls {
			sp, _ := parseSpec(c)
			if sp.Root >= n {
				continue
			}
			specs := make([]spec, n)
			for m := range specs {
				specs[m] = sp
			}
			got, big := shared(specs, 2000)
			if want := sp.size > 2000 && sp.Kind == Broadcast; big != want {
				t.Errorf("%d members, %s: big %v, want %v", n, c, big, want)
				continue
			}
			if big {
				continue
			}
			net := newMemNet(n)
			stop := net.bound(10 * time.Second)
			link := runAll(net, nil, 1, specs)
			stop()
			for m := range got {
				if got[m].err != nil || got[m].out != link[m].out && sp.Elem != amo.Float64 {
					t.Errorf("%d members, %s: member %d: shared %s, %v; over the link %s", n, c, m, got[m].out, got[m].err, link[m].out)
				}
			}
		}
	}
}

// TestSharedMismatchPairs: for every pair of different calls, every
// member of an exchange finds the same error, a mismatch or a refusal.
func TestSharedMismatchPairs(t *testing.T) {
	calls := []string{"barrier", "broadcast 0", "broadcast 1", "reduce 0 sum uint64 1", "reduce 0 sum int64 1",
		"allreduce sum uint64 1", "allreduce sum int64 1", "allreduce sum uint64 2", "gather 0", "allgather",
		"scatter 0", "scatter 1", "alltoall 8", "alltoall 16", "alltoallv", "split 0"}
	for _, n := range []int{2, 3, 4} {
		for i, a := range calls {
			for _, b := range calls[i+1:] {
				specs := evenOdd(a, b, n)
				got, _ := shared(specs, 2000)
				for m := range got {
					if f := failed(got[m].err); f != "mismatch" && f != "argument" || got[m].err.Error() != got[0].err.Error() {
						t.Errorf("%d members: even %q, odd %q: member %d: %v (member 0: %v)", n, a, b, m, got[m].err, got[0].err)
					}
				}
			}
		}
	}
}

// TestOpCombineMadeOnce: OpCombine has a function for each operator and
// kind that CheckOp accepts, sums what it should, and returns it without
// an allocation.
func TestOpCombineMadeOnce(t *testing.T) {
	for op := Sum; op < numOps; op++ {
		for k := amo.Int32; k <= amo.Float64; k++ {
			if ok := CheckOp(op, k) == nil; (OpCombine(op, k) != nil) != ok {
				t.Errorf("OpCombine(%v, %v): a function %v, CheckOp accepts %v", op, k, !ok, ok)
			}
		}
	}
	acc, in := binary.LittleEndian.AppendUint64(nil, 40), binary.LittleEndian.AppendUint64(nil, 2)
	OpCombine(Sum, amo.Uint64)(acc, in)
	if got := binary.LittleEndian.Uint64(acc); got != 42 {
		t.Errorf("Sum of 40 and 2: %d", got)
	}
	if n := testing.AllocsPerRun(100, func() { OpCombine(Max, amo.Float32)(acc[:4], in[:4]) }); n != 0 {
		t.Errorf("OpCombine and its combine: %v allocations, want none", n)
	}
}

// TestSharedReductionReusesBuffer: a team's run reduces one call after
// another (Reset, then Shared) into one buffer: each result is that
// call's, and once the first has sized the buffer a reduction allocates
// nothing.
func TestSharedReductionReusesBuffer(t *testing.T) {
	const n = 3
	call := Call{Kind: AllReduce, Op: Sum, Elem: amo.Uint64, Len: 1}
	l := &memLink{net: newMemNet(n), me: 1}
	r := New(l, nil, call)
	posts := make([]Post, n)
	for m := range posts {
		posts[m] = Post{Call: call, Data: make([]byte, 8)}
	}
	combine := OpCombine(Sum, amo.Uint64)
	var failed error
	reduce := func(k uint64) uint64 {
		for m, p := range posts {
			binary.LittleEndian.PutUint64(p.Data, k+uint64(m))
		}
		r.Reset(l, nil, call)
		v, err := r.Shared(posts, combine)
		if err != nil && failed == nil {
			failed = err
		}
		return binary.LittleEndian.Uint64(v.Data)
	}
	for k := range uint64(4) {
		if got, want := reduce(k), n*k+n*(n-1)/2; got != want {
			t.Fatalf("reduction %d: %d, want %d", k, got, want)
		}
	}
	if a := testing.AllocsPerRun(100, func() { reduce(7) }); a != 0 {
		t.Errorf("a reduction allocates %v times, want 0", a)
	}
	if failed != nil {
		t.Fatal(failed)
	}
	// A root's result of empty vectors is empty, not nil.
	if v, err := Reduced(nil, []Post{{Call: call, Data: []byte{}}}, combine); v == nil || err != nil {
		t.Errorf("Reduced of one empty vector: %v, %v; want an empty result", v, err)
	}
}

// TestTreeReusesBuffer: a binomial tree's children, appended to the
// buffer given, are each member's, and a buffer once large enough makes
// a member's tree allocate nothing.
func TestTreeReusesBuffer(t *testing.T) {
	var p *Plan // binomial
	const n, root = 13, 5
	var buf []int
	count := 0
	for me := range n {
		parent, kids := p.Tree(root, me, n, buf)
		buf = kids
		if (parent < 0) != (me == root) {
			t.Errorf("member %d: parent %d with root %d", me, parent, root)
		}
		for _, c := range kids {
			if cp, _ := p.Tree(root, c, n, nil); cp != me {
				t.Errorf("member %d's child %d has parent %d", me, c, cp)
			}
		}
		count += len(kids)
	}
	if count != n-1 {
		t.Errorf("%d children in all, want %d", count, n-1)
	}
	buf = make([]int, 0, 8)
	if a := testing.AllocsPerRun(100, func() { _, buf = p.Tree(root, root, n, buf) }); a != 0 {
		t.Errorf("the root's tree allocates %v times, want 0", a)
	}
}
