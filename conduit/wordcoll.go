package conduit

// The collectives of a job that is one shared-memory group that pass data
// through its words (words.go), in slots: the all-gather (wordAllGather),
// broadcasts and reductions (wordTree), and the all-to-all (wordAlltoall).

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/udpconduit/udpconduit/spawn"
)

// slot returns the slot of area a for all-gather n.
func slot(a []byte, n uint64) []byte {
	o := offSlots + int(n&1)*slotSize
	return a[o : o+slotSize]
}

// wordAllGather runs all-gather n of a job that is one group (w.whole):
// each rank writes its part into its slot and the group synchronises. By
// dissemination, each rank then copies every part out of the slots; by
// gather and release, the leader first copies them into one buffer of
// its area (combine), where each rank reads them from one mapping instead
// of G (on a crowded host, each look at another mapping after a context
// switch costs a walk of the page tables), or, where they do not fit,
// says so and each reads the slots. ok false (and no error): some part
// did not fit its slot, every rank saw it, and the caller runs the
// all-gather over active messages. A rank rewrites its slot of parity n&1
// only at all-gather n+2, and the leader its buffer at n+1, each once
// every rank has arrived at n+1, after reading n.
//
// kind is the collective that passes its parts so (slotAllGather,
// slotAlltoall): a rank whose slot holds another kind's part called
// another collective, and every rank gets ErrCollectiveMismatch.
func (j *Job) wordAllGather(w *words, n uint64, data []byte, kind uint64) (parts [][]byte, ok bool, err error) {
	own, err := w.area(w.me)
	if err != nil {
		return nil, false, err
	}
	w.writeSlot(own, n, data, kind)
	err = j.waitIn("all-gather", n, j.gat.index, func() error {
		if w.dissem {
			return j.disseminate(w, &syncGather, n, false)
		}
		return j.syncGroup(w, &syncGather, n, func() error { return w.combine(n, kind) })
	})
	if err != nil {
		return nil, false, err
	}
	if !w.dissem {
		lead, err := w.area(0)
		if err != nil {
			return nil, false, err
		}
		// The leader wrote its buffer for n before it released n, and
		// rewrites it at n+1 only once this rank has arrived there.
		m, size := binary.LittleEndian.Uint64(lead[offCombined:]), binary.LittleEndian.Uint64(lead[offCombined+8:])
		switch {
		case m != n:
			return nil, false, w.corrupt(0, "its buffer of parts is numbered %#x, for all-gather %d", m, n)
		case size == slotTooLarge:
			return nil, false, nil
		case size == combinedMismatch:
			return nil, false, fmt.Errorf("%w: ranks of the group called %s and another collective at once", ErrCollectiveMismatch, slotKindName(kind))
		case size != combinedDirect:
			if size > uint64(endCombined-offCombined-16) {
				return nil, false, w.corrupt(0, "its buffer of parts has %#x bytes, more than its %d", size, endCombined-offCombined-16)
			}
			parts, err := splitParts(lead[offCombined+16:offCombined+16+int(size)], len(w.group))
			if err != nil {
				return nil, false, w.corrupt(0, "its buffer holds malformed parts")
			}
			return parts, true, nil
		}
	}
	// Every slot is looked at before a part too large decides: every
	// rank then sees a mismatch anywhere in the group.
	var sizes []int
	tooLarge := false
	for i := range w.group {
		s, err := w.slotPart(i, n, kind)
		if err != nil {
			return nil, false, err
		}
		tooLarge = tooLarge || s == nil
		sizes = append(sizes, len(s))
	}
	if tooLarge {
		return nil, false, nil
	}
	parts = carve(sizes)
	for i := range w.group {
		s, _ := w.slotPart(i, n, kind)
		copy(parts[i], s)
	}
	return parts, true, nil
}

// writeSlot writes data, the part of this rank (whose area is own) in
// all-gather n of kind, into its slot, the number last (an atomic store:
// a rank that polls the slot, as wordAlltoall does, finds the rest
// written once it finds the number).
func (w *words) writeSlot(own []byte, n uint64, data []byte, kind uint64) {
	s := slot(own, n)
	if len(data) > maxSlotPart {
		binary.LittleEndian.PutUint64(s[8:], slotOversize|kind<<slotKindShift)
	} else {
		binary.LittleEndian.PutUint64(s[8:], uint64(len(data))|kind<<slotKindShift)
		copy(s[16:], data)
	}
	word(s, 0).Store(n)
}

// slotPart returns the part in the slot of the group's i-th rank for
// all-gather n of kind; nil, and no error, when it was too large for its
// slot; an ErrCollectiveMismatch when that rank wrote another kind's.
func (w *words) slotPart(i int, n, kind uint64) ([]byte, error) {
	a, err := w.area(i)
	if err != nil {
		return nil, err
	}
	// After n's synchronisation, or once the slot held n (an
	// all-to-all), the slot holds n: its rank rewrites it at n+2 only
	// once every rank has arrived at n+1.
	s := slot(a, n)
	m, size := word(s, 0).Load(), binary.LittleEndian.Uint64(s[8:])
	k, size := size>>slotKindShift, size&(1<<slotKindShift-1)
	switch {
	case m != n:
		return nil, w.corrupt(i, "its all-gather slot is numbered %#x, for all-gather %d", m, n)
	case k > slotAlltoall:
		return nil, w.corrupt(i, "its all-gather slot says collective kind %#x", k)
	case k != kind:
		return nil, fmt.Errorf("%w: rank %d called %s, rank %d %s", ErrCollectiveMismatch, w.group[i], slotKindName(k), w.group[w.me], slotKindName(kind))
	case size == slotOversize:
		return nil, nil
	case size > maxSlotPart:
		return nil, w.corrupt(i, "its all-gather slot says %#x bytes, more than a slot's %d", size, maxSlotPart)
	}
	return s[16 : 16+size : 16+size], nil
}

// combine, on the leader, copies the parts of all-gather n of kind from
// the slots into its buffer, each a uvarint length and its bytes, after a
// header of n and their total length, or combinedDirect when they do not
// fit, slotTooLarge when one did not fit its slot, or combinedMismatch
// when one is another kind's (the leader then still releases the others,
// which find out from the header).
func (w *words) combine(n, kind uint64) error {
	lead, err := w.area(0)
	if err != nil {
		return err
	}
	buf := lead[offCombined+16 : offCombined+16 : endCombined]
	size := uint64(0)
	for i := range w.group {
		p, err := w.slotPart(i, n, kind)
		if errors.Is(err, ErrCollectiveMismatch) {
			size = combinedMismatch
			break
		}
		if err != nil {
			return err
		}
		if p == nil || size == slotTooLarge {
			size = slotTooLarge // look on: a later slot may be another kind's
			continue
		}
		if size != combinedDirect {
			if len(buf)+binary.MaxVarintLen64+len(p) > cap(buf) {
				size = combinedDirect
				continue
			}
			buf = binary.AppendUvarint(buf, uint64(len(p)))
			buf = append(buf, p...)
			size = uint64(len(buf))
		}
	}
	binary.LittleEndian.PutUint64(lead[offCombined:], n)
	binary.LittleEndian.PutUint64(lead[offCombined+8:], size)
	return nil
}

// splitParts copies the count parts framed in b (see combine) out of it.
// b is shared memory: it reads each length once, so that bytes changed
// between two reads cannot move a part out of b.
func splitParts(b []byte, count int) ([][]byte, error) {
	sizes, offs := make([]int, 0, count), make([]int, 0, count)
	for off := 0; len(sizes) < count; {
		l, k := binary.Uvarint(b[off:])
		if k <= 0 || l > uint64(len(b)-off-k) {
			return nil, fmt.Errorf("malformed parts in shared memory")
		}
		sizes, offs = append(sizes, int(l)), append(offs, off+k)
		off += k + int(l)
	}
	parts := carve(sizes)
	for i := range parts {
		copy(parts[i], b[offs[i]:])
	}
	return parts, nil
}

// carve returns parts of the given sizes, cut from one allocation, each
// with its capacity ending with it.
func carve(sizes []int) [][]byte {
	total := 0
	for _, s := range sizes {
		total += s
	}
	buf := make([]byte, total)
	parts := make([][]byte, len(sizes))
	for i, s := range sizes {
		parts[i] = buf[:s:s]
		buf = buf[s:]
	}
	return parts
}

// treeCall kinds of a collective on words, in its slot's meta.
const (
	wordBroadcast = 1 + iota
	wordReduce
	wordAllReduce
)

// wordMeta packs what a rank called, for its slot: the kind, the
// operator, the element type and the root.
func wordMeta(kind int, op Op, elem, root int) uint64 {
	return uint64(kind) | uint64(op)<<8 | uint64(elem)<<16 | uint64(root)<<32
}

// wordTree runs a broadcast or reduction of a job that is one group
// (w.whole) on words: this rank writes what it called (meta) and its datum
// (a broadcast's root its data, every rank its vector of a reduction, 8
// bytes an element) into its slot, the group synchronises as a barrier
// does, and each rank reads what it needs: the root's slot, or every
// slot, whose vectors it combines in rank order (so that every rank of an
// all-reduce gets the same bits). ok false (and no error): the ranks
// called different collectives (kind, root, operator, element type or
// length) or a datum did not fit its slot; every rank saw it in the same
// slots, and the caller runs the collective over messages, which reports
// a mismatch as it does everywhere. j.tree.lock held; t.call* set.
func (j *Job) wordTree(w *words, kind int, root int, op Op, elem int, data []byte) (out []byte, ok bool, err error) {
	t := &j.tree
	t.words++
	n := t.words
	own, err := w.area(w.me)
	if err != nil {
		return nil, false, err
	}
	meta := wordMeta(kind, op, elem, root)
	s := treeSlot(own, n)
	binary.LittleEndian.PutUint64(s, n)
	binary.LittleEndian.PutUint64(s[16:], meta)
	if kind == wordBroadcast && j.rank != root {
		data = nil // the others' data is not used
	}
	if len(data) > maxTreePart {
		binary.LittleEndian.PutUint64(s[8:], slotTooLarge)
	} else {
		binary.LittleEndian.PutUint64(s[8:], uint64(len(data)))
		copy(s[24:], data)
	}
	at := spawn.Coll{Kind: t.callKind, Seq: t.callSeq, Tree: t.callTree, Root: root, Index: t.callIndex}
	err = j.waitInColl(at, func() error {
		if w.dissem {
			return j.disseminate(w, &syncTree, n, false)
		}
		return j.syncGroup(w, &syncTree, n, func() error { return nil })
	})
	if err != nil {
		return nil, false, err
	}
	data = make([]byte, 0, len(data))
	for i := range w.group {
		a, err := w.area(i)
		if err != nil {
			return nil, false, err
		}
		// Written before its rank arrived at n, rewritten at n+2.
		s := treeSlot(a, n)
		m, size := binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
		switch {
		case m != n:
			return nil, false, w.corrupt(i, "its slot of broadcasts and reductions is numbered %#x, for collective %d", m, n)
		case binary.LittleEndian.Uint64(s[16:]) != meta || size == slotTooLarge:
			return nil, false, nil // another call, or too large: over messages
		case size > maxTreePart:
			return nil, false, w.corrupt(i, "its slot of broadcasts and reductions says %#x bytes, more than a slot's %d", size, maxTreePart)
		case kind != wordBroadcast && int(size) != len(data) && i > 0:
			return nil, false, nil // vectors of different lengths
		}
		in := s[24 : 24+size]
		switch {
		case kind == wordBroadcast:
			if w.group[i] == root {
				data = append(data, in...)
			}
		case i == 0:
			data = append(data, in...)
		default:
			combine(op, elem, data, in)
		}
	}
	if kind == wordReduce && j.rank != root {
		return nil, true, nil
	}
	return data, true, nil
}

// treeSlot returns the slot of area a for broadcast or reduction n.
func treeSlot(a []byte, n uint64) []byte {
	o := offTreeSlots + int(n&1)*slotSize
	return a[o : o+slotSize]
}

// wordAlltoall runs an all-to-all of the whole job, which is one group
// (w.whole), on the all-gather's slots, under its lock and numbering:
// each rank writes all its blocks (data, Size() blocks of b bytes) into
// its slot, waits until every rank's slot holds this all-to-all's number,
// and copies its block out of each: one rank's write away from its
// result, with no leader between. It arrives (or, by dissemination,
// posts its rounds) as an all-gather does without waiting on them, so
// that ranks of the group in an all-gather of the same number (another
// collective: a mismatch) find its slot and fail instead of waiting; the
// leader also releases the number, with its buffer marked to be read
// from the slots. A rank rewrites its slot of parity n&1 only at n+2,
// after it saw every slot at n+1, which each rank wrote after it read n.
// ok false (and no error): no words, or some rank's blocks did not fit
// its slot, which every rank saw; the caller then runs it over messages.
func (j *Job) wordAlltoall(data []byte, b int) (out []byte, ok bool, err error) {
	w := j.bar.words
	if w == nil || !w.whole {
		return nil, false, nil
	}
	j.enter()
	j.gat.lock.Lock()
	defer j.gat.lock.Unlock()
	n, err := j.nextGather()
	if err != nil {
		return nil, false, err
	}
	fail := func(err error) ([]byte, bool, error) {
		return nil, false, j.done(fmt.Errorf("all-to-all (all-gather %d): %w", n, err))
	}
	own, err := w.area(w.me)
	if err != nil {
		return fail(err)
	}
	w.writeSlot(own, n, data, slotAlltoall)
	// Ranks that spin (dissemination) each ring every other's doorbell
	// and poll the slots, one write away from their result. On a crowded
	// host each rank arrives at the leader, which releases them all once
	// every slot is written: two notes a rank, where ringing every rank
	// woke each one n-1 times (256 ranks on 2 CPUs rang 65280 doorbells a
	// call; at 8, 18.0 µs a call against 12.0 gathered, medians of 6
	// alternating runs of testam 8 -coll).
	gathered := !w.dissem
	switch {
	case w.dissem:
		for i := 0; 1<<i < len(w.group); i++ {
			if err := w.post(&syncGather, i, n); err != nil {
				return fail(err)
			}
		}
	case !w.leads():
		if err := w.arrive(&syncGather, n); err != nil {
			return fail(err)
		}
	}
	switch {
	case gathered && w.leads():
		err = j.waitIn("all-gather", n, j.gat.index, func() error {
			return j.wordWait(w, func() bool { return w.arrived(&syncGather, n) })
		})
	case gathered:
		err = j.waitIn("all-gather", n, j.gat.index, func() error {
			return j.wordWait(w, func() bool { return w.released(&syncGather, n) })
		})
	default:
		for i, addr := range w.addrs {
			if i != w.me {
				if err := w.sh.Notify(addr); err != nil {
					return fail(err)
				}
			}
		}
		slots := make([][]byte, len(w.group))
		for i := range slots {
			a, err := w.area(i)
			if err != nil {
				return fail(err)
			}
			slots[i] = slot(a, n)
		}
		next := 0 // the slots before next hold n
		err = j.waitIn("all-gather", n, j.gat.index, func() error {
			return j.wordWait(w, func() bool {
				for ; next < len(slots); next++ {
					// n+2 comes only after this rank's n+1.
					if m := word(slots[next], 0).Load(); m > n {
						return w.broken(next, "its all-gather slot is numbered %#x, for all-to-all %d", m, n)
					} else if m < n {
						return false
					}
				}
				return true
			})
		})
	}
	if err != nil {
		return fail(err)
	}
	// Every slot is looked at before a part too large decides: every
	// rank then sees a mismatch anywhere in the group.
	out = make([]byte, 0, len(data))
	tooLarge := false
	var mismatch error
	for i := range w.group {
		p, err := w.slotPart(i, n, slotAlltoall)
		switch {
		case errors.Is(err, ErrCollectiveMismatch):
			mismatch = err
		case err != nil:
			return fail(err)
		case p == nil:
			tooLarge = true
		case len(p) != len(data):
			mismatch = fmt.Errorf("%w: all-to-all: rank %d passed %d bytes, rank %d %d", ErrCollectiveMismatch, w.group[i], len(p), j.rank, len(data))
		default:
			out = append(out, p[w.me*b:(w.me+1)*b]...)
		}
	}
	if w.leads() && !w.dissem {
		// Ranks in an all-gather of this number (a mismatch) wait for
		// its release, and then read the slots.
		lead := own
		binary.LittleEndian.PutUint64(lead[offCombined:], n)
		binary.LittleEndian.PutUint64(lead[offCombined+8:], combinedDirect)
		if err := w.release(&syncGather, n); err != nil {
			return fail(err)
		}
	}
	switch {
	case mismatch != nil:
		return fail(mismatch)
	case tooLarge:
		return nil, false, nil
	}
	j.ep.Fence()
	return out, true, nil
}
