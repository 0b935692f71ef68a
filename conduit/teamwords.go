package conduit

// This file is the exchange of World's collectives in a job whose ranks
// are one shared-memory group (coll.Post): each rank writes its post into
// a slot of its area, the group synchronises on its words, and each reads
// every post.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// A post's slot, one for each parity of the collective's number: the
// number (stored last, 8 bytes), the datum's length with the post's
// flags (8 bytes), the header (coll.Header.Pack: meta, root, length; 4
// bytes each) and 4 bytes unused, then the datum.
const (
	postHeader = 32
	// maxPost is the largest datum a slot holds.
	maxPost     = slotSize - postHeader
	postBig     = 1 << 62 // the datum did not fit: over messages
	postRefused = 1 << 61 // the rank refused its arguments: the datum says why
	postFlags   = postBig | postRefused
	// postPhase: by dissemination, bit 1 of the collective's number,
	// which n and n-2 never share: a slot numbered n over the post of
	// n-2 (a number scribbled before its owner's post) is told from
	// the owner's post of n (read). Not a flag of the post's own.
	postPhase = 1 << 60
)

// slot returns the slot of area a for collective n.
func slot(a []byte, n uint64) []byte {
	o := offSlots + int(n&1)*slotSize
	return a[o : o+slotSize]
}

// errOverMessages is read's word that the posts did not fit the
// leader's buffer in a group whose members read only that: every rank
// then runs the collective over messages.
var errOverMessages = errors.New("conduit: the posts go over messages")

// An exchange on words is a collective's post (teamCall.post), its
// synchronisation (await) and its reading (read), which return every
// rank's post, by rank, and whether they are all the same; where a
// barrier's are, counted or by dissemination, none. A rank rewrites its
// slot of parity n&1 only at collective n+2, which it enters after every
// rank has arrived at n+1, each after it read n; the leader's buffer
// (combinePosts), its agreement word, accumulator, verdict and result
// (settle), likewise at n+1. A split NB collective posts at its call and
// completes the rest at its Wait or Test (splitnb.go).

// post writes p, this rank's post, into its slot and arrives at the
// call's synchronisation: by dissemination, it rings the next rank's
// bell; else arriveGroup, where, if counted, the leader's agreement word
// gets the post's digest first, and its accumulator the post's element
// where the post accumulates (a post without digest goes to its staged
// line instead).
func (c *teamCall) post(w *words, p coll.Post) error {
	j, n := c.t.j, c.seq
	own, err := w.area(w.me)
	if err != nil {
		return err
	}
	s := slot(own, n)
	// Only this rank writes its slots, each collective of World in turn:
	// this one holds collective n-2's number, or none yet, which it
	// checks. By dissemination it does not: the next rank has read the
	// slot since, and the load would fetch the line back from that
	// rank's CPU, one more transfer between CPUs each collective
	// (BENCHMARKS.md). There the next rank checks the number (numbered),
	// and its read the post's phase (postPhase): a number scribbled to
	// n before this rank's post does not pass for it.
	if !w.dissem {
		if m := word(s, 0).Load(); m != n-2 && !(n <= 2 && m == 0) {
			return w.corrupt(w.me, "its slot holds collective %#x where this rank wrote %d", m, max(n, 2)-2)
		}
	}
	c.t.rec = appendRecord(c.t.rec[:0], p)
	if len(c.t.rec) > slotSize-8 {
		return fmt.Errorf("conduit: a post of %d bytes does not fit a slot of %d", len(c.t.rec), slotSize-8)
	}
	if w.dissem && n&2 != 0 {
		binary.LittleEndian.PutUint64(c.t.rec, binary.LittleEndian.Uint64(c.t.rec)|postPhase)
	}
	copy(s[8:], c.t.rec)
	word(s, 0).Store(n)
	c.lead, c.released = nil, false
	if w.dissem {
		if len(w.group) == 1 {
			return nil
		}
		return w.bells[(w.me+1)%len(w.group)].Ring()
	}
	if c.lead, err = w.area(0); err != nil {
		return err
	}
	if w.counted {
		c.digest = digest(c.t.rec)
		switch {
		case c.digest == 0:
			w.stage(c.lead, c.t.rec, n)
		case c.digest&digestAcc != 0:
			accumulate(c.lead, c.call, c.t.rec[postHeader-8:])
		}
		agree(c.lead, c.digest)
	}
	c.released, err = j.arriveGroup(w, &syncColl, n, c.settle(w))
	return err
}

// settle is what the group runs once every rank has arrived, before its
// release: counted, the verdict on the posts (words.settle); else the
// leader's copy of them (combinePosts), or of a reduction's result
// (reducePosts).
func (c *teamCall) settle(w *words) func() error {
	var reduce func() []byte
	if c.combine != nil {
		reduce = func() []byte { return c.reducePosts(w) }
	}
	if w.counted {
		return func() error { return w.settle(c.lead, c.seq, c.digest, reduce) }
	}
	return func() error { return w.combinePosts(c.seq, reduce) }
}

// fitsBuffer reports whether what the leader's buffer gets of call,
// every rank's with a datum of n bytes where the calls are the same,
// fits it, where the group gathers the posts there (not counted nor by
// dissemination): else every rank's part runs over messages, which a
// split collective's rank joins only at its Wait (splitNB). A barrier's
// posts are the same, which the buffer holds once; a reduction reduced
// for every rank (reduced: settledCombine) leaves one post of n bytes.
func (w *words) fitsBuffer(call coll.Call, n int, reduced bool) bool {
	room := w.room()
	switch {
	case w.counted || w.dissem || call.Kind == coll.Barrier:
		return true
	case reduced:
		return postHeader-8+n <= room
	}
	return len(w.group)*(postHeader-8+n) <= room
}

// settledCombine is combine where the rank that completes a reduction's
// arrivals may apply it for every rank (reducePosts): an operator of the
// library's, not the program's, which could panic there while the others
// wait for the release.
func settledCombine(call coll.Call, combine coll.Combine) coll.Combine {
	if (call.Kind == coll.Reduce || call.Kind == coll.AllReduce) && call.Op != coll.OpFunc {
		return combine
	}
	return nil
}

// reducePosts is, for a reduction by one of the library's operators
// (c.combine), the record of its result from every rank's post (record),
// which the rank that completes the group's arrivals leaves in the
// leader's buffer (combinePosts) so that each rank reads one post instead
// of G; nil unless every post's record begins as this rank's does (the
// same call, a vector as long, neither refused nor too large): every rank
// then reads every post, and finds out. The vectors are combined in
// group order, as coll.Reduced does, from where they lie.
func (c *teamCall) reducePosts(w *words) []byte {
	t, n, h := c.t, c.seq, postHeader-8
	if binary.LittleEndian.Uint64(t.rec)&postFlags != 0 {
		return nil
	}
	lead := *w.areas[0].Load()
	for i := range w.group {
		rec, err := w.record(lead, i, n)
		if err != nil || len(rec) != len(t.rec) || !bytes.Equal(rec[:h], t.rec[:h]) {
			return nil
		}
		if i == 0 {
			// The header as checked, then the first vector.
			t.reduced = append(append(t.reduced[:0], t.rec[:h]...), rec[h:]...)
			continue
		}
		c.combine(t.reduced[h:], rec[h:])
	}
	return t.reduced
}

// reducedPost takes the result of reduction n that the rank completing
// the arrivals left in the leader's buffer b (reducePosts), checked: the
// record of this rank's call, neither refused nor too large, with a
// vector as long as this rank's, nothing after it. It sets c.result to
// the vector, in b, which the leader's buffer holds until this rank
// arrives at the team's next collective, and c.reduced.
func (c *teamCall) reducedPost(w *words, b []byte, n uint64) error {
	rec := c.t.rec
	if len(b) != len(rec) || !bytes.Equal(b[:postHeader-8], rec[:postHeader-8]) || binary.LittleEndian.Uint64(rec)&postFlags != 0 {
		return w.corrupt(0, "its buffer holds a reduction's result that is not collective %d's", n)
	}
	c.result, c.reduced = b[postHeader-8:], true
	return nil
}

// await waits, after post, until every rank has posted: the rounds of a
// dissemination, or awaitGroup unless post released the group.
func (c *teamCall) await(w *words) error {
	j, n := c.t.j, c.seq
	if w.dissem {
		return j.disseminate(w, &syncColl, n, true)
	}
	if c.released {
		return nil
	}
	return j.awaitGroup(w, &syncColl, n, c.settle(w))
}

// ready reports whether every rank has posted, where what remains after
// post is passive (words.passive): the look of await's wait, made
// without waiting.
func (c *teamCall) ready(w *words) bool {
	n := c.seq
	if !w.dissem {
		return c.released || w.released(&syncColl, n)
	}
	if len(w.group) == 1 {
		return true
	}
	from := (w.me + len(w.group) - 1) % len(w.group)
	a, err := w.area(from)
	if err != nil {
		return true // await fails with it
	}
	return w.numbered(from, a, n)
}

// read returns, after await, every rank's post of the call, by rank, and
// whether they are all the same; where posts is false and they are, none;
// where the leader's buffer holds a reduction's result for every rank,
// none, and c.result is that result (reducedPost), as where the reduction
// accumulated (c.accumulated). A verdict that this rank's digest could
// not have led to is corrupt: same posts where it has no digest or one
// that accumulates, or a result accumulated where its post does not.
func (c *teamCall) read(w *words, posts bool) ([]coll.Post, bool, error) {
	n, lead := c.seq, c.lead
	if w.counted {
		// The one verdict besides "they differ" (no flag) that this
		// rank's digest could lead to.
		agreed := uint64(verdictSame)
		if c.digest&digestAcc != 0 {
			agreed = verdictAcc
		}
		v := word(lead, offVerdict).Load()
		switch flags := v & (verdictSame | verdictAcc); {
		case v>>2 != n || flags != 0 && (c.digest == 0 || flags != agreed):
			return nil, false, w.corrupt(0, "its verdict on the posts is %#x, for collective %d", v, n)
		case flags == verdictAcc:
			c.result, c.reduced = c.accumulated(word(lead, offResult).Load()), true
			return nil, false, nil
		case flags == verdictSame:
			return c.allSame(w, n, posts)
		}
	}
	if !w.dissem {
		m, total := binary.LittleEndian.Uint64(lead[offCombined:]), binary.LittleEndian.Uint64(lead[offCombined+8:])
		switch {
		case m != n:
			return nil, false, w.corrupt(0, "its buffer of posts is numbered %#x, for collective %d", m, n)
		case total != combinedDirect:
			l := total &^ (combinedSame | combinedReduced)
			if l > uint64(w.room()) {
				return nil, false, w.corrupt(0, "its buffer of posts has %#x bytes, more than its %d", total, w.room())
			}
			b := lead[offCombined+16 : offCombined+16+int(l)]
			if total&combinedReduced != 0 {
				return nil, false, c.reducedPost(w, b, n)
			}
			return c.t.combined(w, b, n, total&combinedSame != 0)
		case len(w.group) > eagerAreas:
			// Its members have not mapped each other's areas
			// (shareAreas): the collective goes over messages.
			return nil, false, errOverMessages
		}
	}
	same := true
	for i := range w.group {
		if i == w.me {
			continue // this rank's post is c.t.rec (see post)
		}
		a, err := w.area(i)
		if err != nil {
			return nil, false, err
		}
		s := slot(a, n)
		if m := word(s, 0).Load(); m != n {
			return nil, false, w.corrupt(i, "its slot is numbered %#x, for collective %d", m, n)
		}
		if w.dissem && (binary.LittleEndian.Uint64(s[8:])&postPhase != 0) != (n&2 != 0) {
			return nil, false, w.corrupt(i, "its slot is numbered %d over the post of collective %d", n, n-2)
		}
		same = same && bytes.Equal(s[8:8+len(c.t.rec)], c.t.rec)
	}
	if same {
		return c.allSame(w, n, posts)
	}
	c.t.resetPosts()
	for i := range w.group {
		rec := c.t.rec
		if i != w.me {
			rec = slot(*w.areas[i].Load(), n)[8:]
		}
		if _, err := c.t.readPosts(w, rec, n, i, 1); err != nil {
			return nil, false, err
		}
	}
	return c.t.posts, false, nil
}

// allSame is read's result where every post of collective n is this
// rank's: every rank's, built from it, or none where posts is false.
func (c *teamCall) allSame(w *words, n uint64, posts bool) ([]coll.Post, bool, error) {
	if !posts {
		return nil, true, nil
	}
	return c.t.samePosts(w, n)
}

// appendRecord appends p's record in a slot, past the slot's number: the
// datum's length with the post's flags, the header, 4 bytes unused
// (zero), the datum.
func appendRecord(b []byte, p coll.Post) []byte {
	size := uint64(len(p.Data))
	if p.Big {
		size |= postBig
	}
	if p.Refused {
		size |= postRefused
	}
	b = binary.LittleEndian.AppendUint64(b, size)
	meta, root, length := coll.Header{Call: p.Call}.Pack()
	b = binary.LittleEndian.AppendUint32(b, meta)
	b = binary.LittleEndian.AppendUint32(b, root)
	b = binary.LittleEndian.AppendUint32(b, length)
	b = binary.LittleEndian.AppendUint32(b, 0)
	return append(b, p.Data...)
}

// samePosts returns the posts of collective n where every rank's record
// is this rank's (t.rec), and true: G copies of this rank's post, which a
// team's exchanges in a row with the same record (its barriers, say)
// build once.
func (t *Team) samePosts(w *words, n uint64) ([]coll.Post, bool, error) {
	g := len(w.group)
	if len(t.posts) == g && len(t.sameRec) == len(t.rec) && bytes.Equal(t.sameRec[8:], t.rec[8:]) &&
		(binary.LittleEndian.Uint64(t.sameRec)^binary.LittleEndian.Uint64(t.rec))&^postPhase == 0 {
		return t.posts, true, nil
	}
	t.resetPosts()
	if _, err := t.readPosts(w, t.rec, n, w.me, 1); err != nil {
		return nil, false, err
	}
	for range g - 1 {
		t.posts = append(t.posts, t.posts[0])
	}
	t.sameRec = append(t.sameRec, t.rec...)
	return t.posts, true, nil
}

// combined returns the posts of collective n from the leader's buffer b,
// every rank's, or with same one post that is every rank's
// (combinedSame), and same.
func (t *Team) combined(w *words, b []byte, n uint64, same bool) ([]coll.Post, bool, error) {
	if same {
		if !bytes.Equal(b, t.rec) {
			return nil, false, w.corrupt(0, "its buffer holds one post for every rank in collective %d, not this rank's", n)
		}
		return t.samePosts(w, n)
	}
	t.resetPosts()
	posts, err := t.readPosts(w, b, n, 0, len(w.group))
	return posts, false, err
}

// resetPosts empties the team's posts and their arena.
func (t *Team) resetPosts() {
	t.posts, t.arena, t.sameRec = t.posts[:0], t.arena[:0], t.sameRec[:0]
}

// readPosts appends to t.posts the count posts in b: as combinePosts
// framed them in the leader's buffer (who 0), the slot of rank who past
// its number (count 1), or this rank's own record (t.rec, who this rank).
// b may be shared memory: each length is read once and checked, and every
// datum copied out into t.arena, which the posts share until the team's
// next exchange.
func (t *Team) readPosts(w *words, b []byte, n uint64, who, count int) ([]coll.Post, error) {
	for range count {
		if len(b) < postHeader-8 {
			return nil, w.corrupt(who, "its posts of collective %d end early", n)
		}
		size := binary.LittleEndian.Uint64(b) &^ postPhase
		h := coll.Unpack(binary.LittleEndian.Uint32(b[8:]), binary.LittleEndian.Uint32(b[12:]), binary.LittleEndian.Uint32(b[16:]))
		l := size &^ postFlags
		if l > maxPost || l > uint64(len(b)-(postHeader-8)) {
			return nil, w.corrupt(who, "a post of %#x bytes in collective %d, more than a slot's %d", l, n, maxPost)
		}
		b = b[postHeader-8:]
		start := len(t.arena)
		t.arena = append(t.arena, b[:l]...)
		t.posts = append(t.posts, coll.Post{Call: h.Call, Big: size&postBig != 0, Refused: size&postRefused != 0, Data: t.arena[start:len(t.arena):len(t.arena)]})
		b = b[l:]
	}
	return t.posts, nil
}

// combinePosts copies every rank's post of collective n into the leader's
// buffer, where each rank reads them from one mapping instead of G (on a
// crowded host, each look at another mapping after a context switch costs
// a walk of the page tables), or, where they do not fit, says so. Where
// every post is the same (a barrier's, say), the buffer holds it once,
// and its length says so (combinedSame). For a reduction, reduce (where
// not nil) may give instead the record of its result, which the buffer
// then holds alone (combinedReduced). The rank that completes the
// group's arrivals, after every rank arrived at n.
func (w *words) combinePosts(n uint64, reduce func() []byte) error {
	lead, err := w.area(0)
	if err != nil {
		return err
	}
	if reduce != nil {
		if rec := reduce(); rec != nil && len(rec) <= w.room() {
			copy(lead[offCombined+16:], rec)
			binary.LittleEndian.PutUint64(lead[offCombined:], n)
			binary.LittleEndian.PutUint64(lead[offCombined+8:], uint64(len(rec))|combinedReduced)
			return nil
		}
	}
	buf := lead[offCombined+16 : offCombined+16 : offCombined+16+w.room()]
	direct, same := false, true
	var first []byte // the first rank's record, in buf
	for i := range w.group {
		rec, err := w.record(lead, i, n)
		if err != nil {
			return err
		}
		switch {
		case direct:
			continue
		case i > 0 && same && bytes.Equal(rec, first):
			continue
		case i > 0 && same:
			// The first that differs: the buffer gets the i-1
			// records before it that were the first's.
			same = false
			if len(buf)+(i-1)*len(first) > cap(buf) {
				direct = true
				continue
			}
			for range i - 1 {
				buf = append(buf, first...)
			}
		}
		if len(buf)+len(rec) > cap(buf) {
			direct = true
			continue
		}
		buf = append(buf, rec...)
		if i == 0 {
			first = buf
		}
	}
	total := uint64(len(buf))
	switch {
	case direct:
		total = combinedDirect
	case same:
		total |= combinedSame
	}
	binary.LittleEndian.PutUint64(lead[offCombined:], n)
	binary.LittleEndian.PutUint64(lead[offCombined+8:], total)
	return nil
}

// In a counted group, a post whose record fits a line of the leader's
// area (offStaged, one line for each rank) goes there too, where the
// rank that completes the arrivals reads it (combinePosts, reducePosts)
// in one page instead of each rank's slot in a page of its own (on a
// crowded host, a walk of the page tables for each). A rank rewrites its
// line at collective n+1, after the group's release of n, and the line's
// number, stored last, says which collective's post it holds.

// staged returns the staged line of the group's i-th rank in the
// leader's area lead.
func staged(lead []byte, i int) []byte {
	o := offStaged + i*stagedSize
	return lead[o : o+stagedSize]
}

// stage writes rec, this rank's record of collective n in a counted
// group, into its staged line of the leader's area lead, where it fits.
func (w *words) stage(lead, rec []byte, n uint64) {
	if w.me >= stagedLines || len(rec) > stagedSize-8 {
		return
	}
	l := staged(lead, w.me)
	copy(l[8:], rec)
	word(l, 0).Store(n)
}

// record returns the record of the group's i-th rank's post of
// collective n, once every rank has arrived at n: from its staged line
// in the leader's area lead where that is numbered n, else from its
// slot; its length checked.
func (w *words) record(lead []byte, i int, n uint64) ([]byte, error) {
	if w.counted && i < stagedLines {
		if l := staged(lead, i); word(l, 0).Load() == n {
			size := binary.LittleEndian.Uint64(l[8:]) &^ postFlags
			if size > stagedSize-postHeader {
				return nil, w.corrupt(0, "the staged post of group rank %d has %#x bytes in collective %d, more than a line's %d", i, size, n, stagedSize-postHeader)
			}
			return l[8 : postHeader+int(size)], nil
		}
	}
	a, err := w.area(i)
	if err != nil {
		return nil, err
	}
	s := slot(a, n)
	if m := word(s, 0).Load(); m != n {
		return nil, w.corrupt(i, "its slot is numbered %#x, for collective %d", m, n)
	}
	l := binary.LittleEndian.Uint64(s[8:]) &^ postFlags
	if l > maxPost {
		return nil, w.corrupt(i, "a post of %#x bytes in collective %d, more than a slot's %d", l, n, maxPost)
	}
	return s[8 : postHeader+int(l)], nil
}
