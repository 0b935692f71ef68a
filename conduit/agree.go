package conduit

// This file is how the ranks of a counted group agree on whether their
// posts are the same (digest, agree, settle), and the accumulator of
// reductions of one integer element.

import (
	"encoding/binary"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// Where every rank maps every area (words.counted), the ranks agree on
// whether their posts are the same in a word of the leader's area, on
// the cache line of the count of arrivals that each rank changes anyway
// (offAgree): each enters its post's digest there before it arrives
// (agree), and the rank that completes the count reads it (settle). Only
// where the posts differ, or one has no digest, does it copy them into
// the leader's buffer; its verdict lies by the release word
// (offVerdict), which every rank has just read. A barrier whose ranks
// agree then reads no other rank's slot or buffer.

// A reduction of one integer element by an operator that accumulates
// (coll.Accumulable) has a digest of its call alone (digestAcc): each
// rank combines its element into the accumulator on the count's line
// (offAcc) before it arrives, and where the digests agree, the rank that
// completes the count leaves the accumulator's word by the release word
// (offResult), and the verdict says so (verdictAcc): no rank reads
// another's post.

// agreeDiffer, in the agreement word: posts differ, or one has no digest.
const agreeDiffer = 1

// digestAcc marks the digest of a post that accumulates.
const digestAcc = 1 << 63

// The verdict (offVerdict): the collective's number, shifted by 2, and
// whether the posts are the same, or the ranks' calls are and the result
// is the accumulator's (offResult).
const (
	verdictSame = 1
	verdictAcc  = 2
)

// digest returns the digest of a post's record rec: for a record without
// datum, flags, root or length (a barrier's), its header's first word,
// made even and not 0, which two records share only when they are the
// same; for one that accumulates (accumulates), its header with
// digestAcc, which two such records share where their calls are the
// same, whatever their elements; for any other, 0, none.
func digest(rec []byte) uint64 {
	if len(rec) < postHeader-8 || binary.LittleEndian.Uint32(rec[20:]) != 0 {
		return 0
	}
	meta, root := binary.LittleEndian.Uint32(rec[8:]), binary.LittleEndian.Uint32(rec[12:])
	if len(rec) == postHeader-8 && binary.LittleEndian.Uint64(rec) == 0 && binary.LittleEndian.Uint64(rec[12:]) == 0 {
		return (uint64(meta) + 1) << 1
	}
	// Step 0 (accumulates) leaves meta below 1<<24.
	if accumulates(rec) && root < 1<<24 {
		return digestAcc | uint64(meta)<<25 | uint64(root)<<1
	}
	return 0
}

// accumulates reports whether record rec (at least postHeader-8 bytes)
// is the post of a reduction of one integer element that an accumulator
// combines (coll.Accumulable), of its step 0, neither big nor refused.
func accumulates(rec []byte) bool {
	kind, op, elem, step := coll.Kind(rec[8]), coll.Op(rec[9]), amo.Kind(rec[10]), rec[11]
	_, ok := coll.Accumulable(op, elem)
	return ok && step == 0 && (kind == coll.AllReduce || kind == coll.Reduce) &&
		binary.LittleEndian.Uint32(rec[16:]) == 1 && binary.LittleEndian.Uint64(rec) == uint64(elem.Size()) &&
		len(rec) == postHeader-8+elem.Size()
}

// accumulate combines element e of call, whose post accumulates, into
// the accumulator of the leader's area lead: amo.Apply's operation, with
// the processor's add and or inline (through amo.Apply, the crowded
// all-reduce took 3% longer: BENCHMARKS.md).
func accumulate(lead []byte, call coll.Call, e []byte) {
	op, _ := coll.Accumulable(call.Op, call.Elem)
	u, a := coll.AccIn(call.Op, call.Elem, e), word(lead, offAcc)
	switch op {
	case amo.Add:
		a.Add(u)
	case amo.Or:
		a.Or(u)
	default:
		for v := a.Load(); !a.CompareAndSwap(v, amo.Compute(amo.Uint64, op, v, u, 0)); v = a.Load() {
		}
	}
}

// accumulated returns the result u of c, a reduction that accumulated,
// decoded into c's buffer of it.
func (c *teamCall) accumulated(u uint64) []byte {
	b := c.accOut[:c.call.Elem.Size()]
	coll.AccOut(c.call.Op, c.call.Elem, u, b)
	return b
}

// agree enters digest d (0: none) of this rank's post into the agreement
// word of the leader's area lead: the first rank's digest, or
// agreeDiffer once a rank's differs or it has none. Before the rank
// arrives; the rank that completes the count resets it (settle).
func agree(lead []byte, d uint64) {
	g := word(lead, offAgree)
	if d != 0 {
		v := g.Load()
		if v == 0 && g.CompareAndSwap(0, d) {
			return
		}
		if v == 0 {
			v = g.Load()
		}
		if v == d {
			return
		}
	}
	g.Store(agreeDiffer)
}

// settle decides, for the rank whose arrival completed the count of
// collective n, whether every post is its own (digest d): it resets the
// agreement word and the accumulator; where the digests agree on a
// reduction that accumulates, it stores the accumulator's word by the
// release word (offResult); where they differ, it copies the posts into
// the leader's buffer (combinePosts); and it stores the verdict: n, and
// whether the posts are the same (verdictSame) or the result
// accumulated (verdictAcc).
func (w *words) settle(lead []byte, n, d uint64, reduce func() []byte) error {
	g := word(lead, offAgree)
	// This rank's agree left its digest there, or agreeDiffer.
	v := g.Load()
	if v != d && v != agreeDiffer {
		return w.corrupt(0, "its agreement word holds %#x in collective %d", v, n)
	}
	same := v == d
	g.Store(0)
	// Ranks combine into the accumulator for n+1 only once n is
	// released.
	acc := word(lead, offAcc).Swap(0)
	verdict := n << 2
	switch {
	case same && d&digestAcc != 0:
		word(lead, offResult).Store(acc)
		verdict |= verdictAcc
	case same:
		verdict |= verdictSame
	default:
		if err := w.combinePosts(n, reduce); err != nil {
			return err
		}
	}
	word(lead, offVerdict).Store(verdict)
	return nil
}
