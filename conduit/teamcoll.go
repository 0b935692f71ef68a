package conduit

// This file is the collectives of teams (team.go): the algorithms over
// teamCall's send and recv, and the calls a program makes.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
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

// alltoall is the body of its exported form, unordered.
func (t *Team) alltoall(data []byte) ([]byte, error) {
	n := len(t.ranks)
	if len(data)%n != 0 {
		return nil, fmt.Errorf("all-to-all: %d bytes do not make %d equal blocks", len(data), n)
	}
	b := len(data) / n
	if t.whole() {
		// A job that is one shared-memory group passes small blocks
		// through its slots, as an all-gather.
		if out, ok, err := t.j.wordAlltoall(data, b); ok || err != nil {
			return out, err
		}
	}
	kind, exchange := teamAlltoall, (*teamCall).alltoall
	switch {
	case !t.j.bar.bruck && n*len(data) <= treeAlltoallMax:
		kind = teamAlltoallTree
	case b <= bruckMax:
		kind, exchange = teamAlltoallBruck, (*teamCall).bruck
	}
	c, err := t.begin(kind, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	if kind == teamAlltoallTree {
		out, err := c.treeAlltoall(data, b)
		return out, c.end(err)
	}
	parts := make([][]byte, n)
	for i := range parts {
		parts[i] = data[i*b : (i+1)*b]
	}
	got, err := exchange(c, parts)
	if err != nil {
		return nil, c.end(err)
	}
	out := make([]byte, 0, len(data))
	for r, p := range got {
		if len(p) != b {
			return nil, c.end(c.mismatch(fmt.Errorf("team rank %d sent a block of %d bytes, this rank's are %d", r, len(p), b)))
		}
		out = append(out, p...)
	}
	return out, c.end(nil)
}

// alltoallv is the body of its exported form, unordered.
func (t *Team) alltoallv(parts [][]byte) ([][]byte, error) {
	if len(parts) != len(t.ranks) {
		return nil, fmt.Errorf("all-to-all-v: %d parts for a team of %d", len(parts), len(t.ranks))
	}
	c, err := t.begin(teamAlltoallv, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	out, err := c.alltoall(parts)
	return out, c.end(err)
}

// bruckMax is the largest block Alltoall sends by Bruck's algorithm.
const bruckMax = 256

// treeAlltoallMax bounds the bytes of all the members' blocks together
// (the team's size times each one's data) that an all-to-all of a crowded
// job passes through the root of its tree (treeAlltoall); larger ones run
// by Bruck's algorithm or pairwise.
const treeAlltoallMax = 256 << 10

// treeAlltoall is the all-to-all of a job where some host has more ranks
// than CPUs (where the barrier is AMTREE, and the all-gather gathers and
// broadcasts, for the same reason): each waiting rank wakes when its
// partner is scheduled, so the fewer rounds a rank waits in the better.
// Up the binomial tree of bcast rooted at team rank 0, each member passes
// its parent the data of every member of its subtree (ranks rel .. rel+s-1,
// in order, each data of n blocks of b bytes); the root then holds every
// block and sends each child, down the same tree, the blocks destined to
// its subtree's members (for each, in order, its n blocks by source), and
// each member passes its children their share of what it got. Each member
// waits for its children once and its parent once: 2(n-1) messages in
// all, against n⌈log2 n⌉ for Bruck's, whose every round wakes every rank.
func (c *teamCall) treeAlltoall(data []byte, b int) ([]byte, error) {
	n, me := len(c.t.ranks), c.t.me
	row := n * b // one member's data
	// Up: rows of this member's subtree, in member order.
	rows := append([]byte{}, data...)
	span := 1 // members in the subtree gathered so far
	mask := 1
	for ; mask < n; mask <<= 1 {
		if me&mask != 0 {
			if err := c.send(me-mask, 0, rows); err != nil {
				return nil, err
			}
			break
		}
		if child := me | mask; child < n {
			in, err := c.recv(child, 0)
			if err != nil {
				return nil, err
			}
			size := min(mask, n-child)
			if len(in) != size*row {
				return nil, c.mismatch(fmt.Errorf("team rank %d sent the blocks of %d members in %d bytes, %d bytes each here", child, size, len(in), row))
			}
			rows = append(rows, in...)
			span += size
		}
	}
	// Down: for each member of this subtree, in order, its n blocks by
	// source; the root makes it from every row.
	var cols []byte
	if me == 0 {
		cols = make([]byte, 0, n*row)
		for d := range n {
			for s := range n {
				cols = append(cols, rows[s*row+d*b:s*row+(d+1)*b]...)
			}
		}
	} else {
		in, err := c.recv(me-mask, 1)
		if err != nil {
			return nil, err
		}
		if len(in) != span*row {
			return nil, c.mismatch(fmt.Errorf("team rank %d sent the blocks of %d members in %d bytes, %d bytes each here", me-mask, span, len(in), row))
		}
		cols = in
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if child := me + mask; child < n {
			size := min(mask, n-child)
			off := (child - me) * row
			if err := c.send(child, 1, cols[off:off+size*row]); err != nil {
				return nil, err
			}
		}
	}
	return cols[:row:row], nil
}

// bruck is the all-to-all of Bruck et al. (1997): the member rotates its
// parts by its rank; in round k it sends the member 2^k after it every
// part whose index has bit k set, packed in one message, and puts what
// the member 2^k before it sends in their place; a last rotation puts the
// parts in team rank order. Each member sends ⌈log2 n⌉ messages.
func (c *teamCall) bruck(parts [][]byte) ([][]byte, error) {
	n, me := len(c.t.ranks), c.t.me
	tmp := make([][]byte, n)
	for i := range tmp {
		tmp[i] = parts[(me+i)%n]
	}
	var blob []byte
	for k, step := 1, 0; k < n; k, step = k<<1, step+1 {
		blob = blob[:0]
		for i := range tmp {
			if i&k != 0 {
				blob = varenc.AppendBytes(blob, tmp[i])
			}
		}
		if err := c.send((me+k)%n, step, blob); err != nil {
			return nil, err
		}
		from := (me - k + n) % n
		in, err := c.recv(from, step)
		if err != nil {
			return nil, err
		}
		d := varenc.Decoder{B: in}
		for i := range tmp {
			if i&k != 0 {
				tmp[i] = d.Bytes()
			}
		}
		if d.Bad || len(d.B) != 0 {
			return nil, c.mismatch(fmt.Errorf("team rank %d sent a malformed all-to-all round of %d bytes", from, len(in)))
		}
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = tmp[(me-i+n)%n]
	}
	out[me] = append([]byte{}, out[me]...)
	return out, nil
}

// alltoall sends parts[i] to each other member i, starting with the next
// rank so that the members do not all send to one at once, and receives
// theirs.
func (c *teamCall) alltoall(parts [][]byte) ([][]byte, error) {
	n, me := len(c.t.ranks), c.t.me
	for i := 1; i < n; i++ {
		r := (me + i) % n
		if err := c.send(r, 0, parts[r]); err != nil {
			return nil, err
		}
	}
	out := make([][]byte, n)
	out[me] = append([]byte{}, parts[me]...)
	for i := 1; i < n; i++ {
		r := (me - i + n) % n
		b, err := c.recv(r, 0)
		if err != nil {
			return nil, err
		}
		out[r] = b
	}
	return out, nil
}

// amoOps is the amo operation of each reduction operator.
var amoOps = [...]amo.Op{Sum: amo.Add, Min: amo.Min, Max: amo.Max, Prod: amo.Mult, And: amo.And, Or: amo.Or, Xor: amo.Xor}

// checkOp returns an error when op does not apply to elements of kind k.
func checkOp(op Op, k amo.Kind) error {
	if op == 0 || int(op) >= len(amoOps) {
		return fmt.Errorf("%w: %v; accepted: Sum, Min, Max, Prod, And, Or, Xor", ErrReduceOp, op)
	}
	if k.IsFloat() && (op == And || op == Or || op == Xor) {
		return fmt.Errorf("%w: %v on %v: bitwise operators apply to integers only", ErrReduceOp, op, k)
	}
	return nil
}

// reduceT is the body of its exported form, unordered.
func reduceT[T Word](t *Team, root int, op Op, v []T) ([]T, error) {
	k := kindOf[T]()
	if err := checkOp(op, k); err != nil {
		return nil, err
	}
	if t.whole() && op <= Max && (k == amo.Uint64 || k == amo.Float64) {
		return jobReduce(t.j, root, op, v, false)
	}
	out, err := t.reduceBytes(teamReduce, root, op, k, encodeVec(v), func(acc, in []byte) ([]byte, error) {
		return acc, combineVec(op, k, acc, in)
	})
	return decodeVec[T](out), err
}

// allReduceT is the body of its exported form, unordered.
func allReduceT[T Word](t *Team, op Op, v []T) ([]T, error) {
	k := kindOf[T]()
	if err := checkOp(op, k); err != nil {
		return nil, err
	}
	if t.whole() && op <= Max && (k == amo.Uint64 || k == amo.Float64) {
		return jobReduce(t.j, 0, op, v, true)
	}
	out, err := t.reduceBytes(teamAllReduce, 0, op, k, encodeVec(v), func(acc, in []byte) ([]byte, error) {
		return acc, combineVec(op, k, acc, in)
	})
	return decodeVec[T](out), err
}

// reduceFuncT is the body of its exported form, unordered.
func reduceFuncT[T Word](t *Team, root int, f func(a, b T) T, v []T) ([]T, error) {
	out, err := t.reduceBytes(teamReduce, root, opFunc, kindOf[T](), encodeVec(v), funcCombine(f))
	return decodeVec[T](out), err
}

// allReduceFuncT is the body of its exported form, unordered.
func allReduceFuncT[T Word](t *Team, f func(a, b T) T, v []T) ([]T, error) {
	out, err := t.reduceBytes(teamAllReduce, 0, opFunc, kindOf[T](), encodeVec(v), funcCombine(f))
	return decodeVec[T](out), err
}

// jobReduce runs a reduction of uint64 or float64 elements (T is one of
// them) with Sum, Min or Max over the Job's own collectives.
func jobReduce[T Word](j *Job, root int, op Op, v []T, all bool) ([]T, error) {
	switch x := any(v).(type) {
	case []uint64:
		var r []uint64
		var err error
		if all {
			r, err = j.AllReduceUint64(op, x)
		} else {
			r, err = j.ReduceUint64(root, op, x)
		}
		return any(r).([]T), err
	case []float64:
		var r []float64
		var err error
		if all {
			r, err = j.AllReduceFloat64(op, x)
		} else {
			r, err = j.ReduceFloat64(root, op, x)
		}
		return any(r).([]T), err
	}
	panic("conduit: jobReduce of " + kindOf[T]().String())
}

// reduceBytes runs a reduction of the packed vector acc on the team: of
// kind teamReduce to root, or teamAllReduce (root 0) to every member.
func (t *Team) reduceBytes(kind, root int, op Op, k amo.Kind, acc []byte, combine func(acc, in []byte) ([]byte, error)) ([]byte, error) {
	all := kind == teamAllReduce
	c, err := t.begin(kind, op, uint8(k), root)
	if err != nil {
		return nil, err
	}
	checked := func(acc, in []byte) ([]byte, error) {
		if len(in) != len(acc) {
			return nil, fmt.Errorf("a vector of %d elements, this rank's has %d", len(in)/k.Size(), len(acc)/k.Size())
		}
		return combine(acc, in)
	}
	out, err := c.reduce(root, acc, 0, checked)
	if err == nil && all {
		out, err = c.bcast(0, out, 1)
		if err == nil && len(out) != len(acc) {
			err = c.mismatch(fmt.Errorf("a result of %d elements, this rank's vector has %d", len(out)/k.Size(), len(acc)/k.Size()))
		}
	}
	return out, c.end(err)
}

// combineVec sets acc[i] = acc[i] op in[i] for every element of kind k;
// the two are the same length.
func combineVec(op Op, k amo.Kind, acc, in []byte) error {
	aop := amoOps[op]
	switch k.Size() {
	case 4:
		for i := 0; i+4 <= len(acc); i += 4 {
			r := amo.Compute(k, aop, uint64(binary.LittleEndian.Uint32(acc[i:])), uint64(binary.LittleEndian.Uint32(in[i:])), 0)
			binary.LittleEndian.PutUint32(acc[i:], uint32(r))
		}
	default:
		for i := 0; i+8 <= len(acc); i += 8 {
			r := amo.Compute(k, aop, binary.LittleEndian.Uint64(acc[i:]), binary.LittleEndian.Uint64(in[i:]), 0)
			binary.LittleEndian.PutUint64(acc[i:], r)
		}
	}
	return nil
}

// funcCombine combines packed vectors with f element by element.
func funcCombine[T Word](f func(a, b T) T) func(acc, in []byte) ([]byte, error) {
	return func(acc, in []byte) ([]byte, error) {
		a, b := decodeVec[T](acc), decodeVec[T](in)
		for i := range a {
			a[i] = f(a[i], b[i])
		}
		return encodeVec(a), nil
	}
}

// kindOf is the amo kind of T.
func kindOf[T Word]() amo.Kind {
	var zero T
	switch any(zero).(type) {
	case int32:
		return amo.Int32
	case uint32:
		return amo.Uint32
	case int64:
		return amo.Int64
	case uint64:
		return amo.Uint64
	case float32:
		return amo.Float32
	}
	return amo.Float64
}

// encodeVec packs v little-endian, 4 or 8 bytes an element.
func encodeVec[T Word](v []T) []byte {
	b := make([]byte, 0, kindOf[T]().Size()*len(v))
	switch x := any(v).(type) {
	case []int32:
		for _, e := range x {
			b = binary.LittleEndian.AppendUint32(b, uint32(e))
		}
	case []uint32:
		for _, e := range x {
			b = binary.LittleEndian.AppendUint32(b, e)
		}
	case []int64:
		for _, e := range x {
			b = binary.LittleEndian.AppendUint64(b, uint64(e))
		}
	case []uint64:
		for _, e := range x {
			b = binary.LittleEndian.AppendUint64(b, e)
		}
	case []float32:
		for _, e := range x {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(e))
		}
	case []float64:
		for _, e := range x {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(e))
		}
	}
	return b
}

// decodeVec unpacks what encodeVec packed; nil for nil.
func decodeVec[T Word](b []byte) []T {
	if b == nil {
		return nil
	}
	v := make([]T, len(b)/kindOf[T]().Size())
	switch x := any(v).(type) {
	case []int32:
		for i := range x {
			x[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []uint32:
		for i := range x {
			x[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
	case []int64:
		for i := range x {
			x[i] = int64(binary.LittleEndian.Uint64(b[8*i:]))
		}
	case []uint64:
		for i := range x {
			x[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
	case []float32:
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case []float64:
		for i := range x {
			x[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return v
}
