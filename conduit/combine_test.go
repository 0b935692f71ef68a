package conduit

// Tests of the leader's buffer of posts (combinePosts): one post for
// all where they are the same, and a large group's members that read
// only the leader's area.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/amo"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// TestWordsSamePosts: where every rank posts the same (an all-gather of
// equal parts), a rank builds every rank's post from its own
// (Team.samePosts) and the collective returns every rank's, in a row of
// such collectives as well (whose posts a rank builds once); gathered,
// and counted for posts without a digest, the leader's buffer holds that
// post once and says so; counted, for posts with one, the verdict of the
// ranks' agreement. Posts that differ in a byte or in length are read one
// each. A barrier, counted or by dissemination, builds no post. By
// dissemination, counted, and gathered and released.
func TestWordsSamePosts(t *testing.T) {
	const n = 4
	cases := []struct {
		name string
		part func(r int) []byte
		same bool
	}{
		{"equal parts", func(int) []byte { return []byte("same") }, true},
		{"the same again", func(int) []byte { return []byte("same") }, true},
		{"other equal parts", func(int) []byte { return []byte("SAME") }, true},
		{"empty parts", func(int) []byte { return nil }, true},
		{"a byte differs", func(r int) []byte { return []byte{'x', byte(r / 3)} }, false},
		{"a length differs", func(r int) []byte { return make([]byte, 1+r/3) }, false},
		{"equal parts after", func(int) []byte { return []byte("same") }, true},
	}
	for _, m := range wordModes[:3] {
		res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
			me, w := j.Rank(), j.words
			// Read before this rank arrives at the next collective,
			// which rewrites the buffer only once every rank has.
			same := func() bool {
				if w.dissem {
					return len(j.World().sameRec) > 0
				}
				a, err := w.area(0)
				if err != nil {
					t.Fatal(err)
				}
				// Counted, the verdict of the ranks' agreement says so
				// for posts that have a digest, with no buffer (settle).
				buf := w.counted && word(a, offVerdict).Load()&verdictSame != 0 ||
					binary.LittleEndian.Uint64(a[offCombined+8:])&combinedSame != 0
				if built := len(j.World().sameRec) > 0; built != buf {
					t.Errorf("rank %d: the leader says one post: %v; built from this rank's: %v", me, buf, built)
				}
				return buf
			}
			// A barrier whose ranks agree (counted) or that read each
			// other's posts (dissemination) builds none.
			if err := j.World().Barrier(); err != nil {
				t.Errorf("rank %d, mode %s: barrier: %v", me, m.name, err)
			}
			if built := len(j.World().sameRec) > 0; built != !(w.counted || w.dissem) {
				t.Errorf("rank %d, mode %s: a barrier built the posts: %v", me, m.name, built)
			}
			for _, c := range cases {
				parts, err := j.World().AllGather(c.part(me))
				if got := same(); err != nil || got != c.same {
					t.Errorf("rank %d, mode %s, %s: %v; one post: %v, want %v", me, m.name, c.name, err, got, c.same)
				}
				for r := range n {
					_ = append(parts[(r+n-1)%n], 0xee)
					if !bytes.Equal(parts[r], c.part(r)) {
						t.Errorf("rank %d, mode %s, %s: part %d is %q, want %q", me, m.name, c.name, r, parts[r], c.part(r))
					}
				}
			}
		})
		want := jobResult{Ends: slices.Repeat([]string{"returned"}, n)}
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("mode %s: (-want +got):\n%s", m.name, d)
		}
	}
}

// TestWordsLazyAreas: in a group larger than eagerAreas, gathered and
// released, a member maps only the leader's area and its own at start-up
// (the leader maps all), and a collective whose posts overflow the
// leader's buffer runs over messages on every rank, with the right
// result, and maps nothing more; those that fit stay on words.
func TestWordsLazyAreas(t *testing.T) {
	defer func(e int) { eagerAreas = e }(eagerAreas)
	eagerAreas = 2
	const n = 8
	part := func(r, size int) []byte { return bytes.Repeat([]byte{byte(r + 1)}, size) }
	runJob(t, n, loopbackGroups(t, 0, true), false, func(j *Job) {
		me, w := j.Rank(), j.words
		if err := j.shareAreas(w); err != nil {
			t.Fatalf("rank %d: %v", me, err)
		}
		mapped := func() (m []int) {
			for i := range w.areas {
				if w.areas[i].Load() != nil {
					m = append(m, i)
				}
			}
			return m
		}
		want := []int{0, me}
		if me == 0 {
			want = []int{0, 1, 2, 3, 4, 5, 6, 7}
		}
		if d := cmp.Diff(want, mapped()); d != "" {
			t.Errorf("rank %d: areas mapped at start-up (-want +got):\n%s", me, d)
		}
		for _, size := range []int{1600, 8, 1600} { // 8 x 1600 bytes overflow the buffer
			parts, err := j.World().AllGather(part(me, size))
			if err != nil {
				t.Fatalf("rank %d: all-gather of %d bytes: %v", me, size, err)
			}
			for r := range n {
				if !bytes.Equal(parts[r], part(r, size)) {
					t.Errorf("rank %d: all-gather of %d bytes: part %d is %x", me, size, r, parts[r])
				}
			}
		}
		if d := cmp.Diff(want, mapped()); d != "" {
			t.Errorf("rank %d: areas mapped after the all-gathers (-want +got):\n%s", me, d)
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: barrier: %v", me, err)
		}
	})
}

// TestWordsReducedPost: counted, and gathered and released, a reduction
// by one of the library's operators leaves its result alone in the
// leader's buffer (reducePosts), which every rank reads as its result,
// at the root only for Reduce; a reduction by the program's operator, or
// all-reductions of different lengths or by different operators
// (ErrCollectiveMismatch on every rank), leave the posts.
func TestWordsReducedPost(t *testing.T) {
	const n = 5
	for _, m := range wordModes[1:3] {
		res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
			me, w := j.Rank(), j.World()
			// Read before this rank arrives at the next collective,
			// which rewrites the buffer only once every rank has.
			reduced := func() bool {
				a, err := j.words.area(0)
				if err != nil {
					t.Fatal(err)
				}
				return binary.LittleEndian.Uint64(a[offCombined+8:])&combinedReduced != 0
			}
			check := func(what string, got, want []int64, err error, wantReduced bool) {
				t.Helper()
				if r := reduced(); err != nil || !cmp.Equal(got, want) || r != wantReduced {
					t.Errorf("rank %d, mode %s, %s: %v, %v; want %v; reduced for all: %v, want %v", me, m.name, what, got, err, want, r, wantReduced)
				}
			}
			sum := int64(n * (n - 1) / 2)
			got, err := AllReduce(w, Sum, []int64{int64(me), -int64(me)})
			check("AllReduce", got, []int64{sum, -sum}, err, true)
			if j.words.counted {
				// Its post went to its staged line too (teamwords.go).
				l := staged(*j.words.areas[0].Load(), j.words.me)
				if n, d := word(l, 0).Load(), l[postHeader:postHeader+16]; n != w.seq || !bytes.Equal(d, encodeVec([]int64{int64(me), -int64(me)})) {
					t.Errorf("rank %d, mode %s: staged line numbered %d (want %d) with %x", me, m.name, n, w.seq, d)
				}
			}
			got, err = Reduce(w, 2, Max, []int64{int64(me)})
			want := []int64{n - 1}
			if me != 2 {
				want = nil
			}
			check("Reduce to 2", got, want, err, true)
			got, err = AllReduceNB(w, Min, []int64{int64(me) + 3}).Wait()
			check("AllReduceNB", got, []int64{3}, err, true)
			got, err = AllReduceFunc(w, func(a, b int64) int64 { return a + b }, []int64{1})
			check("AllReduceFunc", got, []int64{n}, err, false)
			_, err = AllReduce(w, Sum, make([]int64, 1+me%2))
			if !errors.Is(err, ErrCollectiveMismatch) || reduced() {
				t.Errorf("rank %d, mode %s: all-reductions of 1 and 2 elements: %v, reduced for all: %v", me, m.name, err, reduced())
			}
			_, err = AllReduce(w, []Op{Sum, Max}[me%2], []int64{1})
			if !errors.Is(err, ErrCollectiveMismatch) || reduced() {
				t.Errorf("rank %d, mode %s: all-reductions by Sum and Max: %v, reduced for all: %v", me, m.name, err, reduced())
			}
			// Every rank refused with the same reason: posts whose
			// headers are alike, flags and all.
			if _, err = Reduce(w, n+2, Sum, []int64{1}); !errors.Is(err, ErrBadRank) || reduced() {
				t.Errorf("rank %d, mode %s: Reduce to root %d: %v, reduced for all: %v", me, m.name, n+2, err, reduced())
			}
			// A float sum, combined in rank order: ((1e16 + 1) -
			// 1e16) + 1 + 1 is 2, where another order gives another.
			x := []float64{1e16, 1, -1e16, 1, 1}[me]
			if f, err := AllReduce(w, Sum, []float64{x}); err != nil || len(f) != 1 || f[0] != 2 {
				t.Errorf("rank %d, mode %s: float sum %v, %v; want [2] (rank order)", me, m.name, f, err)
			}
			if err := w.Barrier(); err != nil {
				t.Errorf("rank %d, mode %s: barrier: %v", me, m.name, err)
			}
		})
		want := jobResult{Ends: slices.Repeat([]string{"returned"}, n)}
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("mode %s: (-want +got):\n%s", m.name, d)
		}
	}
}

// TestReducedPostChecked: a reduction's result in the leader's buffer
// (reducedPost) is read only where it is one post of this rank's call,
// as long as this rank's, with nothing after it, not refused; anything
// else is a corrupted inbox.
func TestReducedPostChecked(t *testing.T) {
	const n = 7
	call := coll.Call{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Int64, Len: 1}
	mine := appendRecord(nil, coll.Post{Call: call, Data: make([]byte, 8)})
	good := appendRecord(nil, coll.Post{Call: call, Data: []byte{7, 0, 0, 0, 0, 0, 0, 0}})
	other := call
	other.Op = coll.Max
	for _, c := range []struct {
		name string
		b    []byte
		bad  bool
	}{
		{"the result", good, false},
		{"another call's", appendRecord(nil, coll.Post{Call: other, Data: make([]byte, 8)}), true},
		{"a shorter vector", appendRecord(nil, coll.Post{Call: call, Data: make([]byte, 4)}), true},
		{"a refusal", appendRecord(nil, coll.Post{Call: call, Refused: true, Data: make([]byte, 8)}), true},
		{"bytes after it", append(slices.Clone(good), 0), true},
		{"a length past the buffer", good[:len(good)-1], true},
	} {
		tm := &Team{rec: mine}
		tc := &teamCall{t: tm, seq: n, call: call}
		w := &words{group: []int{0}, addrs: make([]netip.AddrPort, 1)}
		err := tc.reducedPost(w, c.b, n)
		var ie *amudp.InboxError
		if got := errors.As(err, &ie); got != c.bad || tc.reduced == c.bad {
			t.Errorf("%s: %v, reduced %v; want a corrupted inbox: %v", c.name, err, tc.reduced, c.bad)
		}
		if !c.bad && !bytes.Equal(tc.result, good[postHeader-8:]) {
			t.Errorf("%s: result %v", c.name, tc.result)
		}
	}
	// A refused record as this rank's own: no result is reduced from
	// refusals.
	refused := appendRecord(nil, coll.Post{Call: call, Refused: true, Data: make([]byte, 8)})
	tc := &teamCall{t: &Team{rec: refused}, seq: n, call: call}
	var ie *amudp.InboxError
	if err := tc.reducedPost(&words{group: []int{0}, addrs: make([]netip.AddrPort, 1)}, slices.Clone(refused), n); !errors.As(err, &ie) || tc.reduced {
		t.Errorf("a refusal as this rank's own: %v, reduced %v; want a corrupted inbox", err, tc.reduced)
	}
}

// TestStagedRecord: the rank that completes the arrivals reads a post
// from its rank's staged line where that is numbered with the
// collective, else from the rank's slot, each length checked; a post
// that does not fit a line is not staged.
func TestStagedRecord(t *testing.T) {
	const n = 9
	call := coll.Call{Kind: coll.AllReduce, Op: coll.Sum, Elem: amo.Int64, Len: 1}
	rec := appendRecord(nil, coll.Post{Call: call, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
	slotted := appendRecord(nil, coll.Post{Call: call, Data: []byte{9, 9, 9, 9, 9, 9, 9, 9}})
	long := appendRecord(nil, coll.Post{Call: call, Data: make([]byte, stagedSize-postHeader+1)})
	full := appendRecord(nil, coll.Post{Call: call, Data: []byte("a record that fills its line....")})
	for _, c := range []struct {
		name    string
		staged  []byte // the record staged, or none
		number  uint64 // of the staged line
		size    uint64 // written over the staged record's length, or 0
		want    []byte // the record read, or nil for a corrupted inbox
		inSlot  bool   // where it is read from
		corrupt string
		// gathered: the group is not counted (w.counted false when
		// record reads); slot: the slot's number where not n.
		gathered bool
		slot     uint64
	}{
		{name: "staged", staged: rec, number: n, want: rec},
		{name: "staged for another collective", staged: rec, number: n - 2, want: slotted, inSlot: true},
		{name: "none staged", want: slotted, inSlot: true},
		{name: "too long to stage", staged: long, number: n, want: slotted, inSlot: true},
		{name: "a length past the line", staged: rec, number: n, size: stagedSize - postHeader + 1, corrupt: "more than a line's"},
		{name: "a line's length", staged: full, number: n, want: full},
		{name: "a group not counted", staged: rec, number: n, gathered: true, want: slotted, inSlot: true},
		{name: "none staged, the slot another's", slot: n - 1, corrupt: "its slot is numbered"},
	} {
		lead, own := make([]byte, amudp.AreaSize), make([]byte, amudp.AreaSize)
		w := &words{group: []int{0, 1}, addrs: make([]netip.AddrPort, 2), areas: make([]atomic.Pointer[[]byte], 2), counted: true}
		w.areas[0].Store(&lead)
		w.areas[1].Store(&own)
		w.me = 1
		s := slot(own, n)
		copy(s[8:], slotted)
		word(s, 0).Store(n)
		if c.slot != 0 {
			word(s, 0).Store(c.slot)
		}
		if c.staged != nil {
			w.stage(lead, c.staged, c.number)
		}
		if c.size != 0 {
			binary.LittleEndian.PutUint64(staged(lead, 1)[8:], c.size)
		}
		w.counted = !c.gathered
		got, err := w.record(lead, 1, n)
		switch {
		case c.corrupt != "":
			if err == nil || !strings.Contains(err.Error(), c.corrupt) {
				t.Errorf("%s: %x, %v; want an error with %q", c.name, got, err, c.corrupt)
			}
		case err != nil || !bytes.Equal(got, c.want):
			t.Errorf("%s: %x, %v; want %x", c.name, got, err, c.want)
		case c.inSlot != (&got[0] == &s[8]):
			t.Errorf("%s: read from its slot: %v, want %v", c.name, !c.inSlot, c.inSlot)
		}
	}
}

// TestFitsBuffer: where the group gathers posts in the leader's buffer,
// a split collective's posts must all fit it, or, reduced for every
// rank, its result; counted, by dissemination, or a barrier, always.
func TestFitsBuffer(t *testing.T) {
	room := (&words{}).room() // gathered: to the area's end
	if counted := (&words{counted: true}).room(); counted != offStaged-offCombined-16 || room != amudp.AreaSize-offCombined-16 {
		t.Errorf("room %d counted, %d gathered", counted, room)
	}
	alltoall, reduce := coll.Call{Kind: coll.Alltoall}, coll.Call{Kind: coll.AllReduce}
	for _, c := range []struct {
		name            string
		group           int
		counted, dissem bool
		call            coll.Call
		n               int
		reduced         bool
		want            bool
	}{
		{"counted", 64, true, false, alltoall, maxPost, false, true},
		{"by dissemination", 2, false, true, alltoall, maxPost, false, true},
		{"a barrier", 1024, false, false, coll.Call{Kind: coll.Barrier}, 0, false, true},
		{"8 posts of a slot", 8, false, false, alltoall, maxPost, false, false},
		{"8 posts of 8 bytes", 8, false, false, alltoall, 8, false, true},
		{"posts that just fit", 2, false, false, alltoall, room/2 - (postHeader - 8), false, true},
		{"posts a byte over", 2, false, false, alltoall, room/2 - (postHeader - 8) + 1, false, false},
		{"1024 posts, not reduced", 1024, false, false, reduce, 8, false, false},
		{"1024 posts, reduced", 1024, false, false, reduce, maxPost, true, true},
	} {
		w := &words{group: make([]int, c.group), counted: c.counted, dissem: c.dissem}
		if got := w.fitsBuffer(c.call, c.n, c.reduced); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPostOwnSlot: a rank checks its own slot's number at a post where
// the group is counted, and not by dissemination, where the next rank
// reads the slot at every collective and checks it (numbered): there a
// load of the rank's own would fetch the line back from that rank's CPU,
// and read does not load it either.
func TestPostOwnSlot(t *testing.T) {
	const n = 9
	for _, c := range []struct {
		name           string
		dissem, broken bool
	}{
		{name: "counted", broken: true},
		{name: "by dissemination", dissem: true},
	} {
		lead, own := make([]byte, amudp.AreaSize), make([]byte, amudp.AreaSize)
		w := &words{group: []int{0, 1}, addrs: make([]netip.AddrPort, 2), bells: make([]amudp.Bell, 2), areas: make([]atomic.Pointer[[]byte], 2), me: 1, dissem: c.dissem, counted: !c.dissem}
		w.areas[0].Store(&lead)
		w.areas[1].Store(&own)
		word(slot(own, n), 0).Store(n - 4) // not n-2, which this rank wrote
		call := &teamCall{t: &Team{}, seq: n}
		err := call.post(w, coll.Post{Call: coll.Call{Kind: coll.Barrier}})
		if broken := err != nil && strings.Contains(err.Error(), "its slot holds collective 0x5"); broken != c.broken {
			t.Errorf("%s: %v; want the slot found corrupt: %v", c.name, err, c.broken)
		}
		if c.broken {
			continue
		}
		if v := word(slot(own, n), 0).Load(); v != n {
			t.Errorf("%s: the slot is numbered %d after the post, want %d", c.name, v, n)
		}
		// read looks at the other rank's slot alone: this rank's post
		// is its record.
		copy(slot(lead, n)[8:], call.t.rec)
		word(slot(lead, n), 0).Store(n)
		word(slot(own, n), 0).Store(n - 4)
		for i := 8; i < slotSize; i++ {
			slot(own, n)[i] = 0xff
		}
		if _, same, err := call.read(w, false); !same || err != nil {
			t.Errorf("%s: read: same %v, %v; want the posts the same", c.name, same, err)
		}
		// A slot numbered n over the post of n-2 (its phase bit the
		// other way) is corrupt.
		stale := append([]byte(nil), call.t.rec...)
		binary.LittleEndian.PutUint64(stale, binary.LittleEndian.Uint64(stale)^postPhase)
		copy(slot(lead, n)[8:], stale)
		if _, _, err := call.read(w, false); err == nil || !strings.Contains(err.Error(), "numbered 9 over the post of collective 7") {
			t.Errorf("%s: read of a slot numbered over an older post: %v; want it corrupt", c.name, err)
		}
		w.bad.Store(nil)
		// Where they differ, read takes this rank's post from its
		// record too, whatever its slot holds.
		copy(slot(lead, n)[8:], appendRecord(nil, coll.Post{Call: coll.Call{Kind: coll.Broadcast}}))
		posts, same, err := call.read(w, true)
		if err != nil || same || len(posts) != 2 || posts[0].Call.Kind != coll.Broadcast || posts[1].Call.Kind != coll.Barrier {
			t.Errorf("%s: read: %v, same %v, %v; want a broadcast's post and this rank's barrier's", c.name, posts, same, err)
		}
	}
}
