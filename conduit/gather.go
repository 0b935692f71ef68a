package conduit

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/internal/varenc"
)

// hGather is the core handler of the all-gather's messages: args are the
// all-gather's number, the round, the chunk's index, the chunk count and
// the round's length in bytes; the payload is the chunk.
const hGather = 3

// hGatherTree is the core handler of the messages of the all-gather that
// runs over trees (treeAllGather), as hTree's are for Broadcast.
const hGatherTree = 5

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
	mu    sync.Mutex // guards in
	in    [2][maxRounds]assembly
	acked answered
	lock  chanMutex // one all-gather at a time on this rank
	n     uint64    // all-gathers this rank entered; under lock
	index uint64    // the Job.calls of the last; under lock
	tree  amTree    // treeAllGather's messages; its lock unused (lock serves)
}

// message runs for each all-gather chunk, and for the reply that
// acknowledges it.
func (g *amGather) message(t *amudp.Token, args []uint32, p []byte) {
	if len(args) != 5 || args[1] >= maxRounds {
		return // not one of ours
	}
	if !t.IsRequest() {
		g.acked.add(args[0])
		return
	}
	t.ReplyShort(hGather, args...)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.in[args[0]&1][args[1]].add(int(args[2]), int(args[3]), int(args[4]), p, "an all-gather round")
}

// take returns round k's byte string of all-gather parity par, and makes
// the slot ready for all-gather number +2.
func (g *amGather) take(par uint64, k int) ([]byte, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.in[par][k].take()
}

// allGather runs all-gather number n with this rank's part data.
func (j *Job) allGather(n uint64, data []byte) ([][]byte, error) {
	g := &j.gat
	g.acked.enter(n)
	par := n & 1
	have := [][]byte{append([]byte(nil), data...)} // parts of ranks j.rank, j.rank+1, ...
	sent := 0
	err := j.waitIn("all-gather", n, g.index, func() error {
		for k, d := 0, 1; d < j.size; k, d = k+1, 2*d {
			// Send the first min(d, N−d) parts held to rank−d.
			cnt := min(d, j.size-d)
			var msg []byte
			for _, p := range have[:cnt] {
				msg = varenc.AppendBytes(msg, p)
			}
			to := (j.rank - d + j.size) % j.size
			err := sendChunks(msg, func(c, chunks int, part []byte) error {
				sent++
				return j.ep.RequestMedium(to, hGather, part, uint32(n), uint32(k), uint32(c), uint32(chunks), uint32(len(msg)))
			})
			if err != nil {
				return err
			}
			in := &g.in[par][k]
			if err := j.collWait(in.done.Load); err != nil {
				return err
			}
			b, err := g.take(par, k)
			if err != nil {
				return err
			}
			// Each part's capacity ends with it: appending to a part
			// never writes over the next rank's.
			dec := varenc.Decoder{B: b}
			for range cnt {
				p := dec.Bytes()
				if dec.Bad {
					return fmt.Errorf("malformed all-gather round %d from rank %d", k, (j.rank+d)%j.size)
				}
				have = append(have, p)
			}
		}
		if err := j.collWait(func() bool { return g.acked.has(sent) }); err != nil {
			return err
		}
		g.acked.consume(sent)
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

// treeAllGather runs all-gather number n where the ranks outnumber CPUs
// or the barrier runs in two levels: each rank's part, framed as a uvarint
// length and its bytes, goes up the binomial tree to rank 0, every rank
// appending its children's frames to its own (which puts them in rank
// order, see treeCall.reduce), and rank 0 broadcasts the whole down the
// same tree. Over the two-level tree (j.leaders set, hierTree) the frames
// come in another order, so each also names its rank. Each all-gather is
// two numbered collectives of j.gat.tree. Bruck's algorithm needs ⌈log2 N⌉ rounds, each
// of which may wake every rank; here most ranks wake twice, which on a
// host with fewer cores than ranks is what costs (see DESIGN.md §7). j.gat.lock
// held.
func (j *Job) treeAllGather(n uint64, data []byte) ([][]byte, error) {
	var all []byte
	err := j.waitIn("all-gather", n, j.gat.index, func() error {
		c := j.nextTreeCall(&j.gat.tree, 0)
		c.kind = treeGather
		own := make([]byte, 0, 2*binary.MaxVarintLen64+len(data))
		if j.leaders != nil { // the two-level tree: parts come in any order
			own = varenc.AppendUint(own, uint64(j.rank))
		}
		own = varenc.AppendBytes(own, data)
		b, err := c.reduce(own, func(acc, in []byte) ([]byte, error) { return append(acc, in...), nil })
		if err != nil {
			return err
		}
		c = j.nextTreeCall(&j.gat.tree, 0)
		c.kind = treeGather
		all, err = c.broadcast(b)
		return err
	})
	if err != nil {
		return nil, err
	}
	parts, seen := make([][]byte, j.size), make([]bool, j.size)
	dec := varenc.Decoder{B: all}
	for i := range parts {
		r := i
		if j.leaders != nil { // each part names its rank
			u := dec.Uint()
			if dec.Bad || u >= uint64(j.size) || seen[u] {
				return nil, fmt.Errorf("malformed all-gather from rank 0: entry %d names no rank, or one twice", i)
			}
			r = int(u)
		}
		seen[r] = true
		if parts[r] = dec.Bytes(); dec.Bad {
			return nil, fmt.Errorf("malformed all-gather from rank 0: the part of rank %d", r)
		}
	}
	if len(dec.B) != 0 {
		return nil, fmt.Errorf("malformed all-gather from rank 0: %d bytes after the last rank's part", len(dec.B))
	}
	j.ep.Fence()
	return parts, nil
}
