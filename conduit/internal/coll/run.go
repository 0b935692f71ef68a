package coll

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// Run is one collective of one member: its call, over its link, as the
// team's plan says.
type Run struct {
	l Link
	c Call
	p *Plan
	// acc holds a reduction's result from Shared until the run's next
	// reduction, which reuses it: no allocation a reduction.
	acc []byte
	// kids holds a member's children in a tree (Plan.Tree) while it
	// passes a broadcast down or a reduction up.
	kids []int
}

// New returns the collective c of the member at the end of l.
func New(l Link, p *Plan, c Call) *Run { return &Run{l: l, c: c, p: p} }

// Reset makes r the collective c of the member at the end of l, as New
// would, reusing r and its buffers (a reduction's result, a tree's
// children).
func (r *Run) Reset(l Link, p *Plan, c Call) {
	acc, kids := r.acc, r.kids
	*r = Run{} // then field by field: a literal would be built, then copied
	r.l, r.c, r.p, r.acc, r.kids = l, c, p, acc, kids
}

// Refuse fails the collective on every member for this member's own
// arguments, which why describes.
func (r *Run) Refuse(format string, a ...any) error {
	return r.l.Fail(Failure{Arg: true, Why: fmt.Sprintf("team rank %d's %v: ", r.l.Rank(), r.c.Kind) + fmt.Sprintf(format, a...)})
}

// check refuses a root or operator that no member can accept.
func (r *Run) check() error {
	if n := r.l.Size(); r.c.Root < 0 || r.c.Root >= n {
		return r.Refuse("root %d: accepted: a team rank from 0 to %d", r.c.Root, n-1)
	}
	if (r.c.Kind == Reduce || r.c.Kind == AllReduce) && r.c.Op != OpFunc {
		if err := CheckOp(r.c.Op, r.c.Elem); err != nil {
			return r.Refuse("%v", err)
		}
	}
	return nil
}

func (r *Run) send(to, step int, data []byte) error {
	return r.l.Send(to, Header{Call: r.c, Step: step}, data)
}

// recv waits for step's message from team rank from; a message of
// another call (from any member) fails the collective on every member.
func (r *Run) recv(from, step int) ([]byte, error) {
	src, h, b, err := r.l.Recv(from, r.c)
	if err != nil {
		return nil, err
	}
	if h.Call != r.c {
		return nil, r.Mismatch("team rank %d called %v, team rank %d %v", src, h.Call, r.l.Rank(), r.c)
	}
	if h.Step != step || src != from {
		return nil, r.Mismatch("team rank %d sent step %d of %v where team rank %d waits for step %d from team rank %d",
			src, h.Step, h.Call, r.l.Rank(), step, from)
	}
	return b, nil
}

// Mismatch fails the collective on every member for a difference between
// the members' calls, which why describes.
func (r *Run) Mismatch(format string, a ...any) error {
	return r.l.Fail(Failure{Why: fmt.Sprintf(format, a...)})
}

// Barrier returns once every member has entered it: a dissemination
// (⌈log2 n⌉ rounds), a gather and release over the tree, or over a star.
func (r *Run) Barrier() error {
	if err := r.check(); err != nil {
		return err
	}
	if r.p != nil && r.p.Central {
		return r.star()
	}
	if r.p != nil && r.p.TreeBarrier {
		acc, err := r.reduce(0, nil, 0, func(acc, _ []byte) ([]byte, error) { return acc, nil })
		if err != nil {
			return err
		}
		_, err = r.bcast(0, acc, 1)
		return err
	}
	n, me := r.l.Size(), r.l.Rank()
	for k, step := 1, 0; k < n; k, step = k<<1, step+1 {
		if err := r.send((me+k)%n, step, nil); err != nil {
			return err
		}
		if _, err := r.recv((me-k+n)%n, step); err != nil {
			return err
		}
	}
	return nil
}

// star is the central barrier: every member tells team rank 0, which
// then releases each.
func (r *Run) star() error {
	n, me := r.l.Size(), r.l.Rank()
	if me != 0 {
		if err := r.send(0, 0, nil); err != nil {
			return err
		}
		_, err := r.recv(0, 1)
		return err
	}
	for m := 1; m < n; m++ {
		if _, err := r.recv(m, 0); err != nil {
			return err
		}
	}
	for m := 1; m < n; m++ {
		if err := r.send(m, 1, nil); err != nil {
			return err
		}
	}
	return nil
}

// Broadcast returns the root's data on every member (a copy at the root).
func (r *Run) Broadcast(data []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if r.l.Rank() == r.c.Root {
		data = bytes.Clone(data)
		if data == nil {
			data = []byte{}
		}
	}
	return r.bcast(r.c.Root, data, 0)
}

// bcast passes data down the tree rooted at root.
func (r *Run) bcast(root int, data []byte, step int) ([]byte, error) {
	parent, children := r.p.Tree(root, r.l.Rank(), r.l.Size(), r.kids)
	r.kids = children
	if parent >= 0 {
		b, err := r.recv(parent, step)
		if err != nil {
			return nil, err
		}
		data = b
	}
	for _, c := range slices.Backward(children) { // the largest subtree first
		if err := r.send(c, step, data); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// reduce combines the members' acc up the tree rooted at root: the root
// returns the combination, the others nil. combine may overwrite acc.
func (r *Run) reduce(root int, acc []byte, step int, combine func(acc, in []byte) ([]byte, error)) ([]byte, error) {
	parent, children := r.p.Tree(root, r.l.Rank(), r.l.Size(), r.kids)
	r.kids = children
	for _, c := range children {
		in, err := r.recv(c, step)
		if err != nil {
			return nil, err
		}
		if acc, err = combine(acc, in); err != nil {
			return nil, r.Mismatch("from team rank %d: %v", c, err)
		}
	}
	if parent >= 0 {
		return nil, r.send(parent, step, acc)
	}
	return acc, nil
}

// Combine combines in into acc element by element, both of the same
// length: a reduction's operator.
type Combine func(acc, in []byte)

// Reduce combines every member's vector acc (which it may overwrite) with
// combine up the tree to the root, which returns the result; the others
// return nil. The tree fixes the order of a float sum by the team's size,
// plan and root.
func (r *Run) Reduce(acc []byte, combine Combine) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return r.reduce(r.c.Root, acc, 0, r.checked(combine))
}

// AllReduce is Reduce to team rank 0 and a broadcast of the result.
func (r *Run) AllReduce(acc []byte, combine Combine) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	n := len(acc)
	out, err := r.reduce(0, acc, 0, r.checked(combine))
	if err != nil {
		return nil, err
	}
	if out, err = r.bcast(0, out, 1); err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, r.Mismatch("team rank 0 sent a result of %d bytes, team rank %d's vector has %d", len(out), r.l.Rank(), n)
	}
	return out, nil
}

func (r *Run) checked(combine Combine) func(acc, in []byte) ([]byte, error) {
	return func(acc, in []byte) ([]byte, error) {
		if len(in) != len(acc) {
			return nil, fmt.Errorf("a vector of %d bytes, team rank %d's has %d", len(in), r.l.Rank(), len(acc))
		}
		combine(acc, in)
		return acc, nil
	}
}

// Gather returns, at the root, every member's data by team rank (nil
// elsewhere).
func (r *Run) Gather(data []byte) ([][]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return r.gather(r.c.Root, data, 0)
}

func (r *Run) gather(root int, data []byte, step int) ([][]byte, error) {
	if r.l.Rank() != root {
		return nil, r.send(root, step, data)
	}
	out := make([][]byte, r.l.Size())
	out[root] = bytes.Clone(data)
	for m := range out {
		if m == root {
			continue
		}
		b, err := r.recv(m, step)
		if err != nil {
			return nil, err
		}
		out[m] = b
	}
	return out, nil
}

// AllGather returns every member's data, by team rank, on every member:
// Bruck's algorithm (⌈log2 n⌉ rounds), or a gather up the tree and a
// broadcast of the whole (TreeGather).
func (r *Run) AllGather(data []byte) ([][]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if r.p != nil && r.p.TreeGather {
		return r.treeAllGather(data)
	}
	n, me := r.l.Size(), r.l.Rank()
	have := [][]byte{bytes.Clone(data)} // the parts of me, me+1, ...
	for step, d := 0, 1; d < n; step, d = step+1, 2*d {
		cnt := min(d, n-d)
		var msg []byte
		for _, p := range have[:cnt] {
			msg = varenc.AppendBytes(msg, p)
		}
		if err := r.send((me-d+n)%n, step, msg); err != nil {
			return nil, err
		}
		from := (me + d) % n
		in, err := r.recv(from, step)
		if err != nil {
			return nil, err
		}
		dec := varenc.Decoder{B: in}
		for range cnt {
			have = append(have, dec.Bytes())
		}
		if dec.Bad || len(dec.B) != 0 {
			return nil, r.Mismatch("team rank %d sent a malformed round %d of %d bytes", from, step, len(in))
		}
	}
	out := make([][]byte, n)
	for i, p := range have[:n] {
		out[(me+i)%n] = p
	}
	return out, nil
}

// treeAllGather gathers every member's part, framed with its team rank,
// up the tree to team rank 0, which broadcasts the whole down it.
func (r *Run) treeAllGather(data []byte) ([][]byte, error) {
	n := r.l.Size()
	own := varenc.AppendBytes(varenc.AppendUint(nil, uint64(r.l.Rank())), data)
	all, err := r.reduce(0, own, 0, func(acc, in []byte) ([]byte, error) { return append(acc, in...), nil })
	if err != nil {
		return nil, err
	}
	if all, err = r.bcast(0, all, 1); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	seen := make([]bool, n)
	dec := varenc.Decoder{B: all}
	for range n {
		u := dec.Uint()
		if dec.Bad || u >= uint64(n) || seen[u] {
			return nil, r.Mismatch("a malformed all-gather from team rank 0")
		}
		seen[u] = true
		if out[u] = dec.Bytes(); dec.Bad {
			return nil, r.Mismatch("a malformed all-gather from team rank 0")
		}
	}
	if len(dec.B) != 0 {
		return nil, r.Mismatch("a malformed all-gather from team rank 0: %d bytes after the parts", len(dec.B))
	}
	return out, nil
}

// Scatter gives each member parts[its team rank] of the root's parts,
// which hold one part for each member; a root with another count refuses
// the call on every member.
func (r *Run) Scatter(parts [][]byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	me, root := r.l.Rank(), r.c.Root
	if me != root {
		return r.recv(root, 0)
	}
	if len(parts) != r.l.Size() {
		return nil, r.Refuse("%d parts for a team of %d", len(parts), r.l.Size())
	}
	for m, p := range parts {
		if m != root {
			if err := r.send(m, 0, p); err != nil {
				return nil, err
			}
		}
	}
	return bytes.Clone(parts[root]), nil
}

// Split runs the members' part of a split into sub-teams, as
// MPI_Comm_split: the team ranks of this member's sub-team, ordered by key
// and then by team rank, and this member's place among them; none for a
// negative color.
func (r *Run) Split(color, key int) (SplitResult, error) { return r.SplitOf(SplitDatum(color, key)) }

// SplitOf is Split of the member's SplitDatum.
func (r *Run) SplitOf(datum []byte) (SplitResult, error) {
	all, err := r.AllGather(datum)
	if err != nil {
		return SplitResult{}, err
	}
	return r.splitOf(all)
}

// splitOf is a Split's result from every member's SplitDatum.
func (r *Run) splitOf(all [][]byte) (SplitResult, error) {
	me := r.l.Rank()
	if len(all[me]) != 16 {
		return SplitResult{}, r.Mismatch("team rank %d's split datum has %d bytes", me, len(all[me]))
	}
	color := int(int64(binary.LittleEndian.Uint64(all[me])))
	type member struct{ key, rank int }
	var ms []member
	for m, b := range all {
		if len(b) != 16 {
			return SplitResult{}, r.Mismatch("team rank %d sent %d bytes to a split", m, len(b))
		}
		if color >= 0 && int(int64(binary.LittleEndian.Uint64(b))) == color {
			ms = append(ms, member{int(int64(binary.LittleEndian.Uint64(b[8:]))), m})
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank)) })
	var res SplitResult
	for i, m := range ms {
		res.Members = append(res.Members, m.rank)
		if m.rank == me {
			res.Me = i
		}
	}
	return res, nil
}
