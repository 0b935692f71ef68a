package shmring

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"testing/quick"
	"time"
	"unsafe"
)

func newRing(t testing.TB, capacity int) (*Ring, []byte) {
	t.Helper()
	mem := make([]byte, Size(capacity))
	r, err := Format(mem)
	if err != nil {
		t.Fatal(err)
	}
	return r, mem
}

// pop takes one record, copied, or nil when there is none.
func pop(t testing.TB, r *Ring) []byte {
	t.Helper()
	rec, ok, err := r.Peek()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		return nil
	}
	out := bytes.Clone(rec)
	r.Advance()
	return out
}

// TestModel: random pushes and pops of random sizes agree with a FIFO
// model: every record pushed comes out once, in order, byte for byte; a
// push is refused only when the room the model holds (each record's
// reservation, its pad included) leaves none; a push that rewinds (a
// large record sent back to the start of the area, rewindFrom) leaves a
// quarter of the area free; the ring wraps many times.
func TestModel(t *testing.T) {
	type entry struct {
		rec      []byte
		reserved int // the record's room and the pad before it
	}
	rewinds := 0
	check := func(seed uint64, capShift uint8) bool {
		capacity := MinCapacity << (capShift % 4)
		rng := rand.New(rand.NewPCG(seed, 7))
		r, _ := newRing(t, capacity)
		var model []entry
		inFlight := 0 // bytes reserved, pads included
		pushed, rewound := 0, 0
		for step := 0; step < 3000; step++ {
			if rng.IntN(3) > 0 {
				n := rng.IntN(MaxRecord(capacity) + 1)
				rec := make([]byte, n)
				for i := range rec {
					rec[i] = byte(rng.Uint32())
				}
				k := rng.IntN(n + 1)
				before := r.tail.Load()
				ok := r.Push(rec[:k], rec[k:])
				need := (recHeader + n + align - 1) &^ (align - 1)
				if !ok && inFlight+need <= capacity-MaxRecord(capacity)-recHeader-align {
					// Padding to the end wastes at most one record's room.
					t.Logf("seed %d: push of %d refused with %d of %d in flight", seed, n, inFlight, capacity)
					return false
				}
				if !ok {
					continue
				}
				reserved := int(r.tail.Load() - before)
				if off := int(before) & (capacity - 1); reserved > RecordSize(n) && off+RecordSize(n) <= capacity {
					rewound++
					if free := capacity - inFlight - reserved; n < rewindFrom || free < capacity/4 {
						t.Logf("seed %d: a push of %d rewound from %d, leaving %d of %d free", seed, n, off, free, capacity)
						return false
					}
				}
				model = append(model, entry{rec, reserved})
				inFlight += reserved
				pushed++
				continue
			}
			got := pop(t, r)
			if len(model) == 0 {
				if got != nil {
					return false
				}
				continue
			}
			if !bytes.Equal(got, model[0].rec) {
				t.Logf("seed %d: popped %d bytes, want %d", seed, len(got), len(model[0].rec))
				return false
			}
			inFlight -= model[0].reserved
			model = model[1:]
		}
		for _, want := range model {
			if got := pop(t, r); !bytes.Equal(got, want.rec) {
				return false
			}
		}
		rewinds += rewound
		return pop(t, r) == nil && r.Empty() && pushed*MinCapacity/4 > capacity
	}
	if err := quick.Check(check, &quick.Config{MaxCount: 40}); err != nil {
		t.Error(err)
	}
	if rewinds == 0 {
		t.Error("no push rewound: the model checked none")
	}
}

// TestRewind: a flood of records from rewindFrom bytes, whose consumer
// keeps lag records in flight, goes back to the start of a large area
// once a quarter of it stays free, and so stays within its first quarter
// and a few records; smaller records, or a consumer that lets the ring
// fill, walk all of it; after a rewind, a record of MaxRecord bytes still
// fits.
func TestRewind(t *testing.T) {
	const capacity = 1 << 22
	tests := []struct {
		size, lag, pushes int
		within            int // the farthest a record may start
	}{
		{65000, 0, 500, capacity/4 + 2*RecordSize(65000)},
		{65000, 3, 500, capacity/4 + 5*RecordSize(65000)},
		{rewindFrom, 1, 5000, capacity/4 + 3*RecordSize(rewindFrom)},
		{rewindFrom - 1, 1, 5000, capacity}, // below rewindFrom
		{65000, 60, 500, capacity},          // fills the ring
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/lag%d", tt.size, tt.lag), func(t *testing.T) {
			r, mem := newRing(t, capacity)
			data := uintptr(unsafe.Pointer(&mem[HeaderSize]))
			var inFlight [][]byte
			far := 0
			for i := range tt.pushes {
				rec := make([]byte, tt.size)
				binary.LittleEndian.PutUint64(rec, uint64(i))
				if !r.Push(rec[:8], rec[8:]) {
					// A full ring: the consumer takes one.
					if len(inFlight) < tt.lag {
						t.Fatalf("push %d refused with %d in flight", i, len(inFlight))
					}
				} else {
					inFlight = append(inFlight, rec)
				}
				for len(inFlight) > tt.lag {
					got, ok, err := r.Peek()
					if !ok || err != nil || !bytes.Equal(got, inFlight[0]) {
						t.Fatalf("push %d: got %d bytes, ok %v, err %v", i, len(got), ok, err)
					}
					far = max(far, int(uintptr(unsafe.Pointer(&got[0]))-data))
					r.Advance()
					inFlight = inFlight[1:]
				}
				if free := capacity - int(r.tail.Load()-r.own.Load()); free < capacity/4 && tt.within < capacity {
					t.Fatalf("push %d left %d of %d free", i, free, capacity)
				}
			}
			if far > tt.within {
				t.Errorf("a record started at offset %d, past %d", far, tt.within)
			}
			if tt.within == capacity && far < capacity/2 {
				t.Errorf("the records went no farther than %d of %d", far, capacity)
			}
		})
	}
}

// TestHotSpan: records pushed one at a time, each popped before the next
// and the ring then polled empty, stay within the first hotSpan bytes of a large ring (and the page
// faults and cache misses of the rest are never paid); a ring that fills
// uses all of its capacity.
func TestHotSpan(t *testing.T) {
	const capacity = 1 << 20
	r, mem := newRing(t, capacity)
	data := uintptr(unsafe.Pointer(&mem[HeaderSize]))
	rng := rand.New(rand.NewPCG(1, 2))
	far := 0
	for i := range 20000 {
		rec := make([]byte, 1+rng.IntN(300))
		rec[0] = byte(i)
		if !r.Push(rec, nil) {
			t.Fatalf("push %d into an empty ring refused", i)
		}
		got, ok, err := r.Peek()
		if !ok || err != nil || !bytes.Equal(got, rec) {
			t.Fatalf("record %d: got %d bytes, ok %v, err %v", i, len(got), ok, err)
		}
		off := int(uintptr(unsafe.Pointer(&got[0])) - data)
		far = max(far, off)
		r.Advance()
		if _, ok, _ := r.Peek(); ok { // the consumer polls an empty ring
			t.Fatal("a record too many")
		}
	}
	if far >= hotSpan+RecordSize(300) {
		t.Errorf("a record one at a time went to offset %d, past %d", far, hotSpan)
	}
	pushed := 0
	for r.Push(make([]byte, 1000), nil) {
		pushed += RecordSize(1000)
	}
	if pushed < capacity-hotSpan-RecordSize(1000) {
		t.Errorf("a flood took %d bytes of a ring of %d", pushed, capacity)
	}
	for i := 0; i < pushed/RecordSize(1000); i++ {
		if got := pop(t, r); len(got) != 1000 {
			t.Fatalf("flood record %d: %d bytes", i, len(got))
		}
	}
	if pop(t, r) != nil {
		t.Error("a record too many")
	}
}

// TestSkip: a record's large second part lands at the same offset in a
// cache line as its source, whatever the source's and the first part's
// offsets, byte for byte; a small one right after the first part; a kind
// word whose skip is a cache line or more is corrupt.
func TestSkip(t *testing.T) {
	r, mem := newRing(t, 1<<20)
	src := make([]byte, skipFrom+200)
	for i := range src {
		src[i] = byte(i * 7)
	}
	for _, la := range []int{0, 1, 52, 64} {
		for k := range 64 {
			a, b := src[100:100+la], src[k:k+skipFrom+k%3]
			if !r.Push(a, b) {
				t.Fatalf("push of %d+%d bytes refused", la, len(b))
			}
			rec, ok, err := r.Peek()
			if !ok || err != nil || !bytes.Equal(rec, append(append([]byte{}, a...), b...)) {
				t.Fatalf("first part %d, source offset %d: got %d bytes, ok %v, err %v", la, k, len(rec), ok, err)
			}
			if d := (uintptr(unsafe.Pointer(&rec[la])) - uintptr(unsafe.Pointer(&b[0]))) % align; d != 0 {
				t.Errorf("first part %d, source offset %d: second part %d bytes off its source's line offset", la, k, d)
			}
			r.Advance()
		}
	}
	small := src[3:103]
	if !r.Push(src[:52], small) {
		t.Fatal("push refused")
	}
	rec, _, _ := r.Peek()
	if o := uintptr(unsafe.Pointer(&rec[0])) - uintptr(unsafe.Pointer(&mem[HeaderSize])); o%align != recHeader {
		t.Errorf("a record with a small second part starts %d into its line, want %d", o%align, recHeader)
	}
	r.Advance()
	if !r.Push(nil, src) {
		t.Fatal("push refused")
	}
	h := r.own.Load() & r.mask
	binary.LittleEndian.PutUint32(mem[HeaderSize+int(h)+12:], kindData|align<<8)
	if _, _, err := r.Peek(); err == nil {
		t.Error("a record skipping a whole cache line was taken")
	}
}

// TestProducers: several goroutines push numbered records at once, each
// retrying when the ring is full; the consumer sees every record exactly
// once and each producer's records in order: in a small ring that fills,
// and in one whose consumer moves both ends back to the start whenever it
// finds it empty (hotSpan).
func TestProducers(t *testing.T) {
	for _, capacity := range []int{MinCapacity, 4 * hotSpan} {
		t.Run(strconv.Itoa(capacity), func(t *testing.T) { testProducers(t, capacity, 0, 20000) })
	}
	// Records large enough to rewind (rewindFrom), from four producers:
	// every one once, in each producer's order.
	t.Run("large", func(t *testing.T) { testProducers(t, 16*hotSpan, rewindFrom, 2000) })
}

// testProducers: producers push each records of base bytes and up to 39
// more into a ring of capacity bytes; the consumer takes every record of
// each producer once, in its order.
func testProducers(t *testing.T, capacity, base, each int) {
	const producers = 4
	r, _ := newRing(t, capacity)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var hdr [12]byte
			body := make([]byte, base+40)
			for i := range each {
				binary.LittleEndian.PutUint32(hdr[0:], uint32(p))
				binary.LittleEndian.PutUint64(hdr[4:], uint64(i))
				for !r.Push(hdr[:], body[:base+i%40]) {
				}
			}
		}()
	}
	next := make([]uint64, producers)
	for got := 0; got < producers*each; {
		rec, ok, err := r.Peek()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		p, i := binary.LittleEndian.Uint32(rec), binary.LittleEndian.Uint64(rec[4:])
		if int(p) >= producers || i != next[p] || len(rec) != 12+base+int(i)%40 {
			t.Fatalf("record %d of producer %d (%d bytes), want %d", i, p, len(rec), next[p])
		}
		next[p]++
		r.Advance()
		got++
	}
	wg.Wait()
	if !r.Empty() {
		t.Error("records left after all were taken")
	}
}

// TestTooLong: a record longer than MaxRecord is refused, not truncated.
func TestTooLong(t *testing.T) {
	r, _ := newRing(t, MinCapacity)
	if r.Push(make([]byte, MaxRecord(MinCapacity)+1), nil) {
		t.Error("pushed a record longer than MaxRecord")
	}
	if !r.Push(make([]byte, MaxRecord(MinCapacity)), nil) {
		t.Error("refused a record of MaxRecord bytes in an empty ring")
	}
}

// TestOpen: a second view of the region sees the first one's records;
// a region without a ring, or of a bad size, is refused.
func TestOpen(t *testing.T) {
	r, mem := newRing(t, MinCapacity)
	r.Push([]byte("hello"), nil)
	r2, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	if got := pop(t, r2); string(got) != "hello" {
		t.Errorf("second view popped %q", got)
	}
	if _, err := Open(make([]byte, Size(MinCapacity))); err == nil {
		t.Error("opened a region without a ring")
	}
	if _, err := Format(make([]byte, Size(MinCapacity+16))); err == nil {
		t.Error("formatted a ring whose capacity is not a power of two")
	}
	binary.LittleEndian.PutUint64(mem[offCap:], 1<<40)
	if _, err := Open(mem); err == nil {
		t.Error("opened a ring whose capacity exceeds its region")
	}
}

// TestAreaAndNotes: Format zeroes the area, which lies after the ring's
// own words and before its records: what a user stores there, another
// view of the region (Open) sees, and records pushed and popped leave it
// as it was. Note counts, and reports whether the consumer sleeps.
func TestAreaAndNotes(t *testing.T) {
	mem := make([]byte, Size(MinCapacity))
	for i := range mem {
		mem[i] = 0xff
	}
	r, err := Format(mem)
	if err != nil {
		t.Fatal(err)
	}
	a := r.Area()
	if len(a) != AreaSize || !bytes.Equal(a, make([]byte, AreaSize)) {
		t.Fatalf("area of %d bytes after Format, not all zero", len(a))
	}
	for i := range a {
		a[i] = byte(i)
	}
	for i := range 3 * MinCapacity / 64 {
		if !r.Push([]byte{byte(i)}, make([]byte, 40)) {
			t.Fatalf("Push %d refused", i)
		}
		pop(t, r)
	}
	o, err := Open(mem)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range o.Area() {
		if b != byte(i) {
			t.Fatalf("area byte %d is %d after traffic, seen through Open; want %d", i, b, byte(i))
		}
	}
	if r.Notes() != 0 || o.Note() || r.Notes() != 1 {
		t.Errorf("notes %d after one Note; or Note says a consumer that never slept sleeps", r.Notes())
	}
	if r.Detours() != 0 || o.Detour() || r.Detours() != 1 || r.Notes() != 1 {
		t.Errorf("detours %d after one Detour (notes %d); or Detour says a consumer that never slept sleeps", r.Detours(), r.Notes())
	}
	r.SetSleeping(true)
	if !o.Note() || r.Notes() != 2 {
		t.Errorf("Note does not see the sleeping consumer, or does not count")
	}
	if !o.Detour() || r.Detours() != 2 {
		t.Errorf("Detour does not see the sleeping consumer, or does not count")
	}
}

// BenchmarkPingPong: two goroutines bounce a 64-byte record through two
// rings, each spinning on its own: the floor under a round trip of
// amudp's shared-memory path (compare the C floor of scripts/shmbench).
func BenchmarkPingPong(b *testing.B) {
	ping, _ := newRing(b, MinCapacity*4)
	pong, _ := newRing(b, MinCapacity*4)
	rec := make([]byte, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			for pong.Empty() {
			}
			r, _, _ := pong.Peek()
			copy(rec, r)
			pong.Advance()
			for !ping.Push(rec, nil) {
			}
		}
	}()
	b.ResetTimer()
	for range b.N {
		for !pong.Push(rec, nil) {
		}
		for ping.Empty() {
		}
		r, _, _ := ping.Peek()
		copy(rec, r)
		ping.Advance()
	}
	<-done
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "µs/rtt")
}

// BenchmarkFlood: one goroutine pushes 65000-byte records (a Medium's
// header and payload) into a 4 MiB ring as fast as another, spinning on
// it, takes them: amudp's shared-memory Medium flood without the rest of
// the endpoint. It reports each push's time as a multiple of the same
// pushes, each taken at once by the pushing goroutine, measured first
// (x-alone): the cost of the consumer on another core, cache lines
// moving between the two.
func BenchmarkFlood(b *testing.B) {
	r, _ := newRing(b, 4<<20)
	head, payload := make([]byte, 36), make([]byte, 65000)
	take := func() {
		for {
			_, ok, err := r.Peek()
			if err != nil {
				panic(err) // on the consumer's goroutine, where b.Fatal may not be called
			}
			if ok {
				break
			}
		}
		r.Advance()
	}
	start := time.Now()
	for range b.N {
		if !r.PushMessage(head, payload) {
			b.Fatal("an empty ring refused a record")
		}
		take()
	}
	alone := time.Since(start)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range b.N {
			take()
		}
	}()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	for range b.N {
		for !r.PushMessage(head, payload) {
		}
	}
	<-done
	b.ReportMetric(float64(b.Elapsed())/float64(alone), "x-alone")
}

// TestMessageRecords: Peek tells a record that PushMessage wrote from one
// that Push wrote, in the order they were pushed, and a record of up to 48
// bytes takes one cache line.
func TestMessageRecords(t *testing.T) {
	r, err := Format(make([]byte, Size(MinCapacity)))
	if err != nil {
		t.Fatal(err)
	}
	pushes := []struct {
		message bool
		rec     string
	}{{true, "m1"}, {false, "d1"}, {false, "d2"}, {true, "m2"}}
	for _, p := range pushes {
		push := r.Push
		if p.message {
			push = r.PushMessage
		}
		if !push([]byte(p.rec), nil) {
			t.Fatal("push")
		}
	}
	for _, p := range pushes {
		rec, ok, err := r.Peek()
		if !ok || err != nil || string(rec) != p.rec || r.Message() != p.message {
			t.Fatalf("Peek: %q %v %v, message %v; want %q, message %v", rec, ok, err, r.Message(), p.rec, p.message)
		}
		r.Advance()
	}
	if RecordSize(48) != 64 || RecordSize(49) != 128 {
		t.Errorf("RecordSize(48) = %d, RecordSize(49) = %d: want one and two cache lines", RecordSize(48), RecordSize(49))
	}
}

// BenchmarkPushPeek: one goroutine pushes a 64-byte record (two cache
// lines with its header) and takes it back: the ring's own work per
// message, on one core, without the wait between two.
func BenchmarkPushPeek(b *testing.B) {
	r, _ := newRing(b, MinCapacity*4)
	rec := make([]byte, 64)
	b.ReportAllocs()
	for b.Loop() {
		if !r.Push(rec, nil) {
			b.Fatal("push refused")
		}
		got, ok, _ := r.Peek()
		if !ok {
			b.Fatal("no record")
		}
		rec[0] += got[0]
		r.Advance()
		r.Empty()
	}
}

// TestEnds: the consumer's head and the tail are apart only while a
// producer has reserved room past the head. A reservation not yet
// committed, as a producer leaves it between its compare-and-swap of the
// tail and its commit, sets them apart with the ring Empty; committed,
// the record keeps them apart until the consumer advances past it.
func TestEnds(t *testing.T) {
	r, _ := newRing(t, MinCapacity)
	idle := func() bool { h, t := r.Ends(); return h == t }
	if !idle() || !r.Empty() {
		t.Fatalf("a new ring: ends apart %v, empty %v", !idle(), r.Empty())
	}
	h := r.tail.Add(align) - align // a producer's reservation of one line
	if idle() || !r.Empty() {
		t.Errorf("a reservation on its way: ends apart %v, empty %v; want apart and no record", !idle(), r.Empty())
	}
	r.commit(h, kindData, 8)
	if idle() || r.Empty() {
		t.Errorf("a committed record: ends apart %v, empty %v", !idle(), r.Empty())
	}
	if rec := pop(t, r); len(rec) != 8 {
		t.Errorf("the record: %d bytes, want 8", len(rec))
	}
	if !idle() || !r.Empty() {
		t.Errorf("after the consumer took it: ends apart %v, empty %v", !idle(), r.Empty())
	}
	if !r.Push([]byte("x"), nil) || idle() {
		t.Errorf("a record pushed: ends apart %v", !idle())
	}
}
