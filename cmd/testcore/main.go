// Command testcore checks the AM core end to end: every rank sends a random
// mix of short, medium and long requests, from several goroutines, to
// random peers (itself included), with checksummed arguments and payloads.
// Receivers record every message they run and check its checksum; about
// half of the requests get an explicit reply carrying a checksum back, the
// rest the automatic one. At the end the ranks compare what was sent with
// what was run. Then each rank puts a pattern into its own region of every
// rank's segment, reads back with Get what it put, and stores a second
// pattern through LocalView into the segments of the ranks that share
// memory with it (conduit.Neighbors); after a barrier every rank checks its
// segment. Last, every rank adds to a 64-bit counter and a float64 sum in
// every rank's segment with remote atomics (processor atomics on the
// mappings of the ranks sharing memory), and each rank checks that its
// words end at the exact totals. Between those, every rank writes a
// strided column into the next rank's segment and reads it back with an
// indexed Get, and the ranks split into odd and even teams (in reverse
// order) that all-reduce and exchange blocks all-to-all. The job exits 0
// only if every request and reply ran exactly
// once with intact data and every byte put or stored arrived (DESIGN.md
// §11).
//
//	./testcore N [-msgs K] [-threads T] [-seed S]
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/cmd/internal/cli"
	"github.com/udpconduit/udpconduit/conduit"
)

const (
	hShort  = 140
	hMedium = 141
	hLong   = 142
	hReply  = 143
	// Every sending goroutine owns a region of each receiver's segment for
	// its Long requests, so concurrent senders never write the same bytes.
	region = conduit.MaxLong
)

// Argument layout of every request: [0] sender, [1] message index, [2]
// reply wanted (0/1), [3] payload length, [4] payload CRC, [5..n-2] random
// words, [n-1] CRC of args[0..n-2].
const (
	aSrc, aIdx, aWant, aLen, aCRC, aFixed = 0, 1, 2, 3, 4, 5
)

var (
	mu       sync.Mutex
	seen     [][]uint8 // [src][idx]: times request idx from src ran
	replied  []uint8   // [idx]: times the reply to our request idx ran
	expected []bool    // [idx]: whether request idx asked for an explicit reply
	errs     []string
	ran      atomic.Uint64 // replies run, to wait on

	// A Long request's bytes in the receiver's segment are the message's
	// until its handler has run: to a rank sharing memory, they are
	// written when the request is sent (GASNet's rule; a later Long to the
	// same bytes would overwrite them). So every Long asks for a reply,
	// and a goroutine sends its next Long to a rank once that came:
	// longBusy[g*n+dest] is set while goroutine g has one in flight to
	// dest, longOf[idx] is g*n+dest+1 for a Long request idx.
	longBusy []atomic.Bool
	longOf   []atomic.Int32
)

func fail(format string, a ...any) {
	mu.Lock()
	if len(errs) < 20 {
		errs = append(errs, fmt.Sprintf(format, a...))
	}
	mu.Unlock()
}

func argsCRC(a []uint32) uint32 {
	var b [4 * conduit.MaxArgs]byte
	for i, v := range a {
		binary.LittleEndian.PutUint32(b[4*i:], v)
	}
	return crc32.ChecksumIEEE(b[:4*len(a)])
}

// request runs on the receiver for every kind.
func request(kind string) conduit.Handler {
	return func(t *conduit.Token, a []uint32, p []byte) {
		if len(a) < aFixed+1 || argsCRC(a[:len(a)-1]) != a[len(a)-1] {
			fail("%s request from %d: argument checksum mismatch: %v", kind, t.Source(), a)
			return
		}
		src, idx := int(a[aSrc]), int(a[aIdx])
		if src != t.Source() {
			fail("%s request claims sender %d but came from %d", kind, src, t.Source())
			return
		}
		if int(a[aLen]) != len(p) || crc32.ChecksumIEEE(p) != a[aCRC] {
			fail("%s request %d from %d: payload of %d bytes (want %d) fails its checksum", kind, idx, src, len(p), a[aLen])
		}
		mu.Lock()
		if idx >= len(seen[src]) {
			mu.Unlock()
			fail("%s request from %d: index %d out of range", kind, src, idx)
			return
		}
		seen[src][idx]++
		mu.Unlock()
		if a[aWant] == 1 {
			if err := t.ReplyShort(hReply, uint32(idx), a[aCRC], argsCRC([]uint32{uint32(idx), a[aCRC]})); err != nil {
				fail("reply to %d: %v", src, err)
			}
		}
	}
}

func reply(t *conduit.Token, a []uint32, _ []byte) {
	if len(a) != 3 || argsCRC(a[:2]) != a[2] {
		fail("reply from %d: argument checksum mismatch: %v", t.Source(), a)
		return
	}
	idx := int(a[0])
	mu.Lock()
	if idx >= len(replied) || !expected[idx] {
		mu.Unlock()
		fail("reply from %d for request %d, which asked for none", t.Source(), idx)
		return
	}
	replied[idx]++
	mu.Unlock()
	if l := longOf[idx].Load(); l > 0 {
		longBusy[l-1].Store(false)
	}
	ran.Add(1)
}

func main() {
	conduit.Usage = "[-msgs K] [-threads T] [-seed S]"
	conduit.Init()
	fs := flag.NewFlagSet("testcore", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	msgs := fs.Int("msgs", 2000, "requests each rank sends")
	threads := fs.Int("threads", 2, "goroutines sending on each rank")
	seed := fs.Uint64("seed", 1, "random seed (each rank and goroutine derives its own)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		usage("%v", err)
	}
	if *msgs < 1 || *threads < 1 {
		usage("-msgs %d -threads %d: accepted: positive counts", *msgs, *threads)
	}
	n, me := conduit.Size(), conduit.Rank()
	_, err := conduit.Attach([]conduit.HandlerEntry{
		{Index: hShort, Fn: request("short")},
		{Index: hMedium, Fn: request("medium")},
		{Index: hLong, Fn: request("long")},
		{Index: hReply, Fn: reply},
	}, n**threads*region+atomicWords)
	if err != nil {
		die("attach: %v", err)
	}
	seen = make([][]uint8, n)
	for i := range seen {
		seen[i] = make([]uint8, *msgs)
	}
	replied, expected = make([]uint8, *msgs), make([]bool, *msgs)
	longBusy, longOf = make([]atomic.Bool, *threads*n), make([]atomic.Int32, *msgs)
	sentTo := make([]uint32, n)
	var wantReplies atomic.Uint64
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}

	var next atomic.Int64 // message index, shared by this rank's goroutines
	var wg sync.WaitGroup
	for g := range *threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendRequests(g, me, n, *msgs, *threads, *seed, &next, sentTo, &wantReplies)
		}()
	}
	wg.Wait()
	if err := conduit.WaitUntil(func() bool { return ran.Load() >= wantReplies.Load() }); err != nil {
		die("waiting for replies: %v", err)
	}
	if err := conduit.Drain(); err != nil {
		die("draining: %v", err)
	}
	if err := conduit.Barrier(); err != nil { // every request of every rank has run
		die("barrier: %v", err)
	}

	checkRequests(n, me, sentTo)
	rmaPhase(n, me, *threads*region)
	visPhase(n, me, *threads*region)
	teamPhase(n, me)
	atomicPhase(n, me, uint64(n**threads*region))
	conduit.Finalize(verdict(n, me, *msgs, *threads))
}

// sendRequests is goroutine g's part of the requests this rank sends:
// each of random kind, destination, size and arguments, checksummed,
// counted in sentTo by destination and, when it asks for a reply, in
// wantReplies.
func sendRequests(g, me, n, msgs, threads int, seed uint64, next *atomic.Int64, sentTo []uint32, wantReplies *atomic.Uint64) {
	rng := rand.New(rand.NewPCG(seed, uint64(me)<<16|uint64(g)))
	payload := make([]byte, conduit.MaxMedium)
	for {
		idx := int(next.Add(1) - 1)
		if idx >= msgs {
			return
		}
		dest := rng.IntN(n)
		want := rng.IntN(2)
		args := make([]uint32, aFixed+rng.IntN(conduit.MaxArgs-aFixed))
		kind := rng.IntN(3)
		if kind == 2 {
			want = 1
			busy := &longBusy[g*n+dest]
			if err := conduit.WaitUntil(func() bool { return !busy.Load() }); err != nil {
				die("waiting for the reply to a long request: %v", err)
			}
			busy.Store(true)
			longOf[idx].Store(int32(g*n + dest + 1))
		}
		size := 0
		if kind > 0 {
			size = rng.IntN(conduit.MaxMedium + 1)
			if rng.IntN(2) == 0 {
				size = rng.IntN(513)
			}
			for i := range payload[:size] {
				payload[i] = byte(rng.Uint32())
			}
		}
		p, err := payload[:size], error(nil)
		args[aSrc], args[aIdx], args[aWant], args[aLen], args[aCRC] = uint32(me), uint32(idx), uint32(want), uint32(size), crc32.ChecksumIEEE(p)
		for i := aFixed; i < len(args); i++ {
			args[i] = rng.Uint32()
		}
		args = append(args, argsCRC(args))
		mu.Lock()
		sentTo[dest]++
		expected[idx] = want == 1
		mu.Unlock()
		if want == 1 {
			wantReplies.Add(1)
		}
		switch kind {
		case 0:
			err = conduit.RequestShort(dest, hShort, args...)
		case 1:
			err = conduit.RequestMedium(dest, hMedium, p, args...)
		default:
			off := uint64((me*threads+g)*region + rng.IntN(region-size+1))
			err = conduit.RequestLong(dest, hLong, p, off, args...)
		}
		if err != nil {
			fail("request %d to %d: %v", idx, dest, err)
		}
	}
}

// checkRequests compares what each rank sent to this one with what ran
// here, and the replies this rank asked for with those that ran.
func checkRequests(n, me int, sentTo []uint32) {
	mine := make([]byte, 4*n)
	for d, c := range sentTo {
		binary.LittleEndian.PutUint32(mine[4*d:], c)
	}
	parts, err := conduit.World().AllGather(mine)
	if err != nil {
		die("all-gather: %v", err)
	}
	mu.Lock()
	for src := range n {
		want := int(binary.LittleEndian.Uint32(parts[src][4*me:]))
		got, dups := 0, 0
		for _, c := range seen[src] {
			if c > 0 {
				got++
			}
			if c > 1 {
				dups++
			}
		}
		if got != want || dups > 0 {
			errs = append(errs, fmt.Sprintf("from rank %d: %d requests sent here, %d ran, %d ran more than once", src, want, got, dups))
		}
	}
	for idx, w := range expected {
		if w && replied[idx] != 1 {
			errs = append(errs, fmt.Sprintf("reply to request %d ran %d times, want once", idx, replied[idx]))
		}
	}
	mu.Unlock()
}

// verdict prints this rank's errors and, on rank 0, the job's verdict,
// and returns the job's code.
func verdict(n, me, msgs, threads int) int {
	mu.Lock()
	for _, e := range errs {
		fmt.Fprintf(os.Stderr, "testcore: rank %d: %s\n", me, e)
	}
	ok := byte(1)
	if len(errs) > 0 {
		ok = 0
	}
	mu.Unlock()
	verdicts, err := conduit.World().AllGather([]byte{ok})
	if err != nil {
		die("all-gather: %v", err)
	}
	bad := 0
	for _, v := range verdicts {
		if len(v) != 1 || v[0] != 1 {
			bad++
		}
	}
	if me == 0 {
		if bad == 0 {
			fmt.Printf("testcore: %d ranks × %d requests (%d goroutines each): every request and reply ran exactly once, every checksum matched\n", n, msgs, threads)
		} else {
			fmt.Printf("testcore: FAILED on %d of %d ranks\n", bad, n)
		}
	}
	if bad > 0 {
		return 1
	}
	return 0
}

func usage(format string, a ...any) {
	cli.BadArgs("testcore", "testcore N [-msgs K] [-threads T] [-seed S]", format, a...)
}

func die(format string, a ...any) { cli.Die("testcore", format, a...) }

// pattern is the bytes rank src writes into rank dst's segment in round
// (1: Put, 2: a store through LocalView).
func pattern(src, dst, round, size int) []byte {
	b := make([]byte, size)
	x := uint32(src*7919+dst*104729+round) | 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// rmaPhase checks Put, Get and LocalView: each rank owns bytes
// [me*own, (me+1)*own) of every segment.
func rmaPhase(n, me, own int) {
	check := func(what string, got, want []byte) {
		if string(got) != string(want) {
			mu.Lock()
			errs = append(errs, what)
			mu.Unlock()
		}
	}
	off := uint64(me * own)
	for d := range n {
		if err := conduit.Put(d, off, pattern(me, d, 1, own)); err != nil {
			fail("put to rank %d: %v", d, err)
		}
	}
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	seg := conduit.LocalView(me)
	for src := range n {
		check(fmt.Sprintf("the bytes rank %d put here differ", src), seg[src*own:(src+1)*own], pattern(src, me, 1, own))
	}
	back := make([]byte, own)
	for d := range n {
		if err := conduit.Get(d, off, back); err != nil {
			fail("get from rank %d: %v", d, err)
		}
		check(fmt.Sprintf("get from rank %d returned other bytes than put there", d), back, pattern(me, d, 1, own))
	}
	// Every rank has checked the Puts before any stores over them.
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	nbrs := conduit.Neighbors()
	for _, d := range nbrs {
		v := conduit.LocalView(d)
		if v == nil {
			check(fmt.Sprintf("rank %d shares memory with this one but has no local view", d), nil, []byte{1})
			continue
		}
		copy(v[off:], pattern(me, d, 2, own))
	}
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	for src := range n {
		round := 1
		if slices.Contains(conduit.Neighbors(), src) {
			round = 2
		}
		check(fmt.Sprintf("the bytes rank %d stored here (round %d) differ", src, round), seg[src*own:(src+1)*own], pattern(src, me, round, own))
	}
	if me == 0 {
		fmt.Printf("testcore: rank 0 shares its segment with ranks %v\n", nbrs)
	}
}

// visPieces bounds the pieces of visPhase's column.
const visPieces = 2000

// visPhase checks vector transfers: each rank writes a column of 8-byte
// pieces, every 24 bytes of its own region [me*own, (me+1)*own), into the
// next rank's segment with one strided Put, and reads it back from there
// in shuffled order with one indexed Get; after a barrier every rank
// checks the column the rank before wrote into its segment.
func visPhase(n, me, own int) {
	const size, stride = 8, 24
	count := min(own/stride, visPieces)
	to, from := (me+1)%n, (me+n-1)%n
	// Every rank has checked rmaPhase's bytes, which this overwrites.
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	col := conduit.Strided{Offset: uint64(me * own), Stride: stride, Count: count, Size: size}
	data := pattern(me, to, 3, count*size)
	if err := conduit.Default().PutStrided(to, col, data, size); err != nil {
		fail("strided put to rank %d: %v", to, err)
	}
	offs := make([]uint64, count)
	order := rand.New(rand.NewPCG(uint64(me), 3)).Perm(count)
	for i, k := range order {
		offs[i] = uint64(me*own + k*stride)
	}
	back := make([]byte, count*size)
	if err := conduit.Default().GetIndexed(to, offs, size, back); err != nil {
		fail("indexed get from rank %d: %v", to, err)
	}
	bad := func(what string) {
		mu.Lock()
		errs = append(errs, what)
		mu.Unlock()
	}
	for i, k := range order {
		if string(back[i*size:(i+1)*size]) != string(data[k*size:(k+1)*size]) {
			bad(fmt.Sprintf("indexed get of piece %d from rank %d returned other bytes than put there", k, to))
			break
		}
	}
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	seg, want := conduit.LocalView(me), pattern(from, me, 3, count*size)
	for k := range count {
		at := from*own + k*stride
		if string(seg[at:at+size]) != string(want[k*size:(k+1)*size]) {
			bad(fmt.Sprintf("piece %d of the column rank %d put here differs", k, from))
			break
		}
	}
}

// teamPhase checks teams: the ranks split into odd and even teams ranked
// in reverse; each team all-reduces its job ranks and exchanges 8-byte
// blocks all-to-all, and every rank checks what it got.
func teamPhase(n, me int) {
	tm, err := conduit.World().Split(me%2, -me)
	if err != nil {
		fail("split: %v", err)
	}
	bad := func(what string) {
		mu.Lock()
		errs = append(errs, what)
		mu.Unlock()
	}
	want := int64(0)
	for r := me % 2; r < n; r += 2 {
		want += int64(r)
	}
	sum, err := conduit.AllReduce(tm, conduit.Sum, []int64{int64(me)})
	if err != nil {
		fail("team all-reduce: %v", err)
	}
	if sum[0] != want {
		bad(fmt.Sprintf("team all-reduce gave %d, want %d", sum[0], want))
	}
	blocks := make([]byte, 8*tm.Size())
	for r := range tm.Size() {
		binary.LittleEndian.PutUint32(blocks[8*r:], uint32(me))
		binary.LittleEndian.PutUint32(blocks[8*r+4:], uint32(tm.JobRank(r)))
	}
	got, err := tm.Alltoall(blocks)
	if err != nil {
		fail("team all-to-all: %v", err)
	}
	for r := range tm.Size() {
		if binary.LittleEndian.Uint32(got[8*r:]) != uint32(tm.JobRank(r)) || binary.LittleEndian.Uint32(got[8*r+4:]) != uint32(me) {
			bad(fmt.Sprintf("team all-to-all: block %d is % x", r, got[8*r:8*r+8]))
			break
		}
	}
}

// atomicWords is the room at the end of the segment for atomicPhase's
// words: a uint64 counter and a float64 sum.
const atomicWords = 16

// atomicAdds is how many times each rank adds to each rank's words.
const atomicAdds = 50

// atomicPhase checks remote atomics: every rank adds 1 to the counter at
// base of every rank's segment atomicAdds times, fetching (the values it
// fetches from one rank only grow), and rank+0.5 to the float64 sum after
// it as often without fetching; after a barrier each rank's words hold
// n*atomicAdds and the exact sum (halves add exactly in a float64).
func atomicPhase(n, me int, base uint64) {
	counter, sum := conduit.NewAtomics[uint64](nil), conduit.NewAtomics[float64](nil)
	for d := range n {
		last := uint64(0)
		for i := range atomicAdds {
			old, err := counter.Fetch(d, base, conduit.AtomicAdd, 1, 0)
			if err != nil {
				fail("atomic add to rank %d: %v", d, err)
			}
			if i > 0 && old <= last {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("atomic add to rank %d fetched %d after %d", d, old, last))
				mu.Unlock()
			}
			last = old
			if err := sum.Apply(d, base+8, conduit.AtomicAdd, float64(me)+0.5, 0); err != nil {
				fail("atomic float add to rank %d: %v", d, err)
			}
		}
	}
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	got, err := counter.Fetch(me, base, conduit.AtomicGet, 0, 0)
	if err != nil {
		fail("atomic get: %v", err)
	}
	gotSum, err := sum.Fetch(me, base+8, conduit.AtomicGet, 0, 0)
	if err != nil {
		fail("atomic get: %v", err)
	}
	wantSum := float64(atomicAdds) * (float64(n*(n-1))/2 + 0.5*float64(n))
	if got != uint64(n*atomicAdds) || gotSum != wantSum {
		mu.Lock()
		errs = append(errs, fmt.Sprintf("atomics: the counter holds %d and the sum %g, want %d and %g", got, gotSum, n*atomicAdds, wantSum))
		mu.Unlock()
	}
}
