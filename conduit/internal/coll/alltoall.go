package coll

import (
	"bytes"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// Alltoall exchanges equal blocks between every pair of members: data
// holds Size() blocks, block i for team rank i, and the result the block
// each member sent this one, by team rank (MPI_Alltoall). The call's Len
// is len(data), the same on every member. Blocks of up to BruckMax bytes
// go by Bruck's algorithm, or through the tree where the plan says so and
// a member's data is at most TreeAlltoallMax bytes; larger ones each go
// straight to their member.
func (r *Run) Alltoall(data []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	n := r.l.Size()
	if len(data)%n != 0 {
		return nil, r.Refuse("%d bytes do not make %d equal blocks", len(data), n)
	}
	b := len(data) / n
	if r.p != nil && r.p.TreeGather && n*len(data) <= TreeAlltoallMax {
		return r.treeAlltoall(data, b)
	}
	parts := make([][]byte, n)
	for i := range parts {
		parts[i] = data[i*b : (i+1)*b]
	}
	exchange := r.direct
	if b <= BruckMax {
		exchange = r.bruck
	}
	got, err := exchange(parts)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(data))
	for m, p := range got {
		if len(p) != b {
			return nil, r.Mismatch("team rank %d sent a block of %d bytes, team rank %d's are %d", m, len(p), r.l.Rank(), b)
		}
		out = append(out, p...)
	}
	return out, nil
}

// Alltoallv exchanges parts of any sizes between every pair of members:
// parts[i] goes to team rank i, and the result holds what each member
// sent this one, by team rank (MPI_Alltoallv).
func (r *Run) Alltoallv(parts [][]byte) ([][]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	if len(parts) != r.l.Size() {
		return nil, r.Refuse("%d parts for a team of %d", len(parts), r.l.Size())
	}
	return r.direct(parts)
}

// treeAlltoall is the all-to-all of a plan with TreeGather: each waiting
// member wakes when its partner is scheduled, so the fewer rounds a member
// waits in the better. Up the binomial tree rooted at team rank 0, each
// member passes its parent the data of every member of its subtree (in
// order, each n blocks of b bytes); the root then holds every block and
// sends each child, down the same tree, the blocks destined to its
// subtree's members (for each, in order, its n blocks by source), and
// each member passes its children their share: 2(n-1) messages in all,
// against n⌈log2 n⌉ for Bruck's, whose every round wakes every member.
func (r *Run) treeAlltoall(data []byte, b int) ([]byte, error) {
	n, me := r.l.Size(), r.l.Rank()
	row := n * b // one member's data
	rows := bytes.Clone(data)
	span := 1 // members in the subtree gathered so far
	mask := 1
	for ; mask < n; mask <<= 1 {
		if me&mask != 0 {
			if err := r.send(me-mask, 0, rows); err != nil {
				return nil, err
			}
			break
		}
		if child := me | mask; child < n {
			in, err := r.recv(child, 0)
			if err != nil {
				return nil, err
			}
			size := min(mask, n-child)
			if len(in) != size*row {
				return nil, r.Mismatch("team rank %d sent the blocks of %d members in %d bytes, %d bytes each here", child, size, len(in), row)
			}
			rows = append(rows, in...)
			span += size
		}
	}
	var cols []byte
	if me == 0 {
		cols = make([]byte, 0, n*row)
		for d := range n {
			for s := range n {
				cols = append(cols, rows[s*row+d*b:s*row+(d+1)*b]...)
			}
		}
	} else {
		in, err := r.recv(me-mask, 1)
		if err != nil {
			return nil, err
		}
		if len(in) != span*row {
			return nil, r.Mismatch("team rank %d sent the blocks of %d members in %d bytes, %d bytes each here", me-mask, span, len(in), row)
		}
		cols = in
	}
	for mask >>= 1; mask > 0; mask >>= 1 {
		if child := me + mask; child < n {
			size := min(mask, n-child)
			off := (child - me) * row
			if err := r.send(child, 1, cols[off:off+size*row]); err != nil {
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
func (r *Run) bruck(parts [][]byte) ([][]byte, error) {
	n, me := r.l.Size(), r.l.Rank()
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
		if err := r.send((me+k)%n, step, blob); err != nil {
			return nil, err
		}
		from := (me - k + n) % n
		in, err := r.recv(from, step)
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
			return nil, r.Mismatch("team rank %d sent a malformed all-to-all round of %d bytes", from, len(in))
		}
	}
	out := make([][]byte, n)
	for i := range out {
		out[i] = tmp[(me-i+n)%n]
	}
	out[me] = bytes.Clone(out[me])
	return out, nil
}

// direct sends each member its part and takes each member's.
func (r *Run) direct(parts [][]byte) ([][]byte, error) {
	n, me := r.l.Size(), r.l.Rank()
	for i := 1; i < n; i++ {
		m := (me + i) % n
		if err := r.send(m, 0, parts[m]); err != nil {
			return nil, err
		}
	}
	out := make([][]byte, n)
	out[me] = bytes.Clone(parts[me])
	for i := 1; i < n; i++ {
		m := (me - i + n) % n
		b, err := r.recv(m, 0)
		if err != nil {
			return nil, err
		}
		out[m] = b
	}
	return out, nil
}
