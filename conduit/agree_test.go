package conduit

// Tests of the ranks' agreement on their posts (teamwords.go: digest,
// agree, settle).

import (
	"errors"
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
// even and not 0, that differs by call (kind, operator, element type);
// any other record has none.
func TestDigest(t *testing.T) {
	rec := func(p coll.Post) []byte { return appendRecord(nil, p) }
	barrier := digest(rec(coll.Post{Call: coll.Call{Kind: coll.Barrier}}))
	if barrier == 0 || barrier&1 != 0 {
		t.Fatalf("a barrier's digest is %#x, want even and not 0", barrier)
	}
	// Calls without datum, root or length, each with a digest of its own.
	seen := map[uint64]coll.Call{}
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
		if o, ok := seen[d]; ok {
			t.Errorf("%v and %v: the same digest %#x", o, c, d)
		}
		seen[d] = c
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
				if v := word(*w.areas[0].Load(), offVerdict).Load(); v&1 == 0 {
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
// same: verdict n and 1, the word reset) or agreeDiffer there; any other
// value is a corrupted inbox, and no verdict is stored.
func TestSettle(t *testing.T) {
	const n, d = 9, 6
	for _, c := range []struct {
		word    uint64
		verdict uint64
		bad     bool
	}{
		{d, n<<1 | 1, false},
		{0, 0, true},
		{4, 0, true},
		{agreeDiffer + 2, 0, true},
	} {
		w := &words{group: []int{0}, addrs: make([]netip.AddrPort, 1)}
		lead := make([]byte, 128)
		word(lead, offAgree).Store(c.word)
		err := w.settle(lead, n, d, nil)
		var ie *amudp.InboxError
		if got := errors.As(err, &ie); got != c.bad {
			t.Errorf("agreement word %#x: %v; want a corrupted inbox: %v", c.word, err, c.bad)
		}
		if v := word(lead, offVerdict).Load(); v != c.verdict {
			t.Errorf("agreement word %#x: verdict %#x, want %#x", c.word, v, c.verdict)
		}
		if !c.bad && word(lead, offAgree).Load() != 0 {
			t.Errorf("agreement word %#x: not reset", c.word)
		}
	}
}
