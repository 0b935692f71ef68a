package conduit

// Tests of the ranks' agreement on their posts (agree.go: digest,
// agree, settle, the accumulator).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/amo"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// TestDigest: a record without datum, flags, root or length has a digest,
// even and not 0, that differs by call (kind, operator, element type); so
// does one of a reduction of one integer element that accumulates,
// marked digestAcc, whatever its element, and by root too; any other
// record has none.
func TestDigest(t *testing.T) {
	rec := func(p coll.Post) []byte { return appendRecord(nil, p) }
	barrier := digest(rec(coll.Post{Call: coll.Call{Kind: coll.Barrier}}))
	if barrier == 0 || barrier&1 != 0 {
		t.Fatalf("a barrier's digest is %#x, want even and not 0", barrier)
	}
	// Calls without datum, root or length, each with a digest of its own.
	seen := map[uint64]coll.Call{}
	unique := func(c coll.Call, d uint64) {
		if o, ok := seen[d]; ok {
			t.Errorf("%v and %v: the same digest %#x", o, c, d)
		}
		seen[d] = c
	}
	for _, c := range []coll.Call{
		{Kind: coll.Barrier},
		{Kind: coll.Broadcast},
		{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Uint64},
		{Kind: coll.AllReduce, Op: coll.Max, Elem: amo.Uint64},
		{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Int32},
		{Kind: coll.Reduce, Op: coll.Sum, Elem: amo.Uint64},
	} {
		d := digest(rec(coll.Post{Call: c}))
		if d == 0 || d&1 != 0 {
			t.Errorf("%v: digest %#x, want even and not 0", c, d)
		}
		unique(c, d)
	}
	// Reductions of one integer element that accumulate: a digest of
	// the call with digestAcc, whatever the element, one of its own by
	// call. Any other record has none.
	elem := func(k amo.Kind, v byte) []byte { return append(make([]byte, k.Size()-1), v) }
	for _, c := range []coll.Call{
		{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Uint64, Len: 1},
		{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Int64, Len: 1},
		{Kind: coll.AllReduce, Op: coll.Min, Elem: amo.Int32, Len: 1},
		{Kind: coll.AllReduce, Op: coll.Xor, Elem: amo.Uint32, Len: 1},
		{Kind: coll.Reduce, Op: coll.Sum, Elem: amo.Uint64, Len: 1},
		{Kind: coll.Reduce, Op: coll.Sum, Elem: amo.Uint64, Len: 1, Root: 3},
	} {
		d := digest(rec(coll.Post{Call: c, Data: elem(c.Elem, 1)}))
		if d&digestAcc == 0 || d&1 != 0 || d != digest(rec(coll.Post{Call: c, Data: elem(c.Elem, 2)})) {
			t.Errorf("%v: digest %#x, want one with digestAcc, even, the same for another element", c, d)
		}
		unique(c, d)
	}
	for _, c := range []struct {
		name string
		p    coll.Post
	}{
		{"a datum", coll.Post{Call: coll.Call{Kind: coll.Barrier}, Data: []byte{0}}},
		{"a root", coll.Post{Call: coll.Call{Kind: coll.Broadcast, Root: 1}}},
		{"a length", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Len: 1}}},
		{"big", coll.Post{Call: coll.Call{Kind: coll.Barrier}, Big: true}},
		{"refused", coll.Post{Call: coll.Call{Kind: coll.Barrier}, Refused: true}},
		{"two elements", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Uint64, Len: 2}, Data: make([]byte, 16)}},
		{"a float", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Float64, Len: 1}, Data: make([]byte, 8)}},
		{"a product", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Op: coll.Prod, Elem: amo.Uint64, Len: 1}, Data: make([]byte, 8)}},
		{"a program's operator", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Op: coll.OpFunc, Elem: amo.Uint64, Len: 1}, Data: make([]byte, 8)}},
		{"refused", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Uint64, Len: 1}, Data: make([]byte, 8), Refused: true}},
		{"a datum short of its length", coll.Post{Call: coll.Call{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Uint64, Len: 1}, Data: make([]byte, 4)}},
		{"an all-gather", coll.Post{Call: coll.Call{Kind: coll.AllGather, Len: 1}, Data: make([]byte, 8)}},
	} {
		if d := digest(rec(c.p)); d != 0 {
			t.Errorf("%s: digest %#x, want none (0)", c.name, d)
		}
	}
}

// TestAgree: the posts are the same, for the rank that settles, exactly
// when every rank entered its digest and all were the same.
func TestAgree(t *testing.T) {
	const a, b = 2, 4 // digests
	for _, c := range []struct {
		digests []uint64 // in the order of the arrivals; the last settles
		same    bool
	}{
		{[]uint64{a}, true},
		{[]uint64{a, a, a}, true},
		{[]uint64{a, b}, false},
		{[]uint64{b, a, a}, false},
		{[]uint64{a, b, a}, false},
		{[]uint64{a, a, 0}, false},
		{[]uint64{0, a, a}, false},
		{[]uint64{0}, false},
	} {
		lead := make([]byte, 128)
		for _, d := range c.digests {
			agree(lead, d)
		}
		if same := word(lead, offAgree).Load() == c.digests[len(c.digests)-1]; same != c.same {
			t.Errorf("digests %v: same %v, want %v", c.digests, same, c.same)
		}
	}
}

// TestWordsDatalessMismatch: where the ranks agree on their posts in
// the leader's area (one group, counted), read each other's
// (dissemination) or copy them into the leader's buffer (gathered), a
// rank calling another collective whose post has no datum either (a
// broadcast's member other than the root) fails the collective on every
// rank, a barrier included, and the next one matches, counted with the
// ranks agreeing again.
func TestWordsDatalessMismatch(t *testing.T) {
	const n = 4
	for _, m := range wordModes[:3] {
		errs := make([]error, n)
		res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
			if j.Rank() == 2 {
				_, errs[2] = j.World().Broadcast(0, nil)
			} else {
				errs[j.Rank()] = j.World().Barrier()
			}
			if err := j.World().Barrier(); err != nil {
				t.Errorf("mode %s, rank %d: the next barrier: %v", m.name, j.Rank(), err)
			}
			// The settling rank reset the agreement: the ranks agree
			// on this barrier's posts.
			if w := j.words; w.counted {
				if v := word(*w.areas[0].Load(), offVerdict).Load(); v&verdictSame == 0 {
					t.Errorf("mode %s, rank %d: verdict %#x on the next barrier, want the posts the same", m.name, j.Rank(), v)
				}
			}
		})
		if d := cmp.Diff(jobResult{Ends: slices.Repeat([]string{"returned"}, n)}, res); d != "" {
			t.Errorf("mode %s: (-want +got):\n%s", m.name, d)
		}
		for r, err := range errs {
			if !errors.Is(err, ErrCollectiveMismatch) || !strings.Contains(err.Error(), "broadcast from root 0") {
				t.Errorf("mode %s, rank %d: %v; want ErrCollectiveMismatch naming the broadcast", m.name, r, err)
			}
		}
	}
}

// TestSettle: the rank that settles finds its own digest (the posts the
// same: verdict n and verdictSame, or, where the digest accumulates, n
// and verdictAcc with the accumulator's word by the release word) or
// agreeDiffer there, and resets the agreement word and the accumulator;
// any other value is a corrupted inbox, and no verdict is stored.
func TestSettle(t *testing.T) {
	const n, d, dAcc, acc = 9, 6, digestAcc | 6, 0x1234
	for _, c := range []struct {
		d, word, verdict, result uint64
		bad                      bool
	}{
		{d, d, n<<2 | verdictSame, 0, false},
		{dAcc, dAcc, n<<2 | verdictAcc, acc, false},
		{d, 0, 0, 0, true},
		{d, 4, 0, 0, true},
		{dAcc, d, 0, 0, true},
		{d, agreeDiffer + 2, 0, 0, true},
	} {
		w := &words{group: []int{0}, addrs: make([]netip.AddrPort, 1)}
		lead := make([]byte, 128)
		word(lead, offAgree).Store(c.word)
		word(lead, offAcc).Store(acc)
		err := w.settle(lead, n, c.d, nil)
		var ie *amudp.InboxError
		if got := errors.As(err, &ie); got != c.bad {
			t.Errorf("digest %#x, agreement word %#x: %v; want a corrupted inbox: %v", c.d, c.word, err, c.bad)
		}
		if v, r := word(lead, offVerdict).Load(), word(lead, offResult).Load(); v != c.verdict || r != c.result {
			t.Errorf("digest %#x, agreement word %#x: verdict %#x and result %#x, want %#x and %#x", c.d, c.word, v, r, c.verdict, c.result)
		}
		if !c.bad && (word(lead, offAgree).Load() != 0 || word(lead, offAcc).Load() != 0) {
			t.Errorf("digest %#x, agreement word %#x: not reset", c.d, c.word)
		}
	}
}

// TestWordsAccumulated: counted, a reduction of one integer element by
// Sum, Min, Max, And, Or or Xor accumulates (the verdict says
// verdictAcc), and every rank gets what the operator folds, the root
// alone for Reduce, with elements at their types' edges; operators that
// differ among the ranks, roots that differ, or a barrier among them
// are ErrCollectiveMismatch on every rank; 60 in a row lose no element;
// and reductions after a mismatch, or after ones that did not
// accumulate, start from zero again.
func TestWordsAccumulated(t *testing.T) {
	const n = 5
	m := wordModes[1]
	res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
		me, w := j.Rank(), j.World()
		if !j.words.counted {
			t.Fatalf("rank %d: mode %s is not counted", me, m.name)
		}
		accumulated := func() bool { return word(*j.words.areas[0].Load(), offVerdict).Load()&verdictAcc != 0 }
		bits := [n]uint64{0, 1<<63 | 1<<31, math.MaxUint64, 0x7fffffff_fffffffe, 0x1234_5678_9abc_def0}
		for _, op := range []Op{Sum, Min, Max, And, Or, Xor} {
			accumulatedCase[int32](t, w, op, bits, accumulated)
			accumulatedCase[uint32](t, w, op, bits, accumulated)
			accumulatedCase[int64](t, w, op, bits, accumulated)
			accumulatedCase[uint64](t, w, op, bits, accumulated)
		}
		got, err := Reduce(w, 3, Sum, []uint64{uint64(me) + 1})
		if want := map[bool][]uint64{true: {n * (n + 1) / 2}}[me == 3]; err != nil || !cmp.Equal(got, want) || !accumulated() {
			t.Errorf("rank %d: Reduce to 3: %v, %v; want %v, accumulated: %v", me, got, err, want, accumulated())
		}
		if _, err := AllReduce(w, []Op{Sum, Max}[me%2], []int64{1}); !errors.Is(err, ErrCollectiveMismatch) || accumulated() {
			t.Errorf("rank %d: all-reductions by Sum and Max: %v, accumulated: %v", me, err, accumulated())
		}
		if _, err := Reduce(w, me%2, Sum, []int64{1}); !errors.Is(err, ErrCollectiveMismatch) || accumulated() {
			t.Errorf("rank %d: reductions to roots 0 and 1: %v, accumulated: %v", me, err, accumulated())
		}
		var err2 error
		if me == 2 {
			err2 = w.Barrier()
		} else {
			_, err2 = AllReduce(w, Sum, []int64{1})
		}
		if !errors.Is(err2, ErrCollectiveMismatch) || accumulated() {
			t.Errorf("rank %d: all-reductions and a barrier: %v, accumulated: %v", me, err2, accumulated())
		}
		// Many in a row, each with its own elements: none lost.
		for i := range 60 {
			got, err := AllReduce(w, Sum, []uint64{uint64(i*n + me)})
			if want := []uint64{uint64(i*n*n + n*(n-1)/2)}; err != nil || !cmp.Equal(got, want) {
				t.Fatalf("rank %d: all-reduction %d: %v, %v; want %v", me, i, got, err, want)
			}
		}
		for i, f := range []func() error{
			func() error { return nil },
			func() error { _, err := AllReduce(w, Sum, []int64{1, 2}); return err },
			func() error { _, err := AllReduce(w, Prod, []int64{2}); return err },
			w.Barrier,
		} {
			if err := f(); err != nil {
				t.Errorf("rank %d, case %d: %v", me, i, err)
			}
			got, err := AllReduceNB(w, Sum, []int64{int64(me)}).Wait()
			if want := []int64{n * (n - 1) / 2}; err != nil || !cmp.Equal(got, want) || !accumulated() {
				t.Errorf("rank %d, case %d: AllReduceNB: %v, %v; want %v, accumulated: %v", me, i, got, err, want, accumulated())
			}
		}
	})
	want := jobResult{Ends: slices.Repeat([]string{"returned"}, n)}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// TestReadVerdict: a counted rank reads a verdict for its own
// collective that its digest could have led to: the posts the same where
// it has a digest that does not accumulate, a result accumulated (which
// it decodes for its call) where its digest accumulates, neither where
// the leader found them different. Any other verdict, or another
// collective's, is a corrupted inbox.
func TestReadVerdict(t *testing.T) {
	const n = 5
	call := coll.Call{Kind: coll.AllReduce, Op: coll.Min, Elem: amo.Int32, Len: 1}
	min := []byte{0xfe, 0xff, 0xff, 0xff} // -2
	acc := digest(appendRecord(nil, coll.Post{Call: call, Data: min}))
	barrier := digest(appendRecord(nil, coll.Post{Call: coll.Call{Kind: coll.Barrier}}))
	for _, c := range []struct {
		name    string
		digest  uint64
		verdict uint64
		bad     bool
	}{
		{"accumulated", acc, n<<2 | verdictAcc, false},
		{"accumulated, another collective's", acc, (n+1)<<2 | verdictAcc, true},
		{"accumulated and the same", acc, n<<2 | verdictAcc | verdictSame, true},
		{"the same, this post accumulating", acc, n<<2 | verdictSame, true},
		{"the same, this post without digest", 0, n<<2 | verdictSame, true},
		{"accumulated, this post a barrier's", barrier, n<<2 | verdictAcc, true},
		{"accumulated, this post without digest", 0, n<<2 | verdictAcc, true},
	} {
		lead := make([]byte, amudp.AreaSize)
		word(lead, offVerdict).Store(c.verdict)
		word(lead, offResult).Store(coll.AccIn(call.Op, call.Elem, min)) // one rank's
		w := &words{group: []int{0}, addrs: make([]netip.AddrPort, 1), counted: true}
		tc := &teamCall{t: &Team{}, seq: n, call: call, lead: lead, digest: c.digest}
		_, _, err := tc.read(w, true)
		var ie *amudp.InboxError
		if got := errors.As(err, &ie); got != c.bad {
			t.Errorf("%s: %v; want a corrupted inbox: %v", c.name, err, c.bad)
		}
		if !c.bad && (!tc.reduced || !bytes.Equal(tc.result, min)) {
			t.Errorf("%s: result %x (reduced %v), want %x", c.name, tc.result, tc.reduced, min)
		}
	}
}

// accumulatedCase is an all-reduction by op of one element of T, each
// rank's the low bits of its bits, on w, which TestWordsAccumulated
// checks against coll.OpCombine's fold in rank order.
func accumulatedCase[T Word](t *testing.T, w *Team, op Op, bits [5]uint64, accumulated func() bool) {
	t.Helper()
	k, size := kindOf[T](), sizeOf[T]()
	elem := func(r int) []byte { return binary.LittleEndian.AppendUint64(nil, bits[r])[:size] }
	want := elem(0)
	for r := 1; r < len(bits); r++ {
		coll.OpCombine(coll.Op(op), k)(want, elem(r))
	}
	me := w.Rank()
	got, err := AllReduce(w, op, decodeTo(make([]T, 1), elem(me)))
	if err != nil || !bytes.Equal(encodeVec(got), want) || !accumulated() {
		t.Errorf("rank %d: AllReduce %v of %v: %v (%x), %v; want %x, accumulated: %v", me, op, k, got, encodeVec(got), err, want, accumulated())
	}
}
