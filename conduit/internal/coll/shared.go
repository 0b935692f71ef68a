package coll

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// A team whose members all share memory runs each collective as one
// exchange: every member posts what it called and its datum (Post), the
// members synchronise, and each reads every member's post and computes
// its result from them (Run.Shared). Every member sees the same posts,
// so a difference between the calls, or an argument a member refused,
// is the same error on every member, and a datum too large to post
// sends every member to the collective over the link instead.

// Post is what a member posts to an exchange.
type Post struct {
	Call    Call
	Data    []byte
	Big     bool // the datum did not fit: the collective runs over the link
	Refused bool // the member refused its arguments; Data says why
}

// Post returns what this member posts for its call, given its arguments
// (those its kind has: data, parts, a vector), its datum being Big when
// longer than max bytes.
func (r *Run) Post(data []byte, parts [][]byte, max int) Post {
	p := Post{Call: r.c}
	n, me := r.l.Size(), r.l.Rank()
	if r.c.Root < 0 || r.c.Root >= n {
		return r.refusal("root %d: accepted: a team rank from 0 to %d", r.c.Root, n-1)
	}
	if (r.c.Kind == Reduce || r.c.Kind == AllReduce) && r.c.Op != OpFunc {
		if err := CheckOp(r.c.Op, r.c.Elem); err != nil {
			return r.refusal("%v", err)
		}
	}
	switch r.c.Kind {
	case Broadcast:
		if me == r.c.Root {
			p.Data = data
		}
	case Scatter:
		if me == r.c.Root {
			if len(parts) != n {
				return r.refusal("%d parts for a team of %d", len(parts), n)
			}
			p.Data = appendParts(nil, parts)
		}
	case Alltoall:
		if len(data)%n != 0 {
			return r.refusal("%d bytes do not make %d equal blocks", len(data), n)
		}
		p.Data = data
	case Alltoallv:
		if len(parts) != n {
			return r.refusal("%d parts for a team of %d", len(parts), n)
		}
		p.Data = appendParts(nil, parts)
	case Barrier:
	default:
		p.Data = data
	}
	if len(p.Data) > max {
		p.Data, p.Big = nil, true
	}
	return p
}

// refusal is the post of a member that refuses its arguments.
func (r *Run) refusal(format string, a ...any) Post {
	why := fmt.Sprintf("team rank %d's %v: ", r.l.Rank(), r.c.Kind) + fmt.Sprintf(format, a...)
	return Post{Call: r.c, Refused: true, Data: []byte(why)}
}

func appendParts(b []byte, parts [][]byte) []byte {
	for _, p := range parts {
		b = varenc.AppendBytes(b, p)
	}
	return b
}

func splitParts(b []byte, n int) ([][]byte, bool) {
	d := varenc.Decoder{B: b}
	out := make([][]byte, n)
	for i := range out {
		out[i] = d.Bytes()
	}
	return out, !d.Bad && len(d.B) == 0
}

// Check returns what every member finds in the posts of an exchange: a
// refusal (ErrArgument), a difference between the calls (ErrMismatch),
// or big true when some datum did not fit, and the collective must run
// over the link.
func Check(posts []Post) (big bool, err error) {
	for _, p := range posts {
		if p.Refused {
			return false, Failure{Arg: true, Why: string(p.Data)}.Err()
		}
	}
	for m, p := range posts {
		if p.Call != posts[0].Call {
			return false, Failure{Why: fmt.Sprintf("team rank 0 called %v, team rank %d %v", posts[0].Call, m, p.Call)}.Err()
		}
	}
	for _, p := range posts {
		big = big || p.Big
	}
	return big, nil
}

// Reduced is a reduction's result from every member's post: their
// vectors combined in team rank order, the same bits wherever it is
// computed, never nil (a root's result, even of empty vectors). It is
// appended to acc[:0], whose memory it reuses.
func Reduced(acc []byte, posts []Post, combine Combine) ([]byte, error) {
	if acc == nil {
		acc = []byte{}
	}
	acc = append(acc[:0], posts[0].Data...)
	for m := 1; m < len(posts); m++ {
		if len(posts[m].Data) != len(acc) {
			return nil, Failure{Why: fmt.Sprintf("team rank %d posted a vector of %d bytes, team rank 0 of %d", m, len(posts[m].Data), len(acc))}.Err()
		}
		combine(acc, posts[m].Data)
	}
	return acc, nil
}

// Result is a collective's result, in the field of its kind: Data for a
// broadcast, a reduction, a scatter and an all-to-all, Parts for a
// gather, an all-gather and an alltoallv, Split for a Split; none for a
// barrier.
type Result struct {
	Data  []byte
	Parts [][]byte
	Split SplitResult
}

// Shared is the result of this member's collective from every member's
// post, as Check found them in order. A reduction's lies in r's buffer
// (Run.acc) until r's next reduction, Reset or not.
func (r *Run) Shared(posts []Post, combine Combine) (Result, error) {
	n, me, root := r.l.Size(), r.l.Rank(), r.c.Root
	bad := func(m int) error {
		return Failure{Why: fmt.Sprintf("team rank %d posted a malformed %v of %d bytes", m, r.c.Kind, len(posts[m].Data))}.Err()
	}
	switch r.c.Kind {
	case Barrier:
		return Result{}, nil
	case Broadcast:
		return Result{Data: bytes.Clone(posts[root].Data)}, nil
	case Reduce, AllReduce:
		if r.c.Kind == Reduce && me != root {
			return Result{}, nil
		}
		acc, err := Reduced(r.acc, posts, combine)
		if err == nil {
			r.acc = acc
		}
		return Result{Data: acc}, err
	case Gather:
		if me != root {
			return Result{}, nil
		}
		fallthrough
	case AllGather:
		out := make([][]byte, n)
		for m, p := range posts {
			out[m] = bytes.Clone(p.Data)
		}
		return Result{Parts: out}, nil
	case Scatter:
		parts, ok := splitParts(posts[root].Data, n)
		if !ok {
			return Result{}, bad(root)
		}
		return Result{Data: bytes.Clone(parts[me])}, nil
	case Alltoall:
		b := len(posts[me].Data) / n
		out := make([]byte, 0, len(posts[me].Data))
		for m, p := range posts {
			if len(p.Data) != n*b {
				return Result{}, bad(m)
			}
			out = append(out, p.Data[me*b:(me+1)*b]...)
		}
		return Result{Data: out}, nil
	case Alltoallv:
		out := make([][]byte, n)
		for m, p := range posts {
			parts, ok := splitParts(p.Data, n)
			if !ok {
				return Result{}, bad(m)
			}
			out[m] = bytes.Clone(parts[me])
		}
		return Result{Parts: out}, nil
	case Split:
		all := make([][]byte, n)
		for m, p := range posts {
			all[m] = p.Data
		}
		res, err := r.splitOf(all)
		return Result{Split: res}, err
	}
	return Result{}, fmt.Errorf("coll: no shared form of %v", r.c.Kind)
}

// SplitResult is a Split's: the team ranks of this member's sub-team, in
// order, and its place among them (none for a negative color).
type SplitResult struct {
	Members []int
	Me      int
}

// SplitDatum is what a member of a Split contributes.
func SplitDatum(color, key int) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(int64(color)))
	return binary.LittleEndian.AppendUint64(b, uint64(int64(key)))
}
