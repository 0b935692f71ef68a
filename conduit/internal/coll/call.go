// Package coll is the collective engine of conduit's teams, the whole job
// included: every collective of every team runs here, over a Link that
// carries its messages (active messages between ranks, shared words
// within a host, or memory in tests).
//
// Each member numbers its collectives on a team in the order it calls
// them; what a member called (its Call: kind, root, operator, element
// type and length) travels with every message of the collective, and a
// member that receives a message of another call, or of a rank that
// refused its own arguments, fails the collective on every member
// (Link.Fail) instead of waiting for messages that will not come.
package coll

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// ErrMismatch is wrapped by the error of a collective whose members
// called different collectives, or one with different arguments.
var ErrMismatch = errors.New("conduit: the ranks called different collectives")

// ErrArgument is wrapped by the error of a collective that a member
// refused for its own arguments (a root's part count, a length that does
// not divide), on that member and on every other.
var ErrArgument = errors.New("conduit: a collective's arguments not accepted")

// Kind is a kind of collective.
type Kind uint8

// The kinds of collective.
const (
	Barrier Kind = iota + 1
	Broadcast
	Reduce
	AllReduce
	Gather
	AllGather
	Scatter
	Alltoall
	Alltoallv
	Split
	numKinds
)

var kindNames = [numKinds]string{Barrier: "barrier", Broadcast: "broadcast", Reduce: "reduce", AllReduce: "all-reduce",
	Gather: "gather", AllGather: "all-gather", Scatter: "scatter", Alltoall: "all-to-all", Alltoallv: "all-to-all-v", Split: "split"}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// rooted reports whether a call of kind k has a root.
func (k Kind) rooted() bool { return k == Broadcast || k == Reduce || k == Gather || k == Scatter }

// Op is a reduction operator.
type Op uint8

// The reduction operators; OpFunc is a program's own function.
const (
	Sum Op = iota + 1
	Min
	Max
	Prod
	And
	Or
	Xor
	numOps
	OpFunc Op = 255
)

var opNames = [numOps]string{Sum: "sum", Min: "min", Max: "max", Prod: "prod", And: "and", Or: "or", Xor: "xor"}

func (o Op) String() string {
	switch {
	case o == OpFunc:
		return "func"
	case o > 0 && o < numOps:
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// amoOps are the atomics' operators that compute the reductions'.
var amoOps = [numOps]amo.Op{Sum: amo.Add, Min: amo.Min, Max: amo.Max, Prod: amo.Mult, And: amo.And, Or: amo.Or, Xor: amo.Xor}

// CheckOp returns why op cannot reduce elements of kind k, or nil.
func CheckOp(op Op, k amo.Kind) error {
	if op == 0 || op >= numOps {
		return fmt.Errorf("reduction operator %v: accepted: Sum, Min, Max, Prod, And, Or, Xor", op)
	}
	if k.IsFloat() && (op == And || op == Or || op == Xor) {
		return fmt.Errorf("reduction operator %v on %v: bitwise operators apply to integers only", op, k)
	}
	return nil
}

// Call is what a member called: every member of a collective calls the
// same. Len is what the members' data must agree on: a reduction's
// element count, an all-to-all's bytes; 0 where sizes may differ.
type Call struct {
	Kind Kind
	Op   Op
	Elem amo.Kind // a reduction's element type
	Root int      // team rank; 0 where there is none
	Len  int
}

func (c Call) String() string {
	s := c.Kind.String()
	if c.Op != 0 {
		s += " " + c.Op.String()
	}
	if c.Elem != 0 {
		s += " of " + c.Elem.String()
	}
	if c.Len != 0 {
		s += fmt.Sprintf(" (length %d)", c.Len)
	}
	if c.Kind.rooted() {
		prep := "from"
		if c.Kind == Reduce || c.Kind == Gather {
			prep = "to"
		}
		s += fmt.Sprintf(" %s root %d", prep, c.Root)
	}
	return s
}

// Header is what a message says of its collective: the call, and the
// step of the algorithm it belongs to.
type Header struct {
	Call
	Step int
}

// Pack packs h into three words of a message's arguments.
func (h Header) Pack() (meta, root, length uint32) {
	return uint32(h.Kind) | uint32(h.Op)<<8 | uint32(h.Elem)<<16 | uint32(h.Step)<<24, uint32(h.Root), uint32(h.Len)
}

// Unpack is Pack's inverse.
func Unpack(meta, root, length uint32) Header {
	return Header{Call: Call{Kind: Kind(meta), Op: Op(meta >> 8), Elem: amo.Kind(meta >> 16), Root: int(int32(root)), Len: int(int32(length))},
		Step: int(meta >> 24)}
}

// Failure is why a collective failed, as one member tells the others.
type Failure struct {
	Arg bool   // a member refused its own arguments (else a mismatch)
	Why string // what was found, naming the members
}

// Err is the failure as every member's error.
func (f Failure) Err() error {
	if f.Arg {
		return fmt.Errorf("%w: %s", ErrArgument, f.Why)
	}
	return fmt.Errorf("%w: %s", ErrMismatch, f.Why)
}

// MaxWhy bounds the description a failure carries.
const MaxWhy = 1000

// Encode returns f as a notice's payload.
func (f Failure) Encode() []byte {
	b := []byte{'m'}
	if f.Arg {
		b[0] = 'a'
	}
	return append(b, f.Why[:min(len(f.Why), MaxWhy)]...)
}

// DecodeFailure is Encode's inverse; a payload of neither form is a
// mismatch that says so.
func DecodeFailure(p []byte) Failure {
	p = p[:min(len(p), MaxWhy+1)]
	if len(p) == 0 || p[0] != 'a' && p[0] != 'm' {
		return Failure{Why: fmt.Sprintf("a malformed failure notice of %d bytes", len(p))}
	}
	return Failure{Arg: p[0] == 'a', Why: string(p[1:])}
}

// OpCombine returns the Combine of op on elements of kind k, which
// CheckOp accepted: integers wrap; float Min and Max follow Go's min
// and max. Each is made once (opCombines): a reduction allocates none.
func OpCombine(op Op, k amo.Kind) Combine { return opCombines[op][k] }

// opCombines holds opCombine of each operator and kind that CheckOp
// accepts, nil elsewhere.
var opCombines = func() (t [numOps][amo.Float64 + 1]Combine) {
	for op := range numOps {
		for k := range amo.Float64 + 1 {
			if k.Size() != 0 && CheckOp(op, k) == nil {
				t[op][k] = opCombine(op, k)
			}
		}
	}
	return t
}()

// opCombine makes OpCombine's function of op on kind k.
func opCombine(op Op, k amo.Kind) Combine {
	aop := amoOps[op]
	if k.Size() == 4 {
		return func(acc, in []byte) {
			for i := 0; i+4 <= len(acc) && i+4 <= len(in); i += 4 {
				r := amo.Compute(k, aop, uint64(binary.LittleEndian.Uint32(acc[i:])), uint64(binary.LittleEndian.Uint32(in[i:])), 0)
				binary.LittleEndian.PutUint32(acc[i:], uint32(r))
			}
		}
	}
	return func(acc, in []byte) {
		for i := 0; i+8 <= len(acc) && i+8 <= len(in); i += 8 {
			binary.LittleEndian.PutUint64(acc[i:], amo.Compute(k, aop, binary.LittleEndian.Uint64(acc[i:]), binary.LittleEndian.Uint64(in[i:]), 0))
		}
	}
}
