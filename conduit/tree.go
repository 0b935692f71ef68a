package conduit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/internal/binomial"
	"github.com/udpconduit/udpconduit/spawn"
)

// hTree is the core handler of the broadcast's and the reduction's
// messages: args are the collective's number, its description (see
// treeMeta), the root, the chunk's index, the chunk count and the length of
// the byte string in bytes; the payload is the chunk.
const hTree = 4

// Op is a reduction operator.
type Op uint8

// The reduction operators. Sum of uint64 wraps modulo 2^64; Min and Max of
// float64 follow math.Min and math.Max (a NaN anywhere gives NaN). The
// reduction runs over a binomial tree (over two levels where ranks of
// several hosts share memory, see GASNET_PSHM_BARRIER_HIER), so a float64
// sum is the same on every run of a job of the same size, root and
// placement on hosts, but may differ in the last bits from a sum taken in
// rank order. Prod, And, Or and Xor (the last three on integers only)
// run over the team engine (Reduce), also for the whole job.
const (
	Sum Op = iota + 1
	Min
	Max
	Prod
	And
	Or
	Xor
	// opFunc marks a reduction with a program's function (ReduceFunc).
	opFunc Op = 255
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "sum"
	case Min:
		return "min"
	case Max:
		return "max"
	case Prod:
		return "prod"
	case And:
		return "and"
	case Or:
		return "or"
	case Xor:
		return "xor"
	case opFunc:
		return "func"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// The kinds of tree collective, and the element types of a reduction.
const (
	treeBroadcast = 1
	treeReduce    = 2
	treeGather    = 3 // the all-gather where ranks outnumber CPUs (gather.go)
	// treeFailed marks a message that carries, instead of data, why the
	// collective failed below or above its receiver (see treeCall.fail),
	// so that every rank of the tree ends it with that error instead of
	// waiting for data that will not come.
	treeFailed = 4

	elemUint64  = 1
	elemFloat64 = 2
)

// treeMeta packs what a tree message says about its collective: the round
// (which child or parent it comes from), the kind, the operator and the
// element type. Ranks that disagree on any but the round called different
// collectives.
func treeMeta(round, kind int, op Op, elem int) uint32 {
	return uint32(round) | uint32(kind)<<8 | uint32(op)<<16 | uint32(elem)<<24
}

// describeMeta names the collective a tree message belongs to.
func describeMeta(m uint32, root uint32) string {
	switch m >> 8 & 0xff {
	case treeBroadcast:
		return fmt.Sprintf("a broadcast from rank %d", root)
	case treeReduce:
		elem := "uint64"
		if m>>24 == elemFloat64 {
			elem = "float64"
		}
		return fmt.Sprintf("a %s reduction of %s to rank %d", Op(m>>16&0xff), elem, root)
	case treeGather:
		return "an all-gather"
	case treeFailed:
		return "a failed collective"
	}
	return "another collective"
}

// treeCall is one tree collective in progress on this rank.
type treeCall struct {
	j          *Job
	t          *amTree // j.tree, or j.gat.tree for an all-gather
	n          uint64
	root       int
	kind, elem int
	op         Op
	sent       int // messages sent, to be answered before leaving
	// failed is why the collective failed on this rank (nil: it has
	// not): from then on, what it sends up or down the tree says so
	// instead of carrying data.
	failed error
}

// fail records err as why the collective failed here (the first one
// stands) and returns it.
func (c *treeCall) fail(err error) error {
	if c.failed == nil {
		c.failed = err
	}
	return c.failed
}

// edge is a link of a collective's tree: the rank at its other end, and
// the round that numbers its message at the receiver.
type edge struct{ rank, round int }

// hierRound offsets the rounds of the links within a shared-memory group
// in a two-level tree (hierTree) from those between leaders: both are
// below 16 for up to 2^16 ranks, and rounds below maxRounds.
const hierRound = 16

// edges returns this rank's parent (rank -1 at the root) and children,
// in the order the reduction combines them (smallest subtree first): the
// binomial tree rooted at c.root, or where the job's barrier is in two
// levels (j.leaders set), the two-level tree of hierTree for broadcasts,
// reductions and the tree all-gather (whose parts then name their ranks).
func (c *treeCall) edges() (parent edge, children []edge) {
	if c.j.leaders != nil && (c.t == &c.j.tree || c.kind == treeGather) {
		return hierTree(c.j.leaders, c.root, c.j.rank)
	}
	size := c.j.size
	abs := func(v int) int { return binomial.Abs(v, c.root, size) }
	v := binomial.Rel(c.j.rank, c.root, size)
	parent = edge{-1, 0}
	if v > 0 {
		parent = edge{abs(binomial.Parent(v)), binomial.Round(v)}
	}
	for m := 1; m < binomial.Span(v, size) && v+m < size; m <<= 1 {
		children = append(children, edge{abs(v + m), binomial.Round(m)})
	}
	return parent, children
}

// hierTree returns rank's place in the two-level tree of a broadcast or
// reduction from root, given every rank's shared-memory group leader
// (shmLeaders): a binomial tree over each group's ranks rooted at its
// head (root in root's group, the leader in the others), whose links go
// through shared memory, and a binomial tree over the heads rooted at
// root. Children come smallest subtree first, the heads' before the
// group's.
func hierTree(leaders []int, root, rank int) (parent edge, children []edge) {
	head := func(r int) int { // the head of r's group in this tree
		if leaders[r] == leaders[root] {
			return root
		}
		return leaders[r]
	}
	heads := []int{root}
	for r, l := range leaders {
		if l == r && l != leaders[root] {
			heads = append(heads, r)
		}
	}
	group := []int{head(rank)}
	for r, l := range leaders {
		if l == leaders[rank] && r != group[0] {
			group = append(group, r)
		}
	}
	parent = edge{-1, 0}
	k := slices.Index(group, rank)
	i := slices.Index(heads, rank)
	if k > 0 {
		parent = edge{group[binomial.Parent(k)], hierRound + binomial.Round(k)}
	} else if i > 0 {
		parent = edge{heads[binomial.Parent(i)], binomial.Round(i)}
	}
	if i >= 0 {
		for _, c := range binomial.Children(i, len(heads)) {
			children = append(children, edge{heads[c], binomial.Round(c)})
		}
	}
	for _, c := range binomial.Children(k, len(group)) {
		children = append(children, edge{group[c], hierRound + binomial.Round(c)})
	}
	return parent, children
}

// send sends blob to rank as round k's message, or once the collective has
// failed here, the reason.
func (c *treeCall) send(rank, k int, blob []byte) error {
	meta := treeMeta(k, c.kind, c.op, c.elem)
	if c.failed != nil {
		meta, blob = treeMeta(k, treeFailed, 0, 0), []byte(c.failed.Error())
	}
	return sendChunks(blob, func(i, chunks int, part []byte) error {
		c.sent++
		return c.j.ep.RequestMedium(rank, c.t.h, part, uint32(c.n), meta, uint32(c.root), uint32(i), uint32(chunks), uint32(len(blob)))
	})
}

// recv waits for round k's message from rank and returns it.
// A message for this collective from a rank that called it with another
// root (see amTree.foreign) aborts the job: their trees differ, so some
// ranks may wait for messages that no rank sends.
func (c *treeCall) recv(rank, k int) ([]byte, error) {
	t := c.t
	key := treeKey{uint32(c.n), uint8(k)}
	want := treeMeta(k, c.kind, c.op, c.elem)
	var stray *treeIn
	if err := c.j.collWait(func() bool {
		if t.ready(key) {
			return true
		}
		stray = t.foreign(key.n, uint32(c.root))
		return stray != nil
	}); err != nil {
		return nil, err
	}
	if !t.ready(key) && stray != nil {
		return nil, c.abortFor(stray)
	}
	in, err := t.take(key)
	if err != nil {
		return nil, c.fail(fmt.Errorf("%w: from rank %d: %v", ErrCollectiveMismatch, rank, err))
	}
	if in.meta>>8&0xff == treeFailed {
		return nil, c.fail(fmt.Errorf("%w: %s", ErrCollectiveMismatch, strings.TrimPrefix(string(in.buf), ErrCollectiveMismatch.Error()+": ")))
	}
	if in.meta != want || in.root != uint32(c.root) {
		return nil, c.fail(c.mismatch(in))
	}
	return in.buf, nil
}

// mismatch describes in, a message of another collective than c.
func (c *treeCall) mismatch(in *treeIn) error {
	return fmt.Errorf("%w: rank %d is in %s, rank %d in %s", ErrCollectiveMismatch, in.src, describeMeta(in.meta, in.root),
		c.j.rank, describeMeta(treeMeta(0, c.kind, c.op, c.elem), uint32(c.root)))
}

// abortFor aborts the job for in, a message of another collective than c
// (see amTree.abort), and returns the mismatch as c's error (in RunLocal,
// where the abort returns, the rank ends at its next call).
func (c *treeCall) abortFor(in *treeIn) error {
	err := c.mismatch(in)
	if c.t.abort != nil {
		c.t.abort(err)
	}
	return c.fail(err)
}

// finish waits until every message this rank sent is answered, then leaves
// the collective: a message for it that this rank has not taken is from a
// rank that called another collective, and returned as if its collective
// had matched: it aborts the job.
func (c *treeCall) finish() error {
	t := c.t
	if err := c.j.collWait(func() bool { return t.acked.has(c.sent) }); err != nil {
		return err
	}
	t.acked.consume(c.sent)
	if stray := t.leave(uint32(c.n), treeMeta(0, c.kind, c.op, c.elem), uint32(c.root)); stray != nil {
		c.abortFor(stray)
		c.j.abort()
	}
	return nil
}

// broadcast runs the broadcast's tree: the root's blob reaches every rank.
func (c *treeCall) broadcast(blob []byte) ([]byte, error) {
	parent, children := c.edges()
	if parent.rank >= 0 {
		b, err := c.recv(parent.rank, parent.round)
		if err != nil && c.failed == nil {
			return nil, err // not a mismatch: the rank is ending
		}
		blob = b
	}
	// A failure received (or met here) goes on down, so that every rank
	// below ends the broadcast with it instead of waiting. The largest
	// subtrees first.
	for _, ch := range slices.Backward(children) {
		if err := c.send(ch.rank, ch.round, blob); err != nil {
			return nil, err
		}
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	if c.failed != nil {
		return nil, c.failed
	}
	return blob, nil
}

// reduce runs the reduction's tree: acc combined with every rank's vector
// (by combine, which checks the lengths and returns the combination)
// reaches the root, which returns it; the other ranks return nil. A rank's
// children are the ranks v+1, v+2, v+4, ... below its lowest set bit
// (relative to the root), each holding the next ranks in order, so a
// combine that appends gathers the ranks' data in order of their rank.
func (c *treeCall) reduce(acc []byte, combine func(acc, in []byte) ([]byte, error)) ([]byte, error) {
	parent, children := c.edges()
	for _, ch := range children {
		in, err := c.recv(ch.rank, ch.round)
		if err != nil && c.failed == nil {
			return nil, err // not a mismatch: the rank is ending
		}
		if c.failed == nil {
			if acc, err = combine(acc, in); err != nil {
				c.fail(fmt.Errorf("%w: from rank %d: %v", ErrCollectiveMismatch, ch.rank, err))
			}
		}
	}
	if parent.rank >= 0 {
		// A failure met below (or here) goes up in place of the data, so
		// that the root ends with it instead of waiting.
		if err := c.send(parent.rank, parent.round, acc); err != nil {
			return nil, err
		}
		acc = nil
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	if c.failed != nil {
		return nil, c.failed
	}
	return acc, nil
}

// treeCollective runs body, which runs one or more tree collectives (see
// Job.treeCall), on this rank, after every request it sent has been
// answered, holding the lock that orders this rank's tree collectives. A
// bad root or reduction operator op is refused before the call is
// counted.
func (j *Job) treeCollective(what string, root int, op Op, body func() error) error {
	j.enter()
	if root < 0 || root >= j.size {
		return fmt.Errorf("%s: root %d: accepted: a rank from 0 to %d: %w", what, root, j.size-1, amudp.ErrBadRank)
	}
	if what != "broadcast" && (op < Sum || op > Max) {
		return fmt.Errorf("%s: %w: %v; accepted: Sum, Min, Max, Prod, And, Or, Xor", what, ErrReduceOp, op)
	}
	t := &j.tree
	t.lock.Lock()
	defer t.lock.Unlock()
	if t.calls == nil {
		t.calls = map[string]uint64{}
	}
	t.calls[what]++
	t.callKind, t.callSeq, t.callTree, t.callIndex = what, t.calls[what], t.n+1, j.calls.Add(1)
	if err := j.ep.Drain(); err != nil {
		return j.done(fmt.Errorf("%s %d: %w", what, t.callSeq, err))
	}
	if err := body(); err != nil {
		return j.done(err)
	}
	j.ep.Fence()
	return nil
}

// nextTreeCall numbers the next collective of t on this rank, of the
// given root. t's lock (or, for j.gat.tree, j.gat's) held.
func (j *Job) nextTreeCall(t *amTree, root int) *treeCall {
	t.n++
	c := &treeCall{j: j, t: t, n: t.n, root: root}
	t.acked.enter(c.n)
	return c
}

// treeCall numbers the next tree collective of this rank, of the given
// root, and runs body on it under the hang reports, which name the
// program's call it serves (see amTree.callKind), as its errors do.
// j.tree.lock held.
func (j *Job) treeCall(root int, body func(c *treeCall) error) error {
	c := j.nextTreeCall(&j.tree, root)
	t := &j.tree
	at := spawn.Coll{Kind: t.callKind, Seq: t.callSeq, Tree: c.n, Root: root, Index: t.callIndex}
	if t.callKind == "all-reduce" {
		at.Tree = t.callTree
	}
	if err := j.waitInColl(at, func() error { return body(c) }); err != nil {
		return fmt.Errorf("%s %d: %w", t.callKind, t.callSeq, err)
	}
	return nil
}

// broadcastLocked is Broadcast with j.tree.lock held; blob is the root's.
func (j *Job) broadcastLocked(root int, blob []byte) ([]byte, error) {
	return j.broadcastFailed(root, blob, nil)
}

// broadcastFailed is broadcastLocked for a rank on which the collective
// has failed already (failed not nil): it sends the failure down in place
// of data.
func (j *Job) broadcastFailed(root int, blob []byte, failed error) ([]byte, error) {
	var out []byte
	err := j.treeCall(root, func(c *treeCall) error {
		c.kind, c.failed = treeBroadcast, failed
		if j.rank != root {
			blob = nil
		}
		b, err := c.broadcast(blob)
		out = b
		return err
	})
	return out, err
}

// reduceLocked runs a reduction of the packed vector acc (which it may
// overwrite) with j.tree.lock held: the result at the root, nil elsewhere.
func (j *Job) reduceLocked(root int, op Op, elem int, acc []byte) ([]byte, error) {
	var out []byte
	err := j.treeCall(root, func(c *treeCall) error {
		b, err := c.reduceVec(op, elem, acc)
		out = b
		return err
	})
	return out, err
}

// reduceTo is a reduction of the packed vector acc (which it may
// overwrite) to root, on shared words where the job is one group, else
// over messages; j.tree.lock held.
func (j *Job) reduceTo(root int, op Op, elem int, acc []byte) ([]byte, error) {
	if w := j.bar.words; w != nil && w.whole {
		out, ok, err := j.wordTree(w, wordReduce, root, op, elem, acc)
		if err != nil || ok {
			return out, err
		}
	}
	return j.reduceLocked(root, op, elem, acc)
}

// allReduce reduces the packed vector acc to rank 0 and broadcasts the
// result, as one step of this rank's collective order; in a job of one
// group, every rank combines every rank's vector from shared words.
func (j *Job) allReduce(op Op, elem int, acc []byte) ([]byte, error) {
	var out []byte
	err := j.treeCollective("all-reduce", 0, op, func() error {
		if w := j.bar.words; w != nil && w.whole {
			b, ok, err := j.wordTree(w, wordAllReduce, 0, op, elem, acc)
			if err != nil || ok {
				out = b
				return err
			}
		}
		b, rerr := j.reduceLocked(0, op, elem, acc)
		if rerr != nil && !errors.Is(rerr, ErrCollectiveMismatch) {
			return rerr
		}
		// Every rank takes part in the broadcast even when its reduction
		// failed: the root sends the failure down (and a rank that met
		// one sends it on), so that every rank returns it.
		var berr error
		out, berr = j.broadcastFailed(0, b, rerr)
		if rerr != nil {
			return rerr
		}
		return berr
	})
	return out, err
}

// reduceVec runs a reduction of the vector packed in acc (8 bytes an
// element, little-endian), which it may overwrite.
func (c *treeCall) reduceVec(op Op, elem int, acc []byte) ([]byte, error) {
	c.kind, c.op, c.elem = treeReduce, op, elem
	return c.reduce(acc, func(acc, in []byte) ([]byte, error) {
		if len(in) != len(acc) {
			return nil, fmt.Errorf("a vector of %d elements, this rank's has %d", len(in)/8, len(acc)/8)
		}
		combine(op, elem, acc, in)
		return acc, nil
	})
}

// combine sets acc[i] = acc[i] op in[i] for every 8-byte element.
func combine(op Op, elem int, acc, in []byte) {
	for i := 0; i+8 <= len(acc); i += 8 {
		a, b := binary.LittleEndian.Uint64(acc[i:]), binary.LittleEndian.Uint64(in[i:])
		var r uint64
		if elem == elemUint64 {
			switch op {
			case Sum:
				r = a + b
			case Min:
				r = min(a, b)
			case Max:
				r = max(a, b)
			}
		} else {
			x, y := math.Float64frombits(a), math.Float64frombits(b)
			switch op {
			case Sum:
				r = math.Float64bits(x + y)
			case Min:
				r = math.Float64bits(math.Min(x, y))
			case Max:
				r = math.Float64bits(math.Max(x, y))
			}
		}
		binary.LittleEndian.PutUint64(acc[i:], r)
	}
}
