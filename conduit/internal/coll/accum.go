package coll

import (
	"encoding/binary"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// An accumulator is one 64-bit word into which the members of a
// reduction of one integer element each combine their element as they
// arrive, where they share memory: the member that completes the
// arrivals then has the result in that word, with no member's post to
// read. Every operator that Accumulable accepts is made, by an encoding
// of the element (AccIn), one of four atomic operations on an unsigned
// 64-bit word (amo.Add, Or, Xor or Max, as amo.Compute computes them)
// that a word of zero starts and that the members may apply in any
// order; AccOut decodes the word back into the element.

// Accumulable returns the atomic operation by which a reduction by op of
// one element of kind k combines into an accumulator (a word of kind
// amo.Uint64), and whether it does: Sum, Min, Max, And, Or and Xor of
// integers. Prod has no encoding whose identity is zero; float sums
// depend on their order, and float Min and Max on how Go's min and max
// treat NaN and signed zeros, which no encoding keeps.
func Accumulable(op Op, k amo.Kind) (amo.Op, bool) {
	if k.IsFloat() || k.Size() == 0 {
		return 0, false
	}
	switch op {
	case Sum:
		return amo.Add, true
	case Min, Max:
		return amo.Max, true
	case And, Or:
		return amo.Or, true
	case Xor:
		return amo.Xor, true
	}
	return 0, false
}

// accFlip returns the bits that encode and decode an element of kind k
// under op (one call, xor, both ways), within the element's size:
// Min's and And's complement (the smallest element is then the largest
// word, and And of elements the complement of Or of complements), and a
// signed element's sign bit under Min and Max (signed order becomes
// unsigned order, the least element zero).
func accFlip(op Op, k amo.Kind) uint64 {
	bits := uint(8 * k.Size())
	var f uint64
	if (op == Min || op == Max) && (k == amo.Int32 || k == amo.Int64) {
		f = 1 << (bits - 1)
	}
	if op == Min || op == And {
		f ^= 1<<bits - 1 // all ones for 64 bits: 1<<64 is 0 in Go
	}
	return f
}

// AccIn returns the element b (k.Size() bytes, little-endian) encoded
// for the accumulator of a reduction by op, which Accumulable accepts.
func AccIn(op Op, k amo.Kind, b []byte) uint64 {
	return loadElem(k, b) ^ accFlip(op, k)
}

// AccOut writes the element that accumulator word u holds, decoded, into
// b (k.Size() bytes, little-endian).
func AccOut(op Op, k amo.Kind, u uint64, b []byte) {
	u ^= accFlip(op, k)
	if k.Size() == 4 {
		binary.LittleEndian.PutUint32(b, uint32(u))
		return
	}
	binary.LittleEndian.PutUint64(b, u)
}

// loadElem returns element b of kind k zero-extended.
func loadElem(k amo.Kind, b []byte) uint64 {
	if k.Size() == 4 {
		return uint64(binary.LittleEndian.Uint32(b))
	}
	return binary.LittleEndian.Uint64(b)
}
