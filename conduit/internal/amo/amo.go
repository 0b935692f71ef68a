// Package amo is the arithmetic of conduit's remote atomics: what each
// operation does to a word, for each type of word, as a pure function on
// the word's bits (Compute), and the same done atomically on a word in
// memory (Apply), which the rank that owns a segment and the ranks that
// map it share. Both sides of a remote atomic, and the tests' sequential
// model, use this package, so the two paths cannot disagree.
package amo

import (
	"fmt"
	"math"
	"sync/atomic"
	"unsafe"
)

// Kind is the type of a word: its size and how its bits are read.
type Kind uint8

// The kinds of word.
const (
	Int32 Kind = iota + 1
	Uint32
	Int64
	Uint64
	Float32
	Float64
)

// Size is the size of a word of kind k in bytes (0 for an unknown kind).
func (k Kind) Size() int {
	switch k {
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// IsFloat reports whether k is a floating-point kind.
func (k Kind) IsFloat() bool { return k == Float32 || k == Float64 }

func (k Kind) String() string {
	switch k {
	case Int32:
		return "int32"
	case Uint32:
		return "uint32"
	case Int64:
		return "int64"
	case Uint64:
		return "uint64"
	case Float32:
		return "float32"
	case Float64:
		return "float64"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Op is an atomic operation. x and y are its operands.
type Op uint8

// The operations, with what they store; every one fetches the value the
// word held before it.
const (
	Set         Op = iota + 1 // x
	Get                       // the word unchanged
	Swap                      // x
	CompareSwap               // y if the word's bits equal x's, else unchanged
	Add                       // word + x
	Sub                       // word − x
	Inc                       // word + 1
	Dec                       // word − 1
	Mult                      // word × x
	Min                       // the smaller of word and x
	Max                       // the larger of word and x
	And                       // word & x (integers)
	Or                        // word | x (integers)
	Xor                       // word ^ x (integers)
	numOps
)

var opNames = [numOps]string{Set: "set", Get: "get", Swap: "swap", CompareSwap: "compare-swap", Add: "add", Sub: "sub",
	Inc: "inc", Dec: "dec", Mult: "mult", Min: "min", Max: "max", And: "and", Or: "or", Xor: "xor"}

func (o Op) String() string {
	if o > 0 && o < numOps {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Check returns nil when op applies to words of kind k, else an error
// that names both: an unknown kind or operation, or a bitwise operation
// on a floating-point kind.
func Check(k Kind, op Op) error {
	if k.Size() == 0 {
		return fmt.Errorf("unknown word type %v", k)
	}
	if op == 0 || op >= numOps {
		return fmt.Errorf("unknown atomic operation %v; accepted: set, get, swap, compare-swap, add, sub, inc, dec, mult, min, max, and, or, xor", op)
	}
	if k.IsFloat() && (op == And || op == Or || op == Xor) {
		return fmt.Errorf("atomic %v on %v: bitwise operations apply to integer words only", op, k)
	}
	return nil
}

// Compute returns the bits a word of kind k holds after op with operands
// x and y, given the bits old it held before. Bits above a 32-bit kind's
// are zero in the result and ignored in old, x and y. Integers wrap;
// floating-point Min and Max follow Go's min and max (a NaN gives NaN),
// and CompareSwap compares bits, as the processor does. op must pass
// Check.
func Compute(k Kind, op Op, old, x, y uint64) uint64 {
	if k.Size() == 4 {
		old, x, y = old&math.MaxUint32, x&math.MaxUint32, y&math.MaxUint32
	}
	var r uint64
	switch op {
	case Set, Swap:
		r = x
	case Get:
		r = old
	case CompareSwap:
		r = old
		if old == x {
			r = y
		}
	case Inc:
		return Compute(k, Add, old, one(k), 0)
	case Dec:
		return Compute(k, Sub, old, one(k), 0)
	case And:
		r = old & x
	case Or:
		r = old | x
	case Xor:
		r = old ^ x
	default:
		r = arith(k, op, old, x)
	}
	if k.Size() == 4 {
		r &= math.MaxUint32
	}
	return r
}

// one is the bits of 1 in kind k.
func one(k Kind) uint64 {
	switch k {
	case Float32:
		return uint64(math.Float32bits(1))
	case Float64:
		return math.Float64bits(1)
	}
	return 1
}

// arith is Add, Sub, Mult, Min and Max.
func arith(k Kind, op Op, a, b uint64) uint64 {
	switch k {
	case Int32:
		return uint64(uint32(arithOf(op, int32(a), int32(b))))
	case Uint32:
		return uint64(arithOf(op, uint32(a), uint32(b)))
	case Int64:
		return uint64(arithOf(op, int64(a), int64(b)))
	case Uint64:
		return arithOf(op, a, b)
	case Float32:
		return uint64(math.Float32bits(arithOf(op, math.Float32frombits(uint32(a)), math.Float32frombits(uint32(b)))))
	case Float64:
		return math.Float64bits(arithOf(op, math.Float64frombits(a), math.Float64frombits(b)))
	}
	return a
}

func arithOf[T int32 | uint32 | int64 | uint64 | float32 | float64](op Op, a, b T) T {
	switch op {
	case Add:
		return a + b
	case Sub:
		return a - b
	case Mult:
		return a * b
	case Min:
		return min(a, b)
	case Max:
		return max(a, b)
	}
	return a
}

// Apply does op with operands x and y atomically on the word of kind k at
// p, which must be aligned to the word's size, and returns the bits the
// word held before. Every rank that applies operations to the word through
// Apply, in any process that maps it, sees them happen one at a time.
// op must pass Check.
func Apply(p unsafe.Pointer, k Kind, op Op, x, y uint64) uint64 {
	if k.Size() == 4 {
		return uint64(apply((*atomic.Uint32)(p), k, op, uint32(x), uint32(y)))
	}
	return apply((*atomic.Uint64)(p), k, op, x, y)
}

// word is the methods of atomic.Uint32 and atomic.Uint64 that apply uses.
type word[T uint32 | uint64] interface {
	Load() T
	Swap(T) T
	And(T) T
	Or(T) T
	Add(T) T
	CompareAndSwap(old, new T) bool
}

// apply is Apply on a word of T's size: the processor's swap, and, or and
// add where they do the operation, else a compare-and-swap loop over
// Compute.
func apply[T uint32 | uint64, W word[T]](w W, k Kind, op Op, x, y T) T {
	switch op {
	case Get:
		return w.Load()
	case Set, Swap:
		return w.Swap(x)
	case And:
		return w.And(x)
	case Or:
		return w.Or(x)
	}
	if !k.IsFloat() {
		switch op {
		case Add:
			return w.Add(x) - x
		case Sub:
			return w.Add(-x) + x
		case Inc:
			return w.Add(1) - 1
		case Dec:
			return w.Add(^T(0)) + 1
		}
	}
	for {
		old := w.Load()
		v := T(Compute(k, op, uint64(old), uint64(x), uint64(y)))
		if v == old || w.CompareAndSwap(old, v) {
			return old
		}
	}
}
