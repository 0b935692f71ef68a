package conduit

// This file is the collectives of teams (team.go): the algorithms over
// teamCall's send and recv, and the calls a program makes.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// Barrier returns once every member of the team has entered it, as
// Job.Barrier does for the whole job: a member enters once every request
// it sent has been answered, so a Put completed before it is visible to
// every member after it. On a sub-team it is a dissemination barrier
// (⌈log2 n⌉ rounds of messages).
func (t *Team) Barrier() error {
	_, err := ordered(t, func() (struct{}, error) { return struct{}{}, t.barrier() })
	return err
}

// BarrierContext is Barrier bounded by ctx: when ctx ends first it returns
// ctx's error, and the barrier goes on in the background (the other
// members need this rank's part of it), taking its place in this rank's
// order of calls on the team as a BarrierNB would.
func (t *Team) BarrierContext(ctx context.Context) error {
	_, err := t.BarrierNB().WaitContext(ctx)
	return err
}

// BarrierNB starts Barrier.
func (t *Team) BarrierNB() *Handle[struct{}] {
	return startNB(t, func() (struct{}, error) { return struct{}{}, t.barrier() })
}

// Broadcast returns the root's data on every member (the root's own data
// is returned to it as a copy), as Job.Broadcast does: down a binomial
// tree of the team's ranks rooted at root.
func (t *Team) Broadcast(root int, data []byte) ([]byte, error) {
	return ordered(t, func() ([]byte, error) { return t.broadcast(root, data) })
}

// BroadcastNB starts Broadcast; data must not change until it completes.
func (t *Team) BroadcastNB(root int, data []byte) *Handle[[]byte] {
	return startNB(t, func() ([]byte, error) { return t.broadcast(root, data) })
}

// BroadcastContext is Broadcast bounded by ctx, as BarrierContext: when
// ctx ends first it returns ctx's error, and the broadcast goes on in the
// background with a copy of data.
func (t *Team) BroadcastContext(ctx context.Context, root int, data []byte) ([]byte, error) {
	return t.BroadcastNB(root, bytes.Clone(data)).WaitContext(ctx)
}

// Gather returns, at the root, every member's data indexed by team rank
// (nil elsewhere): each member sends its data to the root.
func (t *Team) Gather(root int, data []byte) ([][]byte, error) {
	return ordered(t, func() ([][]byte, error) { return t.gather(root, data) })
}

// GatherNB starts Gather; data must not change until it completes.
func (t *Team) GatherNB(root int, data []byte) *Handle[[][]byte] {
	return startNB(t, func() ([][]byte, error) { return t.gather(root, data) })
}

// GatherContext is Gather bounded by ctx, as BroadcastContext.
func (t *Team) GatherContext(ctx context.Context, root int, data []byte) ([][]byte, error) {
	return t.GatherNB(root, bytes.Clone(data)).WaitContext(ctx)
}

// AllGather returns every member's data, indexed by team rank, on every
// member, as Job.AllGather does: on a sub-team, a gather to team rank 0
// and a broadcast of the whole.
func (t *Team) AllGather(data []byte) ([][]byte, error) {
	return ordered(t, func() ([][]byte, error) { return t.allGather(data) })
}

// AllGatherNB starts AllGather; data must not change until it completes.
func (t *Team) AllGatherNB(data []byte) *Handle[[][]byte] {
	return startNB(t, func() ([][]byte, error) { return t.allGather(data) })
}

// AllGatherContext is AllGather bounded by ctx, as BroadcastContext.
func (t *Team) AllGatherContext(ctx context.Context, data []byte) ([][]byte, error) {
	return t.AllGatherNB(bytes.Clone(data)).WaitContext(ctx)
}

// Scatter gives each member parts[its team rank] of the root's parts,
// which must hold one part for each member (parts is read at the root
// only): the root sends each member its part.
func (t *Team) Scatter(root int, parts [][]byte) ([]byte, error) {
	return ordered(t, func() ([]byte, error) { return t.scatter(root, parts) })
}

// ScatterNB starts Scatter; parts must not change until it completes.
func (t *Team) ScatterNB(root int, parts [][]byte) *Handle[[]byte] {
	return startNB(t, func() ([]byte, error) { return t.scatter(root, parts) })
}

// ScatterContext is Scatter bounded by ctx, as BroadcastContext (with a
// copy of parts).
func (t *Team) ScatterContext(ctx context.Context, root int, parts [][]byte) ([]byte, error) {
	return t.ScatterNB(root, cloneParts(parts)).WaitContext(ctx)
}

// Alltoall exchanges equal blocks between every pair of members: data
// holds Size() blocks of len(data)/Size() bytes, block i for team rank i,
// and the result holds the block each member sent this one, in team rank
// order (MPI_Alltoall). Every member passes as many bytes. On the whole
// job, when its ranks are one shared-memory group and each rank's blocks
// fit a slot together (maxSlotPart bytes), they pass through the
// all-gather's slots in shared memory, with no message; a rank that calls
// AllGather meanwhile makes every rank's call fail with
// ErrCollectiveMismatch. Otherwise blocks of up to bruckMax bytes go by
// Bruck's algorithm (⌈log2 n⌉ messages a member, each carrying about half
// the blocks, as Open MPI and MPICH do for small blocks); larger ones each
// go straight to their member.
func (t *Team) Alltoall(data []byte) ([]byte, error) {
	return ordered(t, func() ([]byte, error) { return t.alltoall(data) })
}

// AlltoallNB starts Alltoall; data must not change until it completes.
func (t *Team) AlltoallNB(data []byte) *Handle[[]byte] {
	return startNB(t, func() ([]byte, error) { return t.alltoall(data) })
}

// AlltoallContext is Alltoall bounded by ctx, as BroadcastContext.
func (t *Team) AlltoallContext(ctx context.Context, data []byte) ([]byte, error) {
	return t.AlltoallNB(bytes.Clone(data)).WaitContext(ctx)
}

// Alltoallv exchanges parts of any sizes between every pair of members:
// parts[i] goes to team rank i, and the result holds, in team rank order,
// what each member sent this one (MPI_Alltoallv).
func (t *Team) Alltoallv(parts [][]byte) ([][]byte, error) {
	return ordered(t, func() ([][]byte, error) { return t.alltoallv(parts) })
}

// AlltoallvNB starts Alltoallv; parts must not change until it completes.
func (t *Team) AlltoallvNB(parts [][]byte) *Handle[[][]byte] {
	return startNB(t, func() ([][]byte, error) { return t.alltoallv(parts) })
}

// AlltoallvContext is Alltoallv bounded by ctx, as BroadcastContext (with
// a copy of parts).
func (t *Team) AlltoallvContext(ctx context.Context, parts [][]byte) ([][]byte, error) {
	return t.AlltoallvNB(cloneParts(parts)).WaitContext(ctx)
}

// cloneParts copies parts and each part, for a collective that may outlive
// its caller's wait.
func cloneParts(parts [][]byte) [][]byte {
	out := make([][]byte, len(parts))
	for i, p := range parts {
		out[i] = bytes.Clone(p)
	}
	return out
}

// Reduce combines the vectors of every member of t element by element
// with op and returns the result at the root (nil elsewhere); every member
// passes a vector of the same length. It runs up a binomial tree of the
// team's ranks (on the whole job, uint64 and float64 vectors with Sum, Min
// and Max take Job.ReduceUint64's and ReduceFloat64's way), so the order
// in which a float sum adds is fixed by the team's size and root, not by
// rank order. Integers wrap; float Min and Max follow Go's min and max.
func Reduce[T Word](t *Team, root int, op Op, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return reduceT(t, root, op, v) })
}

// ReduceNB starts Reduce; v must not change until it completes.
func ReduceNB[T Word](t *Team, root int, op Op, v []T) *Handle[[]T] {
	return startNB(t, func() ([]T, error) { return reduceT(t, root, op, v) })
}

// ReduceContext is Reduce bounded by ctx, as BroadcastContext (with a copy
// of v).
func ReduceContext[T Word](ctx context.Context, t *Team, root int, op Op, v []T) ([]T, error) {
	return ReduceNB(t, root, op, slices.Clone(v)).WaitContext(ctx)
}

// AllReduce is Reduce whose result every member gets: a reduction to team
// rank 0 and a broadcast from it.
func AllReduce[T Word](t *Team, op Op, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return allReduceT(t, op, v) })
}

// AllReduceNB starts AllReduce; v must not change until it completes.
func AllReduceNB[T Word](t *Team, op Op, v []T) *Handle[[]T] {
	return startNB(t, func() ([]T, error) { return allReduceT(t, op, v) })
}

// AllReduceContext is AllReduce bounded by ctx, as ReduceContext.
func AllReduceContext[T Word](ctx context.Context, t *Team, op Op, v []T) ([]T, error) {
	return AllReduceNB(t, op, slices.Clone(v)).WaitContext(ctx)
}

// ReduceFunc is Reduce with the program's own operator f, which must be
// commutative and associative (the tree combines in an order of its
// own); every member passes the same f.
func ReduceFunc[T Word](t *Team, root int, f func(a, b T) T, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return reduceFuncT(t, root, f, v) })
}

// ReduceFuncNB starts ReduceFunc; v must not change until it completes.
func ReduceFuncNB[T Word](t *Team, root int, f func(a, b T) T, v []T) *Handle[[]T] {
	return startNB(t, func() ([]T, error) { return reduceFuncT(t, root, f, v) })
}

// ReduceFuncContext is ReduceFunc bounded by ctx, as ReduceContext.
func ReduceFuncContext[T Word](ctx context.Context, t *Team, root int, f func(a, b T) T, v []T) ([]T, error) {
	return ReduceFuncNB(t, root, f, slices.Clone(v)).WaitContext(ctx)
}

// AllReduceFunc is AllReduce with the program's own operator, as
// ReduceFunc.
func AllReduceFunc[T Word](t *Team, f func(a, b T) T, v []T) ([]T, error) {
	return ordered(t, func() ([]T, error) { return allReduceFuncT(t, f, v) })
}

// AllReduceFuncNB starts AllReduceFunc; v must not change until it completes.
func AllReduceFuncNB[T Word](t *Team, f func(a, b T) T, v []T) *Handle[[]T] {
	return startNB(t, func() ([]T, error) { return allReduceFuncT(t, f, v) })
}

// AllReduceFuncContext is AllReduceFunc bounded by ctx, as ReduceContext.
func AllReduceFuncContext[T Word](ctx context.Context, t *Team, f func(a, b T) T, v []T) ([]T, error) {
	return AllReduceFuncNB(t, f, slices.Clone(v)).WaitContext(ctx)
}

// whole reports whether t is the whole job, whose collectives the Job
// runs itself.
func (t *Team) whole() bool { return t.index == nil }

// barrier is the body of its exported form, unordered.
func (t *Team) barrier() error {
	if t.whole() {
		return t.j.Barrier()
	}
	c, err := t.begin(teamBarrier, 0, 0, 0)
	if err != nil {
		return err
	}
	return c.end(c.barrier())
}

func (c *teamCall) barrier() error {
	if err := c.t.j.ep.Drain(); err != nil {
		return err
	}
	n, me := len(c.t.ranks), c.t.me
	for k, step := 1, 0; k < n; k, step = k<<1, step+1 {
		if err := c.send((me+k)%n, step, nil); err != nil {
			return err
		}
		if _, err := c.recv((me-k+n)%n, step); err != nil {
			return err
		}
	}
	return nil
}

// broadcast is the body of its exported form, unordered.
func (t *Team) broadcast(root int, data []byte) ([]byte, error) {
	if t.whole() {
		return t.j.Broadcast(root, data)
	}
	c, err := t.begin(teamBroadcast, 0, 0, root)
	if err != nil {
		return nil, err
	}
	if t.me == root {
		data = append([]byte{}, data...)
	}
	out, err := c.bcast(root, data, 0)
	return out, c.end(err)
}

// bcast passes blob down the binomial tree of the team rooted at root:
// the root's blob, which every member returns.
func (c *teamCall) bcast(root int, blob []byte, step int) ([]byte, error) {
	n := len(c.t.ranks)
	rel := (c.t.me - root + n) % n
	mask := 1
	for ; mask < n; mask <<= 1 {
		if rel&mask != 0 {
			b, err := c.recv((rel-mask+root)%n, step)
			if err != nil {
				return nil, err
			}
			blob = b
			break
		}
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if rel+mask < n {
			if err := c.send((rel+mask+root)%n, step, blob); err != nil {
				return nil, err
			}
		}
	}
	return blob, nil
}

// reduce combines the members' acc up the binomial tree of bcast: the
// root returns the combination of all, the others nil. combine may
// overwrite its first argument.
func (c *teamCall) reduce(root int, acc []byte, step int, combine func(acc, in []byte) ([]byte, error)) ([]byte, error) {
	n := len(c.t.ranks)
	rel := (c.t.me - root + n) % n
	for mask := 1; mask < n; mask <<= 1 {
		if rel&mask != 0 {
			return nil, c.send((rel-mask+root)%n, step, acc)
		}
		if src := rel | mask; src < n {
			in, err := c.recv((src+root)%n, step)
			if err != nil {
				return nil, err
			}
			if acc, err = combine(acc, in); err != nil {
				return nil, c.mismatch(fmt.Errorf("from team rank %d: %v", (src+root)%n, err))
			}
		}
	}
	return acc, nil
}

// gather is the body of its exported form, unordered.
func (t *Team) gather(root int, data []byte) ([][]byte, error) {
	c, err := t.begin(teamGather, 0, 0, root)
	if err != nil {
		return nil, err
	}
	if w := t.j.bar.words; t.whole() && w != nil && w.whole {
		out, err := c.wordGather(w, root, data)
		return out, c.end(err)
	}
	out, err := c.gather(root, data, 0)
	return out, c.end(err)
}

func (c *teamCall) gather(root int, data []byte, step int) ([][]byte, error) {
	if c.t.me != root {
		return nil, c.send(root, step, data)
	}
	out := make([][]byte, len(c.t.ranks))
	out[root] = append([]byte{}, data...)
	for r := range out {
		if r == root {
			continue
		}
		b, err := c.recv(r, step)
		if err != nil {
			return nil, err
		}
		out[r] = b
	}
	return out, nil
}

// allGather is the body of its exported form, unordered.
func (t *Team) allGather(data []byte) ([][]byte, error) {
	if t.whole() {
		return t.j.AllGather(data)
	}
	c, err := t.begin(teamAllGather, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	out, err := c.allGather(data)
	return out, c.end(err)
}

func (c *teamCall) allGather(data []byte) ([][]byte, error) {
	parts, err := c.gather(0, data, 0)
	if err != nil {
		return nil, err
	}
	var blob []byte
	if c.t.me == 0 {
		for _, p := range parts {
			blob = varenc.AppendBytes(blob, p)
		}
	}
	if blob, err = c.bcast(0, blob, 1); err != nil {
		return nil, err
	}
	if c.t.me == 0 {
		return parts, nil
	}
	d := varenc.Decoder{B: blob}
	out := make([][]byte, len(c.t.ranks))
	for i := range out {
		out[i] = d.Bytes()
	}
	if d.Bad || len(d.B) != 0 {
		return nil, c.mismatch(fmt.Errorf("a malformed all-gather of %d bytes", len(blob)))
	}
	return out, nil
}

// scatter is the body of its exported form, unordered.
func (t *Team) scatter(root int, parts [][]byte) ([]byte, error) {
	if t.me == root && len(parts) != len(t.ranks) {
		return nil, fmt.Errorf("scatter: %d parts for a team of %d", len(parts), len(t.ranks))
	}
	c, err := t.begin(teamScatter, 0, 0, root)
	if err != nil {
		return nil, err
	}
	if t.me != root {
		b, err := c.recv(root, 0)
		return b, c.end(err)
	}
	for r, p := range parts {
		if r == root {
			continue
		}
		if err := c.send(r, 0, p); err != nil {
			return nil, c.end(err)
		}
	}
	return append([]byte{}, parts[root]...), c.end(nil)
}
