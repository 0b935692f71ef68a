package conduit

// This file is the collectives a program calls on a team (team.go), each
// a call of the engine (conduit/internal/coll) through Team.collect.

import (
	"fmt"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// Barrier returns once every member has entered it; a member enters once
// its requests have been answered, so its Puts are visible after it.
func (t *Team) Barrier() error {
	_, err := ordered(t, func() (struct{}, error) { return struct{}{}, t.barrier() })
	return err
}

// BarrierNB starts Barrier. Where it runs on shared words (World in a
// job of one shared-memory group), what remains after this rank's
// arrival asks nothing more of it (a barrier counted, as GASNET_BARRIER
// AMTREE and AMCENTRAL have it, the default where ranks outnumber CPUs,
// up to 64 ranks; a member's, not the leader's, beyond; a dissemination
// of two ranks), and it is this rank's next call on the team, with no
// request unanswered, outside a handler, this rank arrives at the call,
// and the barrier completes at Wait, at a Test that finds every rank
// arrived, or at the rank's next call on the team. On the same
// conditions, a team of one member's completes at the call. Elsewhere
// it runs on a goroutine of its own, as the other NB collectives do
// but for AlltoallNB and the NB reductions, split as BarrierNB where
// their data fit a slot (at most 1632 bytes), a reduction's operator
// suits its type, and, beyond 64 ranks, every rank's data (but for a
// reduction by one of the library's operators, its result) fit the
// leader's buffer (about 12 KiB): every rank's datum of the call is then
// of that length. A panic of a reduction's operator goes on from its
// handle's Wait or Test, and only there: a handle neither waited for nor
// tested passes it on to no call.
func (t *Team) BarrierNB() *Handle[struct{}] {
	n := t.ticket()
	if h := split[struct{}](t, n, coll.Call{Kind: coll.Barrier}, nil, nil, nil); h != nil {
		return h
	}
	return startAt(t, n, func() (struct{}, error) { return struct{}{}, t.barrier() })
}

// Broadcast returns the root's data on every member.
func (t *Team) Broadcast(root int, data []byte) ([]byte, error) {
	return ordered(t, func() ([]byte, error) { return t.broadcast(root, data) })
}

// BroadcastNB starts Broadcast; data must not change until it completes.
func (t *Team) BroadcastNB(root int, data []byte) *Handle[[]byte] {
	return startNB(t, func() ([]byte, error) { return t.broadcast(root, data) })
}

// Gather returns every member's data by team rank at the root (nil
// elsewhere).
func (t *Team) Gather(root int, data []byte) ([][]byte, error) {
	return ordered(t, func() ([][]byte, error) { return t.gather(root, data) })
}

// GatherNB starts Gather; data must not change until it completes.
func (t *Team) GatherNB(root int, data []byte) *Handle[[][]byte] {
	return startNB(t, func() ([][]byte, error) { return t.gather(root, data) })
}

// AllGather returns every member's data by team rank on every member.
func (t *Team) AllGather(data []byte) ([][]byte, error) {
	return ordered(t, func() ([][]byte, error) { return t.allGather(data) })
}

// AllGatherNB starts AllGather; data must not change until it completes.
func (t *Team) AllGatherNB(data []byte) *Handle[[][]byte] {
	return startNB(t, func() ([][]byte, error) { return t.allGather(data) })
}

// Scatter gives each member its part of the root's parts, one per member.
func (t *Team) Scatter(root int, parts [][]byte) ([]byte, error) {
	return ordered(t, func() ([]byte, error) { return t.scatter(root, parts) })
}

// ScatterNB starts Scatter; parts must not change until it completes.
func (t *Team) ScatterNB(root int, parts [][]byte) *Handle[[]byte] {
	return startNB(t, func() ([]byte, error) { return t.scatter(root, parts) })
}

// Alltoall sends block i of data, Size() equal blocks, to team rank i, and
// returns the blocks received in team rank order (MPI_Alltoall).
func (t *Team) Alltoall(data []byte) ([]byte, error) {
	return ordered(t, func() ([]byte, error) { return t.alltoall(data) })
}

// AlltoallNB starts Alltoall, split as BarrierNB is where that applies;
// data must not change until it completes.
func (t *Team) AlltoallNB(data []byte) *Handle[[]byte] {
	n := t.ticket()
	if h := split[[]byte](t, n, alltoallCall(data), data, nil, blocks{}); h != nil {
		return h
	}
	return startAt(t, n, func() ([]byte, error) { return t.alltoall(data) })
}

// blocks is the result of an all-to-all, the blocks received: the
// collective's own, not in shared memory.
type blocks struct{}

func (blocks) decode(_ *Team, v coll.Result) []byte { return v.Data }

// Alltoallv sends parts[i] to team rank i and returns the parts received in
// team rank order (MPI_Alltoallv).
func (t *Team) Alltoallv(parts [][]byte) ([][]byte, error) {
	return ordered(t, func() ([][]byte, error) { return t.alltoallv(parts) })
}

// AlltoallvNB starts Alltoallv; parts must not change until it completes.
func (t *Team) AlltoallvNB(parts [][]byte) *Handle[[][]byte] {
	return startNB(t, func() ([][]byte, error) { return t.alltoallv(parts) })
}

// Reduce combines the members' vectors, all of one length, element by element
// with op, and returns the result at the root (nil elsewhere).
func Reduce[T Word](t *Team, root int, op Op, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return reduceT(t, root, op, v, false) })
}

// ReduceNB starts Reduce, split as BarrierNB is where that applies.
func ReduceNB[T Word](t *Team, root int, op Op, v []T) *Handle[[]T] {
	return reduceNB[T](t, root, op, nil, v, false)
}

// AllReduce is Reduce whose result, the same bits, every member gets.
func AllReduce[T Word](t *Team, op Op, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return reduceT(t, 0, op, v, true) })
}

// AllReduceNB starts AllReduce, split as BarrierNB is where that applies.
func AllReduceNB[T Word](t *Team, op Op, v []T) *Handle[[]T] {
	return reduceNB[T](t, 0, op, nil, v, true)
}

// ReduceFunc is Reduce with the program's operator f, which must be
// commutative and associative, the same on every member.
func ReduceFunc[T Word](t *Team, root int, f func(a, b T) T, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return reduceFuncT(t, root, f, v, false) })
}

// ReduceFuncNB starts ReduceFunc, split as BarrierNB is where that
// applies.
func ReduceFuncNB[T Word](t *Team, root int, f func(a, b T) T, v []T) *Handle[[]T] {
	return reduceNB(t, root, coll.OpFunc, f, v, false)
}

// AllReduceFunc is AllReduce with the program's operator, as ReduceFunc.
func AllReduceFunc[T Word](t *Team, f func(a, b T) T, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return reduceFuncT(t, 0, f, v, true) })
}

// AllReduceFuncNB starts AllReduceFunc, split as BarrierNB is where that
// applies.
func AllReduceFuncNB[T Word](t *Team, f func(a, b T) T, v []T) *Handle[[]T] {
	return reduceNB(t, 0, coll.OpFunc, f, v, true)
}

// collect runs this rank's call of a collective on t, with its
// arguments (those its kind has: data, parts, a reduction's vector in data
// and its combine): on World in a job of one shared-memory group, as one
// exchange on the group's words (coll.Post), unless some rank's datum is
// too large for its slot; else, and then, over active messages. Its
// result is as collected's.
func (t *Team) collect(call coll.Call, data []byte, parts [][]byte, combine coll.Combine) (coll.Result, error) {
	onWords := t.onWords()
	c, err := t.begin(call, onWords)
	if err != nil {
		return coll.Result{}, err
	}
	if !onWords {
		return t.overMessages(c, data, parts, combine)
	}
	c.combine = settledCombine(call, combine)
	if err := c.post(t.j.words, t.postOf(call, data, parts)); err != nil {
		return coll.Result{}, c.end(err)
	}
	return t.collected(c, data, parts, combine)
}

// postOf is this rank's post of call, begun, on words.
func (t *Team) postOf(call coll.Call, data []byte, parts [][]byte) coll.Post {
	if call.Kind == coll.Barrier {
		return coll.Post{Call: call} // every rank posts the same
	}
	return t.run.Post(data, parts, maxPost)
}

// onWords reports whether the team's collectives exchange on the group's
// words: World, in a job of one shared-memory group.
func (t *Team) onWords() bool {
	w := t.j.words
	return t.whole() && w != nil && w.whole
}

// collected is the rest of collective c on words after this rank posted
// (teamCall.post): the exchange's synchronisation and reading, and the
// result; over messages where the posts did not fit. A reduction's
// result reduced for every rank (c.reduced) lies in the leader's buffer
// of shared memory, or in the call (an accumulated one), until this
// rank's next collective on the team; every other result is the
// caller's.
func (t *Team) collected(c *teamCall, data []byte, parts [][]byte, combine coll.Combine) (coll.Result, error) {
	w, call := t.j.words, c.call
	err := c.await(w)
	var posts []coll.Post
	var same bool
	if err == nil {
		posts, same, err = c.read(w, call.Kind != coll.Barrier)
	}
	if err == nil && same && call.Kind == coll.Barrier {
		// Where all posted the same, the barrier is done, no post read;
		// where one differs, Check says how.
		return coll.Result{}, c.end(nil)
	}
	if err == nil && c.reduced {
		// The result, reduced for every rank (reducePosts) in the
		// leader's buffer, or accumulated (teamCall.accumulated).
		var v []byte
		if call.Kind == coll.AllReduce || call.Root == t.me {
			v = c.result // not nil, as coll.Reduced's
		}
		return coll.Result{Data: v}, c.end(nil)
	}
	big := err == errOverMessages
	if err != nil && !big {
		return coll.Result{}, c.end(err)
	}
	if !big {
		checked := posts
		if same {
			checked = posts[:1] // the others' are the same
		}
		if big, err = coll.Check(checked); err != nil {
			return coll.Result{}, c.end(t.argErr(call, err))
		}
	}
	if !big {
		v, err := t.run.Shared(posts, combine)
		return v, c.end(err)
	}
	if err := c.enterBox(); err != nil {
		return coll.Result{}, c.end(err)
	}
	return t.overMessages(c, data, parts, combine)
}

// overMessages runs collective c over active messages (coll.Run).
func (t *Team) overMessages(c *teamCall, data []byte, parts [][]byte, combine coll.Combine) (coll.Result, error) {
	r, call := &t.run, c.call
	var v coll.Result
	var err error
	switch call.Kind {
	case coll.Barrier:
		err = r.Barrier()
	case coll.Broadcast:
		v.Data, err = r.Broadcast(data)
	case coll.Reduce:
		v.Data, err = r.Reduce(data, combine)
	case coll.AllReduce:
		v.Data, err = r.AllReduce(data, combine)
	case coll.Gather:
		v.Parts, err = r.Gather(data)
	case coll.AllGather:
		v.Parts, err = r.AllGather(data)
	case coll.Scatter:
		v.Data, err = r.Scatter(parts)
	case coll.Alltoall:
		v.Data, err = r.Alltoall(data)
	case coll.Alltoallv:
		v.Parts, err = r.Alltoallv(parts)
	case coll.Split:
		v.Split, err = r.SplitOf(data)
	}
	if err == nil && drains(call.Kind) {
		// Every message this rank sent is answered before it leaves a
		// barrier, broadcast, reduction or all-gather, so that a rank that
		// ends after it (the program's last) cannot end while another
		// waits for what it sent.
		err = t.j.ep.Drain()
	}
	return v, c.end(t.argErr(call, err))
}

// argErr is err, the error of call, wrapping ErrBadRank too where the
// call's root is not a team rank.
func (t *Team) argErr(call coll.Call, err error) error {
	if err != nil && (call.Root < 0 || call.Root >= len(t.ranks)) {
		return fmt.Errorf("%w: %w", ErrBadRank, err)
	}
	return err
}

// barrier is the body of its exported form, unordered.
func (t *Team) barrier() error {
	_, err := t.collect(coll.Call{Kind: coll.Barrier}, nil, nil, nil)
	return err
}

// broadcast is the body of its exported form, unordered.
func (t *Team) broadcast(root int, data []byte) ([]byte, error) {
	v, err := t.collect(coll.Call{Kind: coll.Broadcast, Root: root}, data, nil, nil)
	return v.Data, err
}

// gather is the body of its exported form, unordered.
func (t *Team) gather(root int, data []byte) ([][]byte, error) {
	v, err := t.collect(coll.Call{Kind: coll.Gather, Root: root}, data, nil, nil)
	return v.Parts, err
}

// allGather is the body of its exported form, unordered.
func (t *Team) allGather(data []byte) ([][]byte, error) {
	v, err := t.collect(coll.Call{Kind: coll.AllGather}, data, nil, nil)
	return v.Parts, err
}

// scatter is the body of its exported form, unordered.
func (t *Team) scatter(root int, parts [][]byte) ([]byte, error) {
	v, err := t.collect(coll.Call{Kind: coll.Scatter, Root: root}, nil, parts, nil)
	return v.Data, err
}

// alltoall is the body of its exported form, unordered.
func (t *Team) alltoall(data []byte) ([]byte, error) {
	v, err := t.collect(alltoallCall(data), data, nil, nil)
	return v.Data, err
}

// alltoallCall is the call of an all-to-all of data: every rank's of one
// length.
func alltoallCall(data []byte) coll.Call { return coll.Call{Kind: coll.Alltoall, Len: len(data)} }

// alltoallv is the body of its exported form, unordered.
func (t *Team) alltoallv(parts [][]byte) ([][]byte, error) {
	v, err := t.collect(coll.Call{Kind: coll.Alltoallv}, nil, parts, nil)
	return v.Parts, err
}
