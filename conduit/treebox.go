package conduit

// This file is where the tree collectives' messages wait (amTree): kept by
// (collective, sender, round) until the rank that expects them takes them.

import (
	"fmt"
	"sync"

	"github.com/udpconduit/udpconduit/amudp"
)

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
