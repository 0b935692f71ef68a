// Package shmring is a queue of variable-size records in a region of
// memory that several processes map: many producers (the co-located ranks
// that send to one rank) and one consumer (that rank). It is the inbox of
// amudp's shared-memory transport (amudp.Shared, amudp/shm.go).
//
// The region is a header followed by a data area whose size is a power of
// two. Producers reserve space by advancing the tail with compare-and-swap,
// write their record, and commit it last, with a release store of the
// record's position plus one into its first word; the consumer reads the
// record at the head once that word says it is committed, copies it out,
// and advances the head. Records never wrap: a producer whose record would
// cross the end of the area pads to the end first. A record's contents
// start right after its 16-byte header, or up to 63 bytes later (the kind
// word says how many) so that a large second part (a Medium's payload) is
// copied to the same offset in a cache line as its source. A full queue
// refuses a record (Push returns false) and the caller sends it another
// way.
//
// Every value read from the region is checked before use. The consumer
// keeps its own copy of the head, and reads a record's length and kind
// only once its commit word names the head, checked against the area; a
// producer reserves only at a tail that is a multiple of 64 and lies
// within the capacity of the head as it last read it (it reads the head
// again, and checks it, when the ring looks full); Check compares the
// header's words with what the consumer knows. A peer that writes garbage
// into the region can make the queue refuse records, hold them back (a
// commit word that no longer names its record) or hand the consumer
// records of garbage within the area, never make a view read or write
// outside the region; a view that finds the rules broken keeps the error
// (Err): Push refuses and Peek returns it from then on. A producer that
// dies between reserving and committing stops the consumer at its record,
// and leaves the ends apart (Ends) for a consumer about to block; the
// job's liveness rules end such a job (the consumer's other peers
// fall back when the queue fills). A consumer that finds the ring empty
// far into its area moves both ends back to the start, where the cache is
// warm (hotSpan); a producer of a large record pads to the end and writes
// it at the start where the records in flight leave room there
// (rewindFrom).
package shmring

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/udpconduit/udpconduit/amudp/internal/release"
	"github.com/udpconduit/udpconduit/amudp/shmem"
)

// Layout of the header, four pages: each field that more than one process
// writes has a cache line of its own, and the rest of the page, from
// offArea, is the area of its owner's choosing (Area).
const (
	HeaderSize = 16384
	offMagic   = 0
	offCap     = 8
	offTail    = 64
	offHead    = 128
	offSleep   = 192
	offNotes   = 200
	offDetours = 208
	offReady   = 216
	offArea    = 256

	// hotSpan bounds where the records of a ring that empties between
	// pushes go: a consumer that finds the ring empty with its head at or
	// beyond hotSpan moves both ends to the start of the data area, so
	// that messages exchanged one at a time (a ping-pong, the rounds of
	// a collective) reuse the same few cache lines and pages instead of
	// walking the whole area, touching each page first with a page fault.
	// A flood of small records uses all of it; of large ones, its first
	// quarter or so (rewindFrom); a ring that fills, all of it.
	hotSpan = 16384

	// AreaSize is the size of Area.
	AreaSize = HeaderSize - offArea

	magic     = 0x676e697263706475 // "udpcring", little-endian
	recHeader = 16                 // commit word, length, kind
	// align is a cache line: a record of up to 64 bytes takes one line,
	// which moves once from its producer's cache to its consumer's.
	align = 64

	kindData    = 1
	kindPad     = 2
	kindMessage = 3

	// MinCapacity and MaxCapacity bound a ring's data area.
	MinCapacity = 4096
	MaxCapacity = 1 << 30
)

// ErrCorrupt is what every error of a view that found its ring's rules
// broken matches (errors.Is): a CorruptError.
var ErrCorrupt = errors.New("shmring: corrupted shared-memory queue")

// CorruptError says which value read from the region broke the ring's
// rules.
type CorruptError struct{ What string }

func (e *CorruptError) Error() string { return ErrCorrupt.Error() + ": " + e.What }

// Unwrap makes the error match ErrCorrupt.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// Ring is one process's view of a ring in mapped memory.
type Ring struct {
	data    []byte
	mask    uint64
	magic   *atomic.Uint64
	cap     *atomic.Uint64
	tail    *atomic.Uint64
	head    *atomic.Uint64
	sleep   *atomic.Uint32
	notes   *atomic.Uint64
	detours *atomic.Uint64
	ready   *atomic.Uint64
	area    []byte
	// seenHead is the head as this view's producers last read it, and
	// found consistent with the tail.
	seenHead atomic.Uint64
	// fault is the first breach of the rules this view found (Err).
	fault atomic.Pointer[CorruptError]

	// The consumer's words, which it writes for each record, lie on a
	// cache line of their own: where one process pushes into a ring and
	// takes from it (tests, benchmarks), the line that producers read
	// from this view for each push would move at each Advance
	// (BenchmarkPingPong).
	_ [64]byte
	// own is the consumer's head, which it alone writes: Peek, Advance
	// and Empty go by it, never by the shared word, which the consumer
	// stores it into for the producers and only reads to check it.
	// Always a multiple of align.
	own atomic.Uint64
	// next is the consumer's record size at the head, set by Peek and used
	// by Advance; message says whether that record is a message
	// (PushMessage).
	next    uint64
	message bool
	_       [64]byte
}

// Size is the size of the region that holds a ring of capacity bytes.
func Size(capacity int) int { return HeaderSize + capacity }

// Format writes an empty ring's header into mem, whose size is Size of a
// power of two from MinCapacity to MaxCapacity, and returns the ring.
// Only the ring's creator calls it, before any other process maps mem.
func Format(mem []byte) (*Ring, error) {
	c := len(mem) - HeaderSize
	if c < MinCapacity || c > MaxCapacity || c&(c-1) != 0 || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("shmring: region of %d bytes: want %d + a power of two from %d to %d, 8-aligned", len(mem), HeaderSize, MinCapacity, MaxCapacity)
	}
	clear(mem[:HeaderSize])
	binary.LittleEndian.PutUint64(mem[offCap:], uint64(c))
	r := open(mem, c)
	r.magic.Store(magic)
	return r, nil
}

// Open returns the ring another process formatted in mem. A region whose
// magic word is not the ring's holds no ring; one that does, but whose
// capacity, head or tail break the rules, is corrupt (ErrCorrupt): a head
// or tail that is not a multiple of 64. Whether the tail lies within the
// capacity of the head, read while producers and the consumer move them,
// Push checks.
func Open(mem []byte) (*Ring, error) {
	if len(mem) < HeaderSize+MinCapacity || uintptr(unsafe.Pointer(&mem[0]))%8 != 0 {
		return nil, fmt.Errorf("shmring: region of %d bytes is too small for a ring", len(mem))
	}
	if word(mem, offMagic).Load() != magic {
		return nil, fmt.Errorf("shmring: region holds no ring")
	}
	c := word(mem, offCap).Load()
	if c < MinCapacity || c&(c-1) != 0 || c > uint64(len(mem)-HeaderSize) {
		return nil, &CorruptError{fmt.Sprintf("the capacity word is %#x, in a region of %d bytes", c, len(mem))}
	}
	r := open(mem, int(c))
	h, t := r.head.Load(), r.tail.Load()
	if h%align != 0 || t%align != 0 {
		return nil, &CorruptError{fmt.Sprintf("the head is %#x and the tail %#x", h, t)}
	}
	r.own.Store(h)
	r.seenHead.Store(h)
	return r, nil
}

func open(mem []byte, c int) *Ring {
	return &Ring{
		data:    mem[HeaderSize : HeaderSize+c],
		mask:    uint64(c - 1),
		magic:   word(mem, offMagic),
		cap:     word(mem, offCap),
		tail:    word(mem, offTail),
		head:    word(mem, offHead),
		sleep:   (*atomic.Uint32)(unsafe.Pointer(&mem[offSleep])),
		notes:   word(mem, offNotes),
		detours: word(mem, offDetours),
		ready:   word(mem, offReady),
		area:    mem[offArea:HeaderSize:HeaderSize],
	}
}

func word(b []byte, off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&b[off]))
}

// Capacity is the size of the ring's data area.
func (r *Ring) Capacity() int { return len(r.data) }

// RecordSize is the room a record of n bytes (the sum of Push's parts)
// takes in a ring at most: its header and the bytes, 64-aligned, and from
// skipFrom bytes up to 63 more (push).
func RecordSize(n int) int {
	if n >= skipFrom {
		n += align - 1 // at most, when its second part is large (push)
	}
	return (recHeader + n + align - 1) &^ (align - 1)
}

// skipFrom is the size from which a record's second part starts at the
// same offset in a cache line as its source (push): a copy with REP MOVSB
// took 680 ns for 65000 bytes 52 bytes off that offset, 510 at it.
const skipFrom = 4096

// rewindFrom is the size (the sum of Push's parts) from which a record
// goes back to the start of the data area where the records in flight
// leave room there (rewind), instead of after the last: a flood of large
// records whose consumer keeps up then walks the first quarter of the
// area or so, in lines the CPUs' caches still hold, instead of all of it
// (65000-byte Mediums into a 4 MiB inbox: BENCHMARKS.md). The pad it
// takes, from the tail to the end, holds room until the consumer passes
// it, and is taken only where a quarter of the area stays free.
const rewindFrom = 4096

// MaxRecord is the largest record (the sum of Push's parts) a ring of
// capacity bytes takes: a quarter of it, so that a full ring still holds
// several.
func MaxRecord(capacity int) int { return capacity/4 - recHeader }

// Err returns the breach of the ring's rules that this view found (a
// *CorruptError), or nil. Once it is set, Push refuses every record and
// Peek returns it.
func (r *Ring) Err() error {
	if f := r.fault.Load(); f != nil {
		return f
	}
	return nil
}

// corrupt keeps the first breach this view found, and returns the one
// kept.
func (r *Ring) corrupt(format string, a ...any) error {
	r.fault.CompareAndSwap(nil, &CorruptError{fmt.Sprintf(format, a...)})
	return r.fault.Load()
}

// Push appends one record, the concatenation of a and b, and reports
// whether it did: false when the ring has no room for it now, when it is
// longer than MaxRecord, or when the ring is corrupt (Err says so). Any
// number of goroutines and processes may push at once.
func (r *Ring) Push(a, b []byte) bool { return r.push(kindData, a, b) }

// PushMessage is Push for a record of the other kind, a message, which the
// consumer tells from Push's records by Message.
func (r *Ring) PushMessage(a, b []byte) bool { return r.push(kindMessage, a, b) }

func (r *Ring) push(kind uint32, a, b []byte) bool {
	n := uint64(len(a) + len(b))
	c := uint64(len(r.data))
	if n > uint64(MaxRecord(len(r.data))) || r.fault.Load() != nil {
		return false
	}
	// A large second part starts at the same offset in a cache line as
	// its source, the record's parts skip bytes (0..align-1) into it;
	// the kind word carries skip (Peek).
	var skip uint64
	if len(b) >= skipFrom {
		skip = uint64(uintptr(unsafe.Pointer(&b[0]))-uintptr(unsafe.Pointer(&r.data[0]))-recHeader-uintptr(len(a))) & (align - 1)
	}
	need := (recHeader + skip + n + align - 1) &^ (align - 1)
	var t, pad uint64
	for {
		t = r.tail.Load()
		if t%align != 0 {
			r.corrupt("the tail is %#x, not a multiple of %d", t, align)
			return false
		}
		off := t & r.mask // a multiple of align: its header fits
		pad = 0
		switch {
		case off+need > c:
			pad = c - off
		case n >= rewindFrom && off >= hotSpan:
			pad = r.rewind(t, need)
		}
		// The head as this view last read it is at most the head (it
		// only grows), so a record that fits below it fits: the head's
		// cache line, which the consumer writes after each record, is
		// read only when the ring looks full. Each of d, pad and need is
		// at most c: their sum does not overflow.
		if d := t - r.seenHead.Load(); d > c || d+pad+need > c {
			h := r.head.Load()
			if d := t - h; d > c || d+pad+need > c || h%align != 0 {
				if r.head.Load() != h || r.tail.Load() != t {
					continue // the consumer or a producer moved: look again
				}
				// Read while neither moved, so at once: the head lies
				// at most c below the tail.
				if h%align != 0 || t-h > c {
					r.corrupt("the head is %#x and the tail %#x", h, t)
					return false
				}
				r.seenHead.Store(h)
				return false
			}
			r.seenHead.Store(h)
		}
		if r.tail.CompareAndSwap(t, t+pad+need) {
			break
		}
	}
	if pad > 0 {
		r.commit(t, kindPad, uint32(pad-recHeader))
		t += pad
	}
	// The second part first: the consumer spins on the commit word, whose
	// cache line the first part shares, and the line then moves between
	// the two once per record, not again in the middle of a large copy,
	// unless the second part starts in that line too (BenchmarkFlood).
	o := t&r.mask + recHeader + skip
	shmem.Copy(r.data[o+uint64(len(a)):], b)
	shmem.Copy(r.data[o:], a)
	r.commit(t, kind|uint32(skip)<<8, uint32(n))
	return true
}

// rewind returns the pad that moves a record of need bytes reserved at
// the tail t back to the start of the data area (rewindFrom), or 0 where
// that would leave less than a quarter of the area free, the records in
// flight included: their room then lies below t's offset in the area. It
// reads the head, which a small record's push does not (push).
func (r *Ring) rewind(t, need uint64) uint64 {
	c, off := uint64(len(r.data)), t&r.mask
	h := r.head.Load()
	d := t - h
	if h%align != 0 || d > off || off-d < need+c/4 {
		return 0
	}
	r.seenHead.Store(h)
	return c - off
}

// commit writes the header of the record at position p, a multiple of
// align, its commit word last.
func (r *Ring) commit(p uint64, kind, n uint32) {
	o := p & r.mask
	binary.LittleEndian.PutUint32(r.data[o+8:], n)
	binary.LittleEndian.PutUint32(r.data[o+12:], kind)
	// A release, not sequentially consistent: the producer's reservation
	// (the tail's compare-and-swap) is what a consumer about to block
	// looks at (Ends), and the producer reads Sleeping only after it.
	release.Store(word(r.data, int(o)), p+1)
}

// setHead moves the consumer's head to h, its own copy and the shared
// word.
func (r *Ring) setHead(h uint64) {
	release.Store(&r.own, h)
	release.Store(r.head, h)
}

// Peek returns the record at the head, which stays valid until Advance,
// or ok false when there is none yet. Only the consumer calls it. A record
// that breaks the ring's rules makes the ring corrupt: Peek returns
// ErrCorrupt (a *CorruptError) from then on.
func (r *Ring) Peek() (rec []byte, ok bool, err error) {
	if f := r.fault.Load(); f != nil {
		return nil, false, f
	}
	for {
		h := r.own.Load()
		o := h & r.mask
		if word(r.data, int(o)).Load() != h+1 {
			if o >= hotSpan && r.tail.CompareAndSwap(h, h+uint64(len(r.data))-o) {
				// Empty, and no producer has reserved: both ends move
				// to the start of the area.
				r.setHead(h + uint64(len(r.data)) - o)
			}
			return nil, false, nil
		}
		n := uint64(binary.LittleEndian.Uint32(r.data[o+8:]))
		kind := binary.LittleEndian.Uint32(r.data[o+12:])
		skip := uint64(kind >> 8) // push
		kind &= 0xff
		size := (recHeader + skip + n + align - 1) &^ (align - 1)
		end := o + size
		switch {
		case kind == kindPad && skip == 0 && end == uint64(len(r.data)):
			r.setHead(h + size) // a pad reaches exactly to the end
			continue
		case (kind == kindData || kind == kindMessage) && skip < align && n <= uint64(MaxRecord(len(r.data))) && end <= uint64(len(r.data)):
			r.next, r.message = size, kind == kindMessage
			return r.data[o+recHeader+skip : o+recHeader+skip+n], true, nil
		}
		return nil, false, r.corrupt("the record at %#x has kind %d and length %d", h, kind, n)
	}
}

// Message reports whether the record Peek returned was pushed by
// PushMessage.
func (r *Ring) Message() bool { return r.message }

// Advance releases the record Peek returned, making its space free for
// producers.
func (r *Ring) Advance() {
	r.setHead(r.own.Load() + r.next) // the consumer alone writes the head
	r.next = 0
}

// Empty reports whether the ring holds no committed record at its head.
// Any goroutine of the consumer's process may call it.
func (r *Ring) Empty() bool {
	w, full := r.HeadWord()
	return w.Load() != full
}

// HeadWord returns the word at the ring's head and the value it holds
// once a record is committed there: Empty in one load, until the head
// moves. Any goroutine of the consumer's process may call it.
func (r *Ring) HeadWord() (w *atomic.Uint64, full uint64) {
	h := r.own.Load()
	return word(r.data, int(h&r.mask)), h + 1
}

// Ends returns the consumer's head and the tail: they differ while a
// producer has reserved room past the head, a record committed there or
// on its way. A consumer that marks itself asleep (SetSleeping) and then
// finds them equal misses no record: each producer's reservation, a
// compare-and-swap of the tail, comes after the mark in the order of
// atomic operations, and the producer reads the mark (Sleeping) after
// it and after its commit. A consumer that finds them apart and the ring
// Empty waits for a commit on its way, whose producer may have read the
// mark before it was set. Any goroutine of the consumer's process may
// call it.
func (r *Ring) Ends() (head, tail uint64) { return r.own.Load(), r.tail.Load() }

// Check compares the ring's header with what its consumer knows, and
// makes the ring corrupt (returning ErrCorrupt, as Peek does from then on)
// when they differ: the magic word and the capacity as Format wrote them,
// the shared head as the consumer stored it, a tail that is a multiple of
// 64 within the capacity of the head, and the marks of SetSleeping and
// SetReady, 0 or 1. The counters (Notes, Detours) are only ever compared
// for a change, which any value they hold makes harmless. Only the
// consumer calls it; it loads a few words, among them the tail's, which
// producers write: the consumer calls it now and then (before it blocks,
// when it finds the ring empty), not for each record.
func (r *Ring) Check() error {
	if f := r.fault.Load(); f != nil {
		return f
	}
	h, c := r.own.Load(), uint64(len(r.data))
	switch m, capw, sh, t := r.magic.Load(), r.cap.Load(), r.head.Load(), r.tail.Load(); {
	case m != magic:
		return r.corrupt("the magic word is %#x", m)
	case capw != c:
		return r.corrupt("the capacity word is %#x, not %#x", capw, c)
	case sh != h:
		return r.corrupt("the head is %#x, not %#x", sh, h)
	case t%align != 0 || t-h > c:
		return r.corrupt("the tail is %#x, with the head at %#x", t, h)
	}
	if s, ready := r.sleep.Load(), r.ready.Load(); s > 1 || ready > 1 {
		return r.corrupt("the sleep mark is %#x and the ready mark %#x", s, ready)
	}
	return nil
}

// SetSleeping records whether the consumer is about to block (or blocks)
// in the kernel, so that a producer wakes it after a Push (Sleeping).
func (r *Ring) SetSleeping(on bool) {
	var v uint32
	if on {
		v = 1
	}
	r.sleep.Store(v)
}

// Sleeping reports whether the consumer asked to be woken.
func (r *Ring) Sleeping() bool { return r.sleep.Load() != 0 }

// Note counts one change, in memory the consumer may be waiting on, that
// is not a record (Notes), and reports whether the consumer asked to be
// woken (Sleeping): a consumer that marks itself asleep and then finds
// Notes unchanged cannot miss a Note that the caller made after its change.
func (r *Ring) Note() bool {
	r.notes.Add(1)
	return r.Sleeping()
}

// Notes returns the count of Note calls so far.
func (r *Ring) Notes() uint64 { return r.notes.Load() }

// Detour counts one record that a producer sent to the consumer another
// way (the ring was full), after it did, so that a consumer that sees
// Detours grow knows to look there; it reports whether the consumer asked
// to be woken (Sleeping).
func (r *Ring) Detour() bool {
	r.detours.Add(1)
	return r.Sleeping()
}

// Detours returns the count of Detour calls so far. It shares a cache
// line with Notes and Sleeping.
func (r *Ring) Detours() uint64 { return r.detours.Load() }

// Area returns the AreaSize bytes of the header that the ring leaves to
// its users, zero when Format made it, 8-aligned: words that the ranks
// sharing the ring read and write with sync/atomic.
func (r *Ring) Area() []byte { return r.area }

// SetReady records, once, that the consumer takes records of its users'
// choosing (amudp's direct messages) besides datagrams: its owner knows
// every producer that may send them and can answer each.
func (r *Ring) SetReady() { r.ready.Store(1) }

// Ready reports whether SetReady was called.
func (r *Ring) Ready() bool { return r.ready.Load() != 0 }
