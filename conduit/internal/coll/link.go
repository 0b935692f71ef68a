package coll

import (
	"fmt"
	"slices"

	"github.com/udpconduit/udpconduit/internal/binomial"
)

// Link carries the messages of one collective of one member: it knows
// the team and the collective's number, and keeps each member's message
// of the collective until the member that expects it takes it. In every
// algorithm here a member sends another at most one message per
// collective, so a member whose call differs from its sender's takes the
// sender's message and sees the difference instead of waiting for
// another.
type Link interface {
	// Rank and Size are this member's team rank and the team's size.
	Rank() int
	Size() int
	// Send sends data, with what it says of its collective, to team
	// rank to. The link may keep data until the collective ends.
	Send(to int, h Header, data []byte) error
	// Recv waits for the collective's message from team rank from, or
	// for any message of the collective whose call is not want (a
	// member that called another collective, which may never send what
	// this one waits for), and returns it with its sender. Its error
	// ends the wait: the collective failed (Failure.Err, as another
	// member told), or this member is ending.
	Recv(from int, want Call) (src int, h Header, data []byte, err error)
	// Fail tells every other member that the collective failed, and
	// returns f as this member's error.
	Fail(f Failure) error
}

// Plan is how a team runs its collectives, the same on every member.
type Plan struct {
	// Leaders holds the team rank of each team rank's group leader (the
	// lowest team rank of its host), where trees run in two levels:
	// nil for binomial trees over the team.
	Leaders []int
	// TreeBarrier: barriers gather and release over the tree (hosts with
	// more ranks than CPUs, where each round of a dissemination would
	// wake every rank); else they disseminate.
	TreeBarrier bool
	// TreeGather: all-gathers gather and broadcast over the tree, and
	// all-to-alls of up to TreeAlltoallMax bytes a member go through it;
	// else they run Bruck's algorithms.
	TreeGather bool
	// Central: barriers gather at team rank 0 and are released by it,
	// every member its child (GASNET_BARRIER=AMCENTRAL).
	Central bool
}

// BruckMax is the largest all-to-all block that goes by Bruck's algorithm
// (⌈log2 n⌉ messages a member, each with about half the blocks, as Open
// MPI and MPICH do for small blocks); larger ones go straight to their
// member.
const BruckMax = 256

// TreeAlltoallMax bounds the bytes a member passes to an all-to-all
// through the tree (TreeGather).
const TreeAlltoallMax = 256 << 10

// Tree returns member me's parent (-1 at the root) and children, smallest
// subtree first, in the tree of a collective rooted at root among n
// members: binomial, or in two levels over p.Leaders (a binomial tree over
// each group's members rooted at its head, root in root's group and the
// leader in the others, and one over the heads rooted at root; children
// come smallest subtree first, the heads' before the group's). The
// children are appended to buf[:0], whose memory they reuse.
func (p *Plan) Tree(root, me, n int, buf []int) (parent int, children []int) {
	children = buf[:0]
	if p == nil || p.Leaders == nil {
		v := binomial.Rel(me, root, n)
		parent = -1
		if v > 0 {
			parent = binomial.Abs(binomial.Parent(v), root, n)
		}
		for m := 1; m < binomial.Span(v, n) && v+m < n; m <<= 1 {
			children = append(children, binomial.Abs(v+m, root, n))
		}
		return parent, children
	}
	leaders := p.Leaders
	head := func(r int) int {
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
	group := []int{head(me)}
	for r, l := range leaders {
		if l == leaders[me] && r != group[0] {
			group = append(group, r)
		}
	}
	parent = -1
	k, i := slices.Index(group, me), slices.Index(heads, me)
	if k > 0 {
		parent = group[binomial.Parent(k)]
	} else if i > 0 {
		parent = heads[binomial.Parent(i)]
	}
	if i >= 0 {
		for _, c := range binomial.Children(i, len(heads)) {
			children = append(children, heads[c])
		}
	}
	for _, c := range binomial.Children(k, len(group)) {
		children = append(children, group[c])
	}
	return parent, children
}

// CheckLeaders returns why leaders cannot be a Plan's, or nil: one entry
// for each of n members, each naming the lowest member of its group.
func CheckLeaders(leaders []int, n int) error {
	if len(leaders) != n {
		return fmt.Errorf("%d leaders for %d members", len(leaders), n)
	}
	for r, l := range leaders {
		if l < 0 || l > r || leaders[l] != l {
			return fmt.Errorf("member %d's leader %d is not the lowest member of its group", r, l)
		}
	}
	return nil
}
