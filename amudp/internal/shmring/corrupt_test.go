package shmring

// The ring against a peer that writes garbage into its region.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime/debug"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// guarded returns a region of Size(capacity) bytes, zero, followed by a
// page that may be neither read nor written: a view that touches a byte
// past the region faults, and the fault panics (debug.SetPanicOnFault)
// and fails the test, as it crashes a process whose mapping ends there.
func guarded(t testing.TB, capacity int) []byte {
	t.Helper()
	n, page := Size(capacity), unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, n+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mprotect(m[n:], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(m) })
	debug.SetPanicOnFault(true)
	return m[:n:n]
}

// TestCorrupt: a record whose length, kind or pad breaks the rules makes
// Peek report ErrCorrupt, and the ring stays corrupt for its consumer:
// Peek says so again, Push refuses.
func TestCorrupt(t *testing.T) {
	for _, c := range []struct {
		name string
		n    uint32
		kind uint32
	}{{"too long", 1 << 30, kindData}, {"over MaxRecord", uint32(MaxRecord(MinCapacity) + 1), kindData},
		{"unknown kind", 8, 9}, {"pad not to the end", 16, kindPad}} {
		r, _ := newRing(t, MinCapacity)
		r.Push([]byte("x"), nil)
		binary.LittleEndian.PutUint32(r.data[8:], c.n)
		binary.LittleEndian.PutUint32(r.data[12:], c.kind)
		if _, ok, err := r.Peek(); ok || !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Peek = %v, %v; want ErrCorrupt", c.name, ok, err)
		}
		if _, ok, err := r.Peek(); ok || !errors.Is(err, ErrCorrupt) || r.Push([]byte("after"), nil) || !errors.Is(r.Err(), ErrCorrupt) {
			t.Errorf("%s: Peek = %v, %v after a corrupt record, or Push took a record", c.name, ok, err)
		}
	}
}

// TestCorruptHeader: garbage in each word of the header and each field of
// a record is found, by the consumer (Peek, or Check, which it calls now
// and then) or by a producer (Push, whose view was opened before, as a
// peer maps an inbox once), and never makes either panic: Push returns
// false and the view keeps ErrCorrupt (Err); Peek and Check return it. A
// commit word that no longer names its record only holds it back. A
// view opened afterwards refuses a header whose magic word, capacity, or
// head or tail's alignment is broken.
func TestCorruptHeader(t *testing.T) {
	const c = MinCapacity
	put := func(off int, v uint64) func(mem []byte) {
		return func(mem []byte) { binary.LittleEndian.PutUint64(mem[off:], v) }
	}
	rec := func(off int, v uint32) func(mem []byte) {
		return func(mem []byte) { binary.LittleEndian.PutUint32(mem[HeaderSize+off:], v) }
	}
	const tail = 128 // after the two records each case pushes
	for _, tc := range []struct {
		name   string
		spoil  func(mem []byte)
		pusher bool // a producer finds it (Push refuses, Err is set)
		peek   bool // Peek finds it
		check  bool // Check finds it
		open   bool // Open refuses the region afterwards
	}{
		{"magic", put(offMagic, 0xffffffffffffffff), false, false, true, true},
		{"capacity", put(offCap, 1<<40), false, false, true, true},
		{"capacity smaller", put(offCap, c/2), false, false, true, true},
		{"tail misaligned", put(offTail, tail+7), true, false, true, true},
		{"tail 1 byte before the end, room before it", func(mem []byte) { put(offHead, c+64)(mem); put(offTail, 2*c-1)(mem) }, true, false, true, true},
		{"tail all ones", put(offTail, 0xffffffffffffffff), true, false, true, true},
		{"tail beyond head+cap", put(offTail, c+64), true, false, true, false},
		{"tail huge, aligned", put(offTail, 0xffffffffffffffc0), true, false, true, false},
		{"head misaligned", put(offHead, 8), true, false, true, true},
		{"head beyond tail", put(offHead, tail+4*c), true, false, true, false},
		{"head all ones", put(offHead, 0xffffffffffffffff), true, false, true, true},
		{"sleep mark", func(mem []byte) { binary.LittleEndian.PutUint32(mem[offSleep:], 0xffffffff) }, false, false, true, false},
		{"ready mark", put(offReady, 0xffffffffffffffff), false, false, true, false},
		{"record length huge", rec(8, 0xffffffff), false, true, false, false},
		{"record length over MaxRecord", rec(8, uint32(MaxRecord(c)+1)), false, true, false, false},
		{"record kind", rec(12, 0xffffffff), false, true, false, false},
		{"pad to the wrong place", func(mem []byte) { rec(8, 0)(mem); rec(12, kindPad)(mem) }, false, true, false, false},
		{"commit word", rec(0, 0xffffffff), false, false, false, false},
		{"whole header 0xff", func(mem []byte) {
			for i := range HeaderSize {
				mem[i] = 0xff
			}
		}, true, false, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := guarded(t, c)
			r, err := Format(mem)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Open(mem)
			if err != nil {
				t.Fatal(err)
			}
			if !p.Push([]byte("first"), nil) || !p.Push([]byte("second"), nil) {
				t.Fatal("push")
			}
			tc.spoil(mem)
			// The producer pushes until refused: a full ring makes it
			// read the head.
			for i := 0; i < c/64 && p.Push(make([]byte, 40), nil); i++ {
			}
			if got := p.Err() != nil; got != tc.pusher {
				t.Errorf("producer found it: %v (%v), want %v", got, p.Err(), tc.pusher)
			}
			if tc.pusher && p.Push([]byte("x"), nil) {
				t.Error("Push took a record after it found the ring corrupt")
			}
			_, ok, err := r.Peek()
			if got := errors.Is(err, ErrCorrupt); got != tc.peek {
				t.Errorf("Peek = %v, %v; want ErrCorrupt: %v", ok, err, tc.peek)
			}
			if tc.name == "commit word" && (ok || err != nil) {
				t.Errorf("Peek of a record whose commit word is garbage: %v, %v; want none", ok, err)
			}
			if got := errors.Is(r.Check(), ErrCorrupt); got != tc.check && !tc.peek {
				t.Errorf("Check = %v, want ErrCorrupt: %v", r.Check(), tc.check)
			}
			if tc.peek || tc.check {
				if _, ok, err := r.Peek(); ok || !errors.Is(err, ErrCorrupt) {
					t.Errorf("Peek after the consumer found it: %v, %v", ok, err)
				}
			}
			if _, err := Open(mem); (err != nil) != tc.open {
				t.Errorf("Open after: %v, want an error: %v", err, tc.open)
			}
		})
	}
}

// FuzzPeek: whatever a peer writes into the region, Peek returns records
// of at most MaxRecord bytes (slices of the region) and never panics.
func FuzzPeek(f *testing.F) {
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0, 0}, uint64(0), uint64(64))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x0f, 0, 0, 2, 0, 0, 0}, uint64(0), uint64(4096))
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0xf0, 0x03, 0, 0, 3, 63, 0, 0}, uint64(0), uint64(4096)) // a skip (push)
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0, 1, 0xff, 0xff, 0xff}, uint64(64), uint64(4096))
	f.Fuzz(func(t *testing.T, junk []byte, head, tail uint64) {
		r, _ := Format(guarded(t, MinCapacity))
		head &^= align - 1 // the consumer's own head is always aligned
		r.own.Store(head)
		r.head.Store(head)
		r.tail.Store(tail)
		o := int(head & r.mask)
		copy(r.data[o:], junk)
		if len(junk) >= 8 {
			word(r.data, o).Store(head + 1)
		}
		for range 4 {
			rec, ok, _ := r.Peek()
			if !ok {
				break
			}
			if len(rec) > MaxRecord(MinCapacity) {
				t.Fatalf("Peek returned a record of %d bytes, over MaxRecord", len(rec))
			}
			r.Advance()
		}
	})
}

// FuzzRing: whatever a peer writes over the header (its first 256 bytes:
// magic, capacity, tail, head, sleep and ready marks, counters) and into
// the data area, a producer's and the consumer's calls, in the fuzzed
// order, never panic, read or write outside the region (a page after it
// faults; the area of the header is never written), and return
// records of at most MaxRecord bytes within the data area.
func FuzzRing(f *testing.F) {
	ones := bytes.Repeat([]byte{0xff}, 256)
	f.Add(ones, []byte{}, []byte{0, 1, 2, 3, 4})
	hdr := make([]byte, 256)
	binary.LittleEndian.PutUint64(hdr[offMagic:], magic)
	binary.LittleEndian.PutUint64(hdr[offCap:], MinCapacity)
	binary.LittleEndian.PutUint64(hdr[offTail:], 71)
	f.Add(bytes.Clone(hdr), []byte{1, 0, 0, 0, 0, 0, 0, 0, 40, 0, 0, 0, 3, 0, 0, 0}, []byte{0, 0, 1, 2, 0, 3})
	binary.LittleEndian.PutUint64(hdr[offTail:], 2*MinCapacity-1) // room before it, 1 byte before the end
	binary.LittleEndian.PutUint64(hdr[offHead:], MinCapacity+64)
	f.Add(bytes.Clone(hdr), []byte{}, []byte{0})
	binary.LittleEndian.PutUint64(hdr[offTail:], 1<<63)
	binary.LittleEndian.PutUint64(hdr[offHead:], 1<<63-64)
	f.Add(bytes.Clone(hdr), []byte{}, []byte{0, 0, 0, 0, 0, 0, 0, 1, 4})
	f.Fuzz(func(t *testing.T, header, junk, ops []byte) {
		const c = MinCapacity
		mem := guarded(t, c)
		r, err := Format(mem)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := Open(mem)
		p.Push([]byte("before"), nil)
		copy(mem[:min(len(header), offArea)], header)
		if len(junk) > 0 {
			copy(r.data[int(binary.LittleEndian.Uint16(append(junk, 0)))%c:], junk)
		}
		area := bytes.Clone(r.Area())
		lo, hi := uintptr(unsafe.Pointer(&r.data[0])), uintptr(unsafe.Pointer(&r.data[0]))+c
		for i, op := range ops {
			switch op % 6 {
			case 0, 1:
				p.Push(make([]byte, int(op)*7), make([]byte, i%50))
			case 2:
				rec, ok, _ := r.Peek()
				if ok {
					at := uintptr(unsafe.Pointer(unsafe.SliceData(rec)))
					if len(rec) > MaxRecord(c) || at < lo || at+uintptr(len(rec)) > hi {
						t.Fatalf("Peek returned %d bytes at %#x, outside the data area [%#x, %#x)", len(rec), at, lo, hi)
					}
					r.Advance()
				}
			case 3:
				r.Check()
			case 4:
				r.Empty()
				if q, err := Open(mem); err == nil {
					q.PushMessage([]byte{op}, nil)
				}
			case 5:
				r.Note()
				r.Detour()
				r.SetSleeping(op&8 != 0)
			}
		}
		if !bytes.Equal(area, r.Area()) {
			t.Fatal("the area was written")
		}
	})
}
