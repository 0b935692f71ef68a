// Package binomial is the one binomial tree over the ranks of a job, which
// the address table's relay (the console's welcomes, conduit's
// relayTable), the AMTREE barrier and the broadcasts and reductions share
// (the tree of MPICH's collectives). With ranks numbered relative to the
// root (v = (rank − root) mod n), rank v > 0 hears from its parent, v
// without its lowest set bit, in round Round(v), and sends to its
// children v+m for every power of two m below Span(v, n) with v+m < n,
// each in round Round(m). Each rank has one parent, and the tree is
// ⌈log2 n⌉ deep; a subtree holds consecutive ranks, so a reduction that
// appends what its children send gathers their data in rank order.
package binomial

import "math/bits"

// Rel returns rank r's number relative to root in a tree of n ranks.
func Rel(r, root, n int) int { return (r - root + n) % n }

// Abs returns the rank whose number relative to root is v.
func Abs(v, root, n int) int { return (v + root) % n }

// Parent returns the parent of v > 0 (relative to the root): v without its
// lowest set bit.
func Parent(v int) int { return v & (v - 1) }

// Round returns the round in which v > 0 hears from its parent: the index
// of its lowest set bit. A message to a child v+m goes in round Round(m).
func Round(v int) int { return bits.TrailingZeros(uint(v)) }

// Span bounds v's children in a tree of n ranks: they are v+m for the
// powers of two m below it, while v+m < n. It is v's lowest set bit, or
// for the root (v = 0) the least power of two not below n.
func Span(v, n int) int {
	if v == 0 {
		if n <= 1 {
			return 1
		}
		return 1 << bits.Len(uint(n-1))
	}
	return v & -v
}

// Children returns the children of rank r in the tree of n ranks rooted at
// rank 0, the largest subtree first.
func Children(r, n int) []int {
	var out []int
	for m := Span(r, n) >> 1; m > 0; m >>= 1 {
		if r+m < n {
			out = append(out, r+m)
		}
	}
	return out
}
