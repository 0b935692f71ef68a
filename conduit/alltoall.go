package conduit

// This file is the all-to-all of teams: direct sends, Bruck's algorithm
// for small blocks, and a tree through a crowded job.

import (
	"fmt"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

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
