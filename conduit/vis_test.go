package conduit

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// TestPackPieces: whatever the pieces, every message's piece list and
// bytes fit a Medium payload (for a get, the list and the reply's bytes
// each), and the messages' pieces, in order, are the pieces given, split
// where they straddle two messages.
func TestPackPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var ps []Piece
		var off uint64
		for range rng.IntN(50) {
			n := []int{0, 1, 8, 1000, MaxMedium - 5, MaxMedium + 7, 3 * MaxMedium}[rng.IntN(7)]
			if trial%3 == 0 {
				n = rng.IntN(16) // many small pieces: the lists fill first
			}
			ps = append(ps, Piece{Offset: off, Data: make([]byte, n)})
			off += uint64(n) + uint64(rng.IntN(100))
		}
		if trial%5 == 0 {
			for range 9000 {
				ps = append(ps, Piece{Offset: off, Data: make([]byte, 8)})
				off += 16
			}
		}
		for _, listOnly := range []bool{false, true} {
			msgs := packPieces(ps, listOnly)
			var got []Piece
			for i, m := range msgs {
				list := len(appendPieceList(nil, m.pieces))
				sum := 0
				for _, p := range m.pieces {
					sum += len(p.Data)
				}
				if sum != m.data {
					t.Fatalf("message %d counts %d bytes, holds %d", i, m.data, sum)
				}
				if listOnly && (list > MaxMedium || sum > MaxMedium) || !listOnly && list+sum > MaxMedium {
					t.Fatalf("trial %d (list only %v): message %d has a list of %d bytes and %d bytes of pieces", trial, listOnly, i, list, sum)
				}
				got = append(got, m.pieces...)
			}
			// The messages' pieces, in order, cut the pieces given
			// into consecutive runs of their own bytes.
			k := 0
			for pi, p := range ps {
				for done := 0; done < len(p.Data); {
					if k >= len(got) {
						t.Fatalf("trial %d: the messages end inside piece %d", trial, pi)
					}
					g := got[k]
					k++
					if g.Offset != p.Offset+uint64(done) || len(g.Data) == 0 || &g.Data[0] != &p.Data[done] {
						t.Fatalf("trial %d: piece %d byte %d: the messages have %d bytes at %d", trial, pi, done, len(g.Data), g.Offset)
					}
					done += len(g.Data)
				}
			}
			if k != len(got) {
				t.Fatalf("trial %d: %d pieces in the messages past the given ones", trial, len(got)-k)
			}
		}
	}
}

// visSeg is the segment size of the VIS tests.
const visSeg = 1 << 20

// TestVISRoundTrip: strided, indexed and vector Puts from every rank to
// the next, and Gets back, checked byte for byte against the segment
// and the data sent: pieces that straddle messages, thousands of small
// pieces, empty lists; over UDP, shared memory, and a network that drops
// 20% and duplicates 5% of the datagrams.
func TestVISRoundTrip(t *testing.T) {
	atomicNets(t, func(t *testing.T, jn jobNet) {
		const n = 3
		res, _ := runJob(t, n, jn, false, func(j *Job) {
			if _, err := j.Attach(nil, visSeg); err != nil {
				t.Fatal(err)
			}
			me := j.Rank()
			to := (me + 1) % n
			rng := rand.New(rand.NewPCG(uint64(me), 9))
			seg := j.LocalView(me)

			// Strided: a column of 300 records of 24 bytes, every 1000.
			col := Strided{Offset: 5, Stride: 1000, Count: 300, Size: 24}
			src := pattern(me, col.Count*40)
			if err := j.PutStrided(to, col, src, 40); err != nil {
				t.Errorf("rank %d: PutStrided: %v", me, err)
			}
			// Indexed: 5000 8-byte words at shuffled places of the upper half.
			offs := make([]uint64, 5000)
			for i, k := range rng.Perm(len(offs)) {
				offs[i] = visSeg/2 + uint64(k)*16
			}
			words := pattern(me+50, 8*len(offs))
			if err := j.PutIndexed(to, offs, 8, words); err != nil {
				t.Errorf("rank %d: PutIndexed: %v", me, err)
			}
			// Vector: two pieces larger than a message and a small one.
			big := []Piece{{Offset: 650000, Data: pattern(me+90, 70000)}, {Offset: 730000, Data: pattern(me+91, 3)},
				{Offset: 740000, Data: pattern(me+92, 2*MaxMedium+11)}}
			h, err := j.PutVNB(to, big)
			if err == nil {
				_, err = h.Wait()
			}
			if err != nil {
				t.Errorf("rank %d: PutVNB: %v", me, err)
			}
			if err := j.PutV(to, nil); err != nil {
				t.Errorf("rank %d: empty PutV: %v", me, err)
			}
			j.World().Barrier()

			// What the rank before wrote is in this segment.
			from := (me + n - 1) % n
			for i := range col.Count {
				at := col.Offset + uint64(i)*col.Stride
				if want := pattern(from, col.Count*40)[i*40 : i*40+24]; !bytes.Equal(seg[at:at+24], want) {
					t.Fatalf("rank %d: strided piece %d = %v, want %v", me, i, seg[at:at+24], want)
				}
			}
			fromWords := pattern(from+50, 8*len(offs))
			frng := rand.New(rand.NewPCG(uint64(from), 9))
			for i, k := range frng.Perm(len(offs)) {
				at := visSeg/2 + uint64(k)*16
				if !bytes.Equal(seg[at:at+8], fromWords[8*i:8*i+8]) {
					t.Fatalf("rank %d: indexed word %d wrong", me, i)
				}
			}
			for _, p := range []Piece{{650000, pattern(from+90, 70000)}, {730000, pattern(from+91, 3)}, {740000, pattern(from+92, 2*MaxMedium+11)}} {
				if !bytes.Equal(seg[p.Offset:p.Offset+uint64(len(p.Data))], p.Data) {
					t.Fatalf("rank %d: vector piece at %d wrong", me, p.Offset)
				}
			}
			j.World().Barrier()

			// And back: Gets of what this rank wrote into the next.
			back := make([]byte, col.Count*32)
			if err := j.GetStrided(to, col, back, 32); err != nil {
				t.Errorf("rank %d: GetStrided: %v", me, err)
			}
			for i := range col.Count {
				if !bytes.Equal(back[i*32:i*32+24], src[i*40:i*40+24]) {
					t.Fatalf("rank %d: strided get piece %d wrong", me, i)
				}
			}
			wback := make([]byte, len(words))
			if err := j.GetIndexed(to, offs, 8, wback); err != nil || !bytes.Equal(wback, words) {
				t.Errorf("rank %d: GetIndexed: %v (equal %v)", me, err, bytes.Equal(wback, words))
			}
			vback := []Piece{{Offset: 740000, Data: make([]byte, 2*MaxMedium+11)}, {Offset: 650000, Data: make([]byte, 70000)}}
			h, err = j.GetVNB(to, vback)
			if err == nil {
				_, err = h.Wait()
			}
			if err != nil || !bytes.Equal(vback[0].Data, big[2].Data) || !bytes.Equal(vback[1].Data, big[0].Data) {
				t.Errorf("rank %d: GetVNB: %v", me, err)
			}
			if err := j.GetV(to, []Piece{}); err != nil {
				t.Errorf("rank %d: empty GetV: %v", me, err)
			}
			j.World().Barrier()
		})
		if res.Code != 0 {
			t.Errorf("job ended %d: %q", res.Code, res.Ends)
		}
	})
}

// TestVISErrors: a piece outside the segment, a bad rank, a local buffer
// too short for the pieces: errors before anything is sent.
func TestVISErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(4, 0, 0, time.Microsecond)
		runJob(t, 2, memNet(lnet), false, func(j *Job) {
			if err := j.PutV(1, []Piece{{0, []byte{1}}}); !errors.Is(err, ErrNotAttached) {
				t.Errorf("PutV before Attach: %v", err)
			}
			if _, err := j.Attach(nil, 4096); err != nil {
				t.Fatal(err)
			}
			other := 1 - j.Rank()
			sent := lnet.Sent()
			if err := j.PutV(other, []Piece{{0, []byte{1}}, {4090, make([]byte, 7)}}); !errors.Is(err, ErrOutOfSegment) {
				t.Errorf("a piece past the segment's end: %v", err)
			}
			if err := j.GetIndexed(other, []uint64{0, 1 << 40}, 4, make([]byte, 8)); !errors.Is(err, ErrOutOfSegment) {
				t.Errorf("an index far outside: %v", err)
			}
			if err := j.PutStrided(2, Strided{Count: 1, Size: 1}, []byte{1}, 1); !errors.Is(err, ErrBadRank) {
				t.Errorf("rank 2 of 2: %v", err)
			}
			if err := j.PutIndexed(other, []uint64{0, 8}, 8, make([]byte, 9)); err == nil {
				t.Error("2 pieces of 8 bytes from 9: no error")
			}
			if err := j.GetStrided(other, Strided{Count: 3, Size: 8, Stride: 8}, make([]byte, 16), 4); err == nil {
				t.Error("a local stride shorter than a piece: no error")
			}
			if got := lnet.Sent(); got != sent {
				t.Errorf("the refused calls sent %d datagrams", got-sent)
			}
			j.World().Barrier()
		})
	})
}

// TestReadPieceList: a piece list that a forged or corrupt message
// carries never names bytes outside the segment or more than the limit.
func TestReadPieceList(t *testing.T) {
	ok := appendPieceList(nil, []Piece{{0, make([]byte, 10)}, {90, make([]byte, 10)}})
	if offs, lens, rest, good := readPieceList(append(ok, 1, 2), 100, 20); !good || len(offs) != 2 || lens[1] != 10 || len(rest) != 2 {
		t.Errorf("a good list: %v %v %v %v", offs, lens, rest, good)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"past the segment's end", appendPieceList(nil, []Piece{{91, make([]byte, 10)}})},
		{"an offset past the end", appendPieceList(nil, []Piece{{1 << 40, nil}})},
		{"more bytes than the limit", appendPieceList(nil, []Piece{{0, make([]byte, 15)}, {50, make([]byte, 15)}})},
		{"a count past the list", []byte{200, 1}},
		{"truncated", ok[:len(ok)-1]},
	} {
		if _, _, _, good := readPieceList(c.b, 100, 20); good {
			t.Errorf("%s: accepted", c.name)
		}
	}
}
