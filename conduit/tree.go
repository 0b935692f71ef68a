package conduit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

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

// treeKey names what a rank receives in one round of tree collective n.
type treeKey struct {
	n     uint32
	round uint8
}

// treeIn is a byte string received (or arriving) for a round.
type treeIn struct {
	assembly
	meta, root uint32
	src        int // the rank that sends it
}

// amTree is the state of the broadcast and the reduction, which run over
// the job's binomial tree (package binomial) rooted at their root: each
// rank receives once and the tree is ⌈log2 N⌉ deep; the reduction runs the
// same tree upwards,
// each rank combining what its children sent with its own vector before it
// sends the result to its parent. Nothing bounds how far the root of a
// broadcast can run ahead of the others (it waits for no one), so what
// arrives is kept by the collective's full number until its rank takes it.
// A rank leaves a collective once its own messages are answered, as in the
// barrier. The all-gather where ranks outnumber CPUs runs the same trees
// with its own amTree and handler (amGather.tree).
type amTree struct {
	h     int        // the core handler of its messages
	mu    sync.Mutex // guards in
	in    map[treeKey]*treeIn
	acked answered
	lock  chanMutex // one tree collective at a time on this rank
	n     uint64    // tree collectives this rank entered; under lock
	// calls counts the program's calls of each kind ("broadcast",
	// "reduce", "all-reduce"), and callKind and callSeq name the one in
	// progress, as the
	// program counts them (an all-reduce runs two tree collectives): what
	// errors and hang reports name. Under lock.
	calls     map[string]uint64
	callKind  string
	callSeq   uint64
	callTree  uint64 // the number of its first tree collective
	callIndex uint64 // its Job.calls
	// words counts the collectives this rank ran on shared words
	// (wordTree), each under its own number. Under lock.
	words uint64
	// left is the number of the last collective this rank left, and
	// leftMeta and leftRoot what it was (under mu): in collectives that
	// match, a rank takes every message sent to it for a collective before
	// it leaves it, so one that arrives later was sent by a rank that
	// called another collective (a broadcast from another root, say).
	left               uint64
	leftMeta, leftRoot uint32
	// abort aborts the job for a mismatch that an error of this rank's
	// call cannot report to every rank involved (see Job.treeAbort): a
	// message that arrives after its collective, one left untaken, or one
	// from another root's tree. Called outside mu.
	abort func(error)
}

// message runs for each tree message, and for the reply that acknowledges
// it.
func (t *amTree) message(tok *amudp.Token, args []uint32, p []byte) {
	if len(args) != 6 || args[1]&0xff >= maxRounds {
		return // not one of ours
	}
	if !tok.IsRequest() {
		t.acked.add(args[0])
		return
	}
	tok.ReplyShort(t.h, args...)
	if err := t.store(tok.Source(), args, p); err != nil && t.abort != nil {
		t.abort(err)
	}
}

// store keeps a tree message's chunk until its collective takes it. It
// returns an error if this rank left that collective already (said once
// per message, at its first chunk).
func (t *amTree) store(src int, args []uint32, p []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if uint64(args[0]) <= t.left {
		if args[3] != 0 {
			return nil
		}
		return fmt.Errorf("%w: rank %d is in %s (tree collective %d), which this rank has left%s", ErrCollectiveMismatch,
			src, describeMeta(args[1], args[2]), args[0], t.leftAs(args[0]))
	}
	if t.in == nil {
		t.in = make(map[treeKey]*treeIn)
	}
	k := treeKey{args[0], uint8(args[1])}
	in := t.in[k]
	if in == nil {
		in = &treeIn{meta: args[1], root: args[2], src: src}
		t.in[k] = in
	}
	if in.meta != args[1] || in.root != args[2] {
		in.bad = fmt.Errorf("chunks of %s and of %s", describeMeta(in.meta, in.root), describeMeta(args[1], args[2]))
		in.done.Store(true)
		return nil
	}
	in.add(int(args[3]), int(args[4]), int(args[5]), p, "a tree collective's message")
	return nil
}

// leftAs describes collective n as this rank left it, when it is the last
// one it left. t.mu held.
func (t *amTree) leftAs(n uint32) string {
	if uint64(n) != t.left {
		return ""
	}
	return " as " + describeMeta(t.leftMeta, t.leftRoot)
}

// ready reports whether round k of collective n has arrived whole.
func (t *amTree) ready(k treeKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.in[k]
	return in != nil && in.done.Load()
}

// foreign returns a message that arrived for collective n from a rank
// whose collective n has another root: its tree is another one, so the
// message this rank waits for may never come. (A message of the same
// root comes down or up the same tree: one of another kind is found
// when it is taken.)
func (t *amTree) foreign(n uint32, root uint32) *treeIn {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, in := range t.in {
		if k.n == n && in.root != root {
			return in
		}
	}
	return nil
}

// leave records that this rank left collective n, described by meta and
// root, and drops what arrived for it or an earlier one and was not taken:
// the first of those, returned, is a message of a rank that called another
// collective.
func (t *amTree) leave(n uint32, meta, root uint32) *treeIn {
	t.mu.Lock()
	defer t.mu.Unlock()
	var stray *treeIn
	for k, in := range t.in {
		if k.n <= n {
			if stray == nil {
				stray = in
			}
			delete(t.in, k)
		}
	}
	t.left, t.leftMeta, t.leftRoot = uint64(n), meta, root
	return stray
}

// take removes round k of collective n and returns it.
func (t *amTree) take(k treeKey) (*treeIn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	in := t.in[k]
	delete(t.in, k)
	return in, in.bad
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

// Broadcast sends the root's data to every rank: every rank calls it with
// the same root, and each returns a copy of the data the root passed (the
// others' data is not used). It runs over active messages among the ranks,
// down a binomial tree ⌈log2 N⌉ deep, without the console; in a job whose
// ranks all share memory (one group, see Barrier), data of up to 1640
// bytes goes through a slot in shared memory instead, which the others
// read after a synchronisation on shared words. Broadcasts and
// reductions are collectives of one sequence: every rank calls them in the
// same order, and concurrent calls of one rank's goroutines run one after
// another. As for Barrier, a rank enters once every request it sent has
// been answered; unlike Barrier, Broadcast does not synchronise: the root
// may return before the others have received.
func (j *Job) Broadcast(root int, data []byte) ([]byte, error) {
	var out []byte
	err := j.treeCollective("broadcast", root, 0, func() error {
		if w := j.bar.words; w != nil && w.whole {
			b, ok, err := j.wordTree(w, wordBroadcast, root, 0, 0, data)
			if err != nil || ok {
				out = b
				return err
			}
		}
		b, err := j.broadcastLocked(root, data)
		if err == nil && j.rank == root {
			b = append([]byte{}, b...)
		}
		out = b
		return err
	})
	return out, err
}

// ReduceUint64 combines the vectors of every rank element by element with
// op and returns the result at the root (nil elsewhere). Sum, Min and Max
// run as below; Prod, And, Or and Xor run as Reduce on World does. Every rank passes
// a vector of the same length. It runs up a binomial tree among the ranks,
// as Broadcast runs down one, with the same ordering rules; in a job whose
// ranks all share memory, vectors of up to 205 elements go through slots
// in shared memory, and the root combines them in rank order. Ranks whose
// calls differ (root, operator, type, length) get what they get over
// messages: the slots show it to every rank, which then run the call over
// messages.
func (j *Job) ReduceUint64(root int, op Op, v []uint64) ([]uint64, error) {
	if op > Max {
		return Reduce(j.world, root, op, v) // over the team engine
	}
	var out []byte
	err := j.treeCollective("reduce", root, op, func() (err error) {
		out, err = j.reduceTo(root, op, elemUint64, uint64Bytes(v))
		return err
	})
	return bytesUint64(out), err
}

// ReduceFloat64 is ReduceUint64 for float64 vectors.
func (j *Job) ReduceFloat64(root int, op Op, v []float64) ([]float64, error) {
	if op > Max {
		return Reduce(j.world, root, op, v) // over the team engine
	}
	var out []byte
	err := j.treeCollective("reduce", root, op, func() (err error) {
		out, err = j.reduceTo(root, op, elemFloat64, float64Bytes(v))
		return err
	})
	return bytesFloat64(out), err
}

// AllReduceUint64 is ReduceUint64 whose result every rank gets: a reduction
// to rank 0 and a broadcast from it (2⌈log2 N⌉ rounds), as one step of the
// ranks' collective order; in a job whose ranks all share memory, each
// rank combines every rank's vector from the slots, in rank order, so
// that every rank gets the same bits.
func (j *Job) AllReduceUint64(op Op, v []uint64) ([]uint64, error) {
	if op > Max {
		return AllReduce(j.world, op, v) // over the team engine
	}
	out, err := j.allReduce(op, elemUint64, uint64Bytes(v))
	return bytesUint64(out), err
}

// AllReduceFloat64 is AllReduceUint64 for float64 vectors.
func (j *Job) AllReduceFloat64(op Op, v []float64) ([]float64, error) {
	if op > Max {
		return AllReduce(j.world, op, v) // over the team engine
	}
	out, err := j.allReduce(op, elemFloat64, float64Bytes(v))
	return bytesFloat64(out), err
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

func uint64Bytes(v []uint64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func bytesUint64(b []byte) []uint64 {
	if b == nil {
		return nil
	}
	v := make([]uint64, len(b)/8)
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return v
}

func float64Bytes(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func bytesFloat64(b []byte) []float64 {
	if b == nil {
		return nil
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}
