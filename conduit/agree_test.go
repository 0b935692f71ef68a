package conduit

// Tests of the ranks' agreement on their posts (teamwords.go: digest,
// agree, settle).

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// TestDigest: a record without datum, flags, root or length has a digest,
// even and not 0, that differs by call; any other record has none.
func TestDigest(t *testing.T) {
	rec := func(p coll.Post) []byte { return appendRecord(nil, p) }
	barrier := digest(rec(coll.Post{Call: coll.Call{Kind: coll.Barrier}}))
	if barrier == 0 || barrier&1 != 0 {
		t.Fatalf("a barrier's digest is %#x, want even and not 0", barrier)
	}
	other := digest(rec(coll.Post{Call: coll.Call{Kind: coll.Broadcast}}))
	if other == 0 || other == barrier {
		t.Errorf("a broadcast's post without datum: digest %#x, a barrier's %#x; want another, not 0", other, barrier)
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
// rank, a barrier included, and the next one matches.
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
