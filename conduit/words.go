package conduit

// This file is the collectives' phase within a shared-memory group on
// shared words, as GASNet's PSHM barrier: no message, no queue, a store
// that the other ranks of the host load.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/spawn"
	"github.com/udpconduit/udpconduit/spawn/binomial"
)

// groupSync is a kind of synchronisation of a group (barrier, all-gather,
// broadcast and reductions): where its words lie in a rank's area.
type groupSync struct {
	arrive  int // the leader's count of its members' arrivals
	release int // the leader's number of the last one released
	rounds  int // a rank's words of the dissemination, one per round
}

// Layout of a rank's area (amudp.Shared.Area): the words that several
// ranks write each on a cache line of its own, the dissemination's, which
// their owner alone writes, packed; then the slots of the all-gathers and
// of the broadcasts and reductions (which a rank may run at once from two
// goroutines), and the leader's buffer.
var (
	syncBarrier = groupSync{0, 64, 384}
	syncGather  = groupSync{128, 192, 384 + 8*maxGroupRounds}
	syncTree    = groupSync{256, 320, 384 + 16*maxGroupRounds}
	// syncStart, once at start-up (shareAreas), lies in the barrier's
	// cache lines, past their words: no dissemination.
	syncStart = groupSync{8, 72, -1}
)

const (
	// maxGroupRounds bounds the rounds of a dissemination within a
	// group: groups of up to 2^16 ranks.
	maxGroupRounds = 16
	// offSlots is where a rank's two all-gather slots begin, one for
	// each parity of the all-gather's number: the number (8 bytes), the
	// part's length (8 bytes: slotOversize when it did not fit, and the
	// collective's kind in the top byte, slotKindShift), and the part.
	offSlots = 384 + 3*8*maxGroupRounds
	slotSize = 1664
	// maxSlotPart is the largest part an all-gather passes in a slot.
	maxSlotPart = slotSize - 16
	// offTreeSlots is where a rank's two slots of broadcasts and
	// reductions begin: the collective's number, the data's length (or
	// slotTooLarge), what the rank called (wordMeta, 8 bytes), the data.
	offTreeSlots = offSlots + 2*slotSize
	// maxTreePart is the largest datum a broadcast or reduction passes in
	// a slot.
	maxTreePart = slotSize - 24
	// offCombined is where the leader's buffer of an all-gather's parts
	// begins (see combine), to endCombined: the all-gather's number, the
	// parts' total length, and the parts.
	offCombined = offTreeSlots + 2*slotSize
	endCombined = offGatherRead
	// offGatherRead is where the gatherSlots words lie, one for each
	// residue of a team collective's number modulo gatherSlots, in which
	// the root of a gather on shared words (wordGather) says which
	// gather's part it has read from this rank's gather slot of that
	// residue; then the gather slots, to the end of the area: the
	// gather's number (the team's), the part's length (gatherOversize
	// when it goes by message) and the root. Eight slots let a non-root
	// run up to eight gathers ahead of a slow root (two: twice the time
	// a gather at N = 8 on 2 CPUs; sixteen: no clear gain).
	offGatherRead  = offGatherSlots - 8*gatherSlots
	offGatherSlots = amudp.AreaSize - gatherSlots*gatherSlotSize
	gatherSlots    = 8
	gatherSlotSize = 256
	// maxGatherPart is the largest part a gather passes in a slot.
	maxGatherPart = gatherSlotSize - 24
	// gatherOversize, as a gather slot's length, says that the part goes
	// to the root by message.
	gatherOversize = ^uint64(0)
	// combinedDirect, as the buffer's length, says that the parts did
	// not fit in it and are read from the slots.
	combinedDirect = slotTooLarge - 1
	// slotTooLarge in a slot's length says that the rank's part did not
	// fit: the collective then runs over active messages.
	slotTooLarge = ^uint64(0)
	// combinedMismatch, as the buffer's length, says that the ranks'
	// slots were of different collectives (slotKind).
	combinedMismatch = slotTooLarge - 2
	// slotKindShift: a slot's length word carries, in its top byte, the
	// collective that wrote the part (slotAllGather, slotAlltoall), so that
	// ranks that called different ones find out, also when a part did not
	// fit (slotOversize).
	slotKindShift = 56
	// slotOversize, as an all-gather slot's length (with the kind above
	// it), says that the rank's part did not fit.
	slotOversize = 1 << 55
)

// The collectives that pass their parts through the all-gather's slots.
const (
	slotAllGather uint64 = iota
	slotAlltoall
)

// slotKindName names a slot kind in a mismatch error.
func slotKindName(k uint64) string {
	switch k {
	case slotAllGather:
		return "an all-gather"
	case slotAlltoall:
		return "an all-to-all"
	}
	return fmt.Sprintf("collective kind %d", k)
}

// words runs the within-group phase of barriers and all-gathers on words
// in the inbox areas of the group's ranks (amudp.Shared.Area), in one of
// two ways. Gather and release: each member counts its arrival at
// synchronisation e of a kind into a word of the leader's area (the
// group's lowest rank); the leader waits until the count reaches
// (members)·e, does the job-wide phase among the leaders if any, stores e
// into its release word and wakes the members that sleep
// (amudp.Shared.Notify); the members wait until the release word reaches
// e. Each waiting rank wakes once. Dissemination, for a job that is one
// group whose ranks fit its CPUs: in round i, each rank stores e into its
// word of round i and waits until the rank 2^i before it has done the
// same: ⌈log2 G⌉ one-way latencies instead of two, but each round may wake
// each rank. A rank completes e before it arrives at e+1, so the words
// only grow and need no reset. In a job of one group, all-gathers,
// broadcasts and reductions pass their data through slots in the areas
// (wordAllGather, wordTree); data too large for a slot, and those
// collectives in a job of several groups, run over active messages.
type words struct {
	sh     *amudp.Shared
	addrs  []netip.AddrPort // of the group's ranks, in group order
	group  []int            // the group's ranks, in order; group[0] leads
	me     int              // this rank's index in group
	whole  bool             // the group is the whole job
	dissem bool             // by dissemination (set before the first)
	// yield: the host's ranks outnumber its CPUs; a waiting rank yields
	// the CPU between looks at the words for up to yieldFor before it
	// sleeps (see wait).
	yield bool

	mu    sync.Mutex
	areas []atomic.Pointer[[]byte] // by index in group, once mapped
}

// newWords returns the words of rank's group (shmGroup of leaders) over
// sh, whose inboxes SetInboxes named; addrs are every rank's addresses.
func newWords(sh *amudp.Shared, addrs []netip.AddrPort, group []int, rank int) *words {
	w := &words{sh: sh, group: group, whole: len(group) == len(addrs), areas: make([]atomic.Pointer[[]byte], len(group))}
	for i, r := range group {
		w.addrs = append(w.addrs, addrs[r])
		if r == rank {
			w.me = i
		}
	}
	return w
}

// leads reports whether this rank leads its group.
func (w *words) leads() bool { return w.me == 0 }

// area returns the area of the group's i-th rank, mapped on first use.
func (w *words) area(i int) ([]byte, error) {
	if a := w.areas[i].Load(); a != nil {
		return *a, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if a := w.areas[i].Load(); a != nil {
		return *a, nil
	}
	a := w.sh.Area(w.addrs[i])
	if len(a) != amudp.AreaSize {
		return nil, fmt.Errorf("shared memory: the inbox of rank %d, in this rank's group, cannot be mapped", w.group[i])
	}
	w.areas[i].Store(&a)
	return a, nil
}

// word returns the word at off in area a.
func word(a []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&a[off])) }

// arrive counts this member's arrival at synchronisation e of kind k, and
// wakes the leader if it sleeps. Members only.
func (w *words) arrive(k *groupSync, e uint64) error {
	a, err := w.area(0)
	if err != nil {
		return err
	}
	word(a, k.arrive).Add(1)
	return w.sh.Notify(w.addrs[0])
}

// arrived reports whether every member has arrived at synchronisation e of
// kind k. The leader only, after area(0) succeeded.
func (w *words) arrived(k *groupSync, e uint64) bool {
	a := *w.areas[0].Load()
	return word(a, k.arrive).Load() >= uint64(len(w.group)-1)*e
}

// release releases the members from synchronisation e of kind k. The
// leader only.
func (w *words) release(k *groupSync, e uint64) error {
	a, err := w.area(0)
	if err != nil {
		return err
	}
	word(a, k.release).Store(e)
	for _, to := range w.addrs[1:] {
		if err := w.sh.Notify(to); err != nil {
			return err
		}
	}
	return nil
}

// released reports whether the leader has released synchronisation e of
// kind k. Members only, after area(0) succeeded.
func (w *words) released(k *groupSync, e uint64) bool {
	a := *w.areas[0].Load()
	return word(a, k.release).Load() >= e
}

// yieldFor bounds how long a rank of a crowded host (words.yield) that
// waits for a word to change gives the CPU to the host's other ranks
// (sched_yield) between looks, before it sleeps in the kernel until a
// Notify wakes it: the ranks of a collective that all wait take turns on
// the CPUs and each sees the words change at its next turn, with no
// wake-up to pay for, as Open MPI's ranks do; a rank that waits for
// longer (another one computes) stops taking turns from it.
const yieldFor = 20 * time.Millisecond

// wordWait waits, servicing the network, until cond (a look at words) holds.
func (j *Job) wordWait(w *words, cond func() bool) error {
	if w.yield && !cond() {
		for start := time.Now(); time.Since(start) < yieldFor; {
			if err := j.ep.Poll(); err != nil {
				return err
			}
			if cond() || j.leaving() || j.aborting.Load() {
				break
			}
			yieldCPU()
		}
	}
	return j.collWait(cond)
}

// shareAreas maps the area of every rank of a group that is the whole job
// (the collectives on its words read any of them) and then synchronises
// the group once, at start-up: no rank returns from Init before every rank
// of the group has mapped every area. A mapping keeps its inbox, so a
// collective that another rank completed before it ended (its Exit, say)
// still reads that rank's words and parts; mapped on first use instead, an
// inbox whose rank had ended could no longer be mapped.
func (j *Job) shareAreas(w *words) error {
	for i := range w.group {
		if _, err := w.area(i); err != nil {
			return err
		}
	}
	return j.syncGroup(w, &syncStart, 1, func() error { return nil })
}

// syncGroup runs synchronisation e of kind k within the group: every
// member arrives, and returns once the leader has released it; the leader
// waits for them all, runs before and releases them.
func (j *Job) syncGroup(w *words, k *groupSync, e uint64, before func() error) error {
	if _, err := w.area(0); err != nil {
		return err
	}
	if !w.leads() {
		if err := w.arrive(k, e); err != nil {
			return err
		}
		return j.wordWait(w, func() bool { return w.released(k, e) })
	}
	if err := j.wordWait(w, func() bool { return w.arrived(k, e) }); err != nil {
		return err
	}
	if err := before(); err != nil {
		return err
	}
	return w.release(k, e)
}

// post stores e into this rank's word of round i of a dissemination of
// kind k, and wakes the rank that waits for it if it sleeps.
func (w *words) post(k *groupSync, i int, e uint64) error {
	own, err := w.area(w.me)
	if err != nil {
		return err
	}
	word(own, k.rounds+8*i).Store(e)
	return w.sh.Notify(w.addrs[(w.me+1<<i)%len(w.group)])
}

// disseminate runs synchronisation e of kind k as a dissemination (see
// words), its first round posted already when posted.
func (j *Job) disseminate(w *words, k *groupSync, e uint64, posted bool) error {
	g := len(w.group)
	for i := 0; 1<<i < g; i++ {
		if i > 0 || !posted {
			if err := w.post(k, i, e); err != nil {
				return err
			}
		}
		a, err := w.area((w.me - 1<<i + g) % g)
		if err != nil {
			return err
		}
		r := word(a, k.rounds+8*i)
		if err := j.wordWait(w, func() bool { return r.Load() >= e }); err != nil {
			return err
		}
	}
	return nil
}

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
		m, size := binary.LittleEndian.Uint64(lead[offCombined:]), binary.LittleEndian.Uint64(lead[offCombined+8:])
		switch {
		case m != n:
			return nil, false, fmt.Errorf("the parts in shared memory are from all-gather %d", m)
		case size == slotTooLarge:
			return nil, false, nil
		case size == combinedMismatch:
			return nil, false, fmt.Errorf("%w: ranks of the group called %s and another collective at once", ErrCollectiveMismatch, slotKindName(kind))
		case size != combinedDirect:
			if size > uint64(endCombined-offCombined-16) {
				return nil, false, fmt.Errorf("the parts in shared memory have %d bytes, more than the buffer's %d", size, endCombined-offCombined-16)
			}
			parts, err := splitParts(lead[offCombined+16:offCombined+16+int(size)], len(w.group))
			return parts, err == nil, err
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
	s := slot(a, n)
	m, size := word(s, 0).Load(), binary.LittleEndian.Uint64(s[8:])
	k, size := size>>slotKindShift, size&(1<<slotKindShift-1)
	switch {
	case m != n:
		return nil, fmt.Errorf("rank %d's part in shared memory is from all-gather %d", w.group[i], m)
	case k != kind:
		return nil, fmt.Errorf("%w: rank %d called %s, rank %d %s", ErrCollectiveMismatch, w.group[i], slotKindName(k), w.group[w.me], slotKindName(kind))
	case size == slotOversize:
		return nil, nil
	case size > maxSlotPart:
		return nil, fmt.Errorf("rank %d's part in shared memory has %d bytes, more than a slot's %d", w.group[i], size, maxSlotPart)
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
func splitParts(b []byte, count int) ([][]byte, error) {
	sizes := make([]int, 0, count)
	for rest := b; len(sizes) < count; {
		l, k := binary.Uvarint(rest)
		if k <= 0 || l > uint64(len(rest)-k) {
			return nil, fmt.Errorf("malformed parts in shared memory")
		}
		sizes = append(sizes, int(l))
		rest = rest[k+int(l):]
	}
	parts := carve(sizes)
	for i := range parts {
		_, k := binary.Uvarint(b)
		b = b[k:]
		b = b[copy(parts[i], b):]
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
		s := treeSlot(a, n)
		m, size := binary.LittleEndian.Uint64(s), binary.LittleEndian.Uint64(s[8:])
		switch {
		case m != n:
			return nil, false, fmt.Errorf("rank %d's datum in shared memory is from collective %d", w.group[i], m)
		case binary.LittleEndian.Uint64(s[16:]) != meta || size == slotTooLarge:
			return nil, false, nil // another call, or too large: over messages
		case size > maxTreePart:
			return nil, false, fmt.Errorf("rank %d's datum in shared memory has %d bytes, more than a slot's %d", w.group[i], size, maxTreePart)
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

// setWords makes the barrier, and the all-gather of a job that is one
// group, run their within-group phase on w (nil for a group of one); the
// barrier's messages then go only among the leaders, over a binomial tree
// of theirs (leaders is every rank's group leader, shmLeaders). Every rank
// of the job calls it, or none. Before the job's first collective.
func (j *Job) setWords(w *words, leaders []int) {
	b := &j.bar
	if w != nil && w.whole && b.algo == barrierDissem && len(w.group) <= 1<<maxGroupRounds {
		w.dissem = true
	}
	b.words, b.algo, b.parent, b.children = w, barrierWords, -1, nil
	if leaders[j.rank] != j.rank {
		return
	}
	var heads []int
	me := 0
	for r, l := range leaders {
		if l == r {
			if r == j.rank {
				me = len(heads)
			}
			heads = append(heads, r)
		}
	}
	if me > 0 {
		b.parent = heads[binomial.Parent(me)]
	}
	for _, c := range binomial.Children(me, len(heads)) {
		b.children = append(b.children, heads[c])
	}
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
					if word(slots[next], 0).Load() < n {
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
