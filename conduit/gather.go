package conduit

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"udpconduit/amudp"
)

// hGather is the core handler of the all-gather's messages: args are the
// all-gather's number, the round, the chunk's index, the chunk count and
// the round's length in bytes; the payload is the chunk.
const hGather = 3

// amGather is the state of the all-gather over active messages, Bruck's
// algorithm: after round k (distance d = 2^k) rank r holds the parts of
// ranks r, r+1, ..., r+2d−1 (mod N), having sent the first min(d, N−d) it
// held to rank r−d and received as many from rank r+d. After ⌈log2 N⌉
// rounds it holds all N. A round's parts travel as one byte string
// (uvarint length, bytes, ...) in medium messages of at most MaxMedium
// bytes. As for the barrier, no rank can be two all-gathers ahead of
// another, so the received rounds are kept for the two parities of the
// all-gather's number, and a rank leaves only once its own messages are
// answered.
type amGather struct {
	mu    sync.Mutex
	in    [2][maxRounds]gatherIn
	acked [2]atomic.Uint32 // replies to this rank's own messages, by parity
	// current is the all-gather being waited for (read by Job.returned).
	current atomic.Uint64
	lock    chanMutex // one all-gather at a time on this rank
}

// gatherIn is one round's incoming byte string.
type gatherIn struct {
	buf    []byte
	got    int // chunks received
	chunks int
	done   atomic.Bool
	bad    error
}

// message runs for each all-gather chunk, and for the reply that
// acknowledges it.
func (g *amGather) message(t *Token, args []uint32, p []byte) {
	if len(args) != 5 || args[1] >= maxRounds {
		return // not one of ours
	}
	par := args[0] & 1
	if !t.IsRequest() {
		g.acked[par].Add(1)
		return
	}
	t.ReplyShort(hGather, args[0], args[1], args[2], args[3], args[4])
	idx, chunks, size := int(args[2]), int(args[3]), int(args[4])
	g.mu.Lock()
	defer g.mu.Unlock()
	in := &g.in[par][args[1]]
	if in.done.Load() {
		return
	}
	if in.buf == nil {
		in.buf, in.chunks = make([]byte, size), chunks
	}
	off := idx * amudp.MaxMedium
	if chunks != in.chunks || size != len(in.buf) || idx >= chunks || off+len(p) > size {
		in.bad = fmt.Errorf("malformed chunk %d/%d of an all-gather round", idx, chunks)
		in.done.Store(true)
		return
	}
	copy(in.buf[off:], p)
	if in.got++; in.got == in.chunks {
		in.done.Store(true)
	}
}

// take returns round k's byte string of all-gather parity par, and makes
// the slot ready for all-gather number +2.
func (g *amGather) take(par uint64, k int) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	in := &g.in[par][k]
	b, err := in.buf, in.bad
	in.buf, in.got, in.chunks, in.bad = nil, 0, 0, nil
	in.done.Store(false)
	return b, err
}

// allGather runs all-gather number n with this rank's part data.
func (j *Job) allGather(n uint64, data []byte) ([][]byte, error) {
	g := &j.gat
	g.current.Store(n)
	par := n & 1
	have := [][]byte{append([]byte(nil), data...)} // parts of ranks j.rank, j.rank+1, ...
	sent := 0
	err := j.waitIn("all-gather", n, func() error {
		for k, d := 0, 1; d < j.size; k, d = k+1, 2*d {
			// Send the first min(d, N−d) parts held to rank−d.
			cnt := min(d, j.size-d)
			var msg []byte
			for _, p := range have[:cnt] {
				msg = binary.AppendUvarint(msg, uint64(len(p)))
				msg = append(msg, p...)
			}
			chunks := max(1, (len(msg)+amudp.MaxMedium-1)/amudp.MaxMedium)
			to := (j.rank - d + j.size) % j.size
			for c := range chunks {
				part := msg[c*amudp.MaxMedium : min((c+1)*amudp.MaxMedium, len(msg))]
				if err := j.ep.RequestMedium(to, hGather, part, uint32(n), uint32(k), uint32(c), uint32(chunks), uint32(len(msg))); err != nil {
					return err
				}
				sent++
			}
			in := &g.in[par][k]
			if err := j.barrierWait(in.done.Load); err != nil {
				return err
			}
			b, err := g.take(par, k)
			if err != nil {
				return err
			}
			for range cnt {
				l, w := binary.Uvarint(b)
				if w <= 0 || uint64(len(b)-w) < l {
					return fmt.Errorf("malformed all-gather round %d from rank %d", k, (j.rank+d)%j.size)
				}
				have = append(have, b[w:w+int(l)])
				b = b[w+int(l):]
			}
		}
		a := &g.acked[par]
		if err := j.barrierWait(func() bool { return a.Load() >= uint32(sent) }); err != nil {
			return err
		}
		a.Add(-uint32(sent))
		return nil
	})
	if err != nil {
		return nil, err
	}
	parts := make([][]byte, j.size)
	for i, p := range have[:j.size] {
		parts[(j.rank+i)%j.size] = p
	}
	j.ep.Fence()
	return parts, nil
}
