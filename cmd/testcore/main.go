// Command testcore checks the AM core end to end: every rank sends a random
// mix of short, medium and long requests, from several goroutines, to
// random peers (itself included), with checksummed arguments and payloads.
// Receivers record every message they run and check its checksum; about
// half of the requests get an explicit reply carrying a checksum back, the
// rest the automatic one. At the end the ranks compare what was sent with
// what was run: the job exits 0 only if every request and reply ran exactly
// once with intact data (DESIGN.md §11).
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
	}, n**threads*region)
	if err != nil {
		die("attach: %v", err)
	}
	seen = make([][]uint8, n)
	for i := range seen {
		seen[i] = make([]uint8, *msgs)
	}
	replied, expected = make([]uint8, *msgs), make([]bool, *msgs)
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
			rng := rand.New(rand.NewPCG(*seed, uint64(me)<<16|uint64(g)))
			payload := make([]byte, conduit.MaxMedium)
			for {
				idx := int(next.Add(1) - 1)
				if idx >= *msgs {
					return
				}
				dest := rng.IntN(n)
				want := rng.IntN(2)
				args := make([]uint32, aFixed+rng.IntN(conduit.MaxArgs-aFixed))
				kind := rng.IntN(3)
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
					off := uint64((me**threads+g)*region + rng.IntN(region-size+1))
					err = conduit.RequestLong(dest, hLong, p, off, args...)
				}
				if err != nil {
					fail("request %d to %d: %v", idx, dest, err)
				}
			}
		}()
	}
	wg.Wait()
	if err := conduit.WaitUntil(func() bool { return ran.Load() >= wantReplies.Load() }); err != nil {
		die("waiting for replies: %v", err)
	}
	if err := conduit.Endpoint().Drain(); err != nil {
		die("draining: %v", err)
	}
	if err := conduit.Barrier(); err != nil { // every request of every rank has run
		die("barrier: %v", err)
	}

	// Compare: what each rank sent to me against what ran here.
	mine := make([]byte, 4*n)
	for d, c := range sentTo {
		binary.LittleEndian.PutUint32(mine[4*d:], c)
	}
	parts, err := conduit.AllGather(mine)
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
	for _, e := range errs {
		fmt.Fprintf(os.Stderr, "testcore: rank %d: %s\n", me, e)
	}
	ok := byte(1)
	if len(errs) > 0 {
		ok = 0
	}
	mu.Unlock()
	verdicts, err := conduit.AllGather([]byte{ok})
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
			fmt.Printf("testcore: %d ranks × %d requests (%d goroutines each): every request and reply ran exactly once, every checksum matched\n", n, *msgs, *threads)
		} else {
			fmt.Printf("testcore: FAILED on %d of %d ranks\n", bad, n)
		}
	}
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	if bad > 0 {
		conduit.Exit(1)
	}
	conduit.Exit(0)
}

func usage(format string, a ...any) {
	cli.BadArgs("testcore", "testcore N [-msgs K] [-threads T] [-seed S]", format, a...)
}

func die(format string, a ...any) { cli.Die("testcore", format, a...) }
