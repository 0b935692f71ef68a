package conduit

// This file is the reductions of vectors of Word elements on teams.

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// Op is a reduction operator of Reduce and AllReduce.
type Op = coll.Op

// The reduction operators: integers wrap, float Min and Max follow Go's,
// and And, Or and Xor are for integers.
const (
	Sum  = coll.Sum
	Min  = coll.Min
	Max  = coll.Max
	Prod = coll.Prod
	And  = coll.And
	Or   = coll.Or
	Xor  = coll.Xor
)

// reduceT is the body of Reduce (all false, to root) and AllReduce (all),
// unordered.
func reduceT[T Word](t *Team, root int, op Op, v []T, all bool) ([]T, error) {
	k := kindOf[T]()
	var combine coll.Combine
	bad := coll.CheckOp(coll.Op(op), k)
	if bad == nil {
		combine = coll.OpCombine(coll.Op(op), k)
	}
	out, err := reduceBytes(t, root, coll.Op(op), k, packVec(t, v), combine, all)
	if bad != nil && err != nil {
		err = fmt.Errorf("%w: %w", ErrReduceOp, err)
	}
	return decodeResult[T](t, out), err
}

// packVec packs v for a reduction on t in this rank's turn: where it fits
// a slot, into the team's buffer, not nil even where empty (the reduction
// is done with it when it completes, before the team's next call packs
// its own); a larger vector into a buffer of its own, which the team does
// not keep.
func packVec[T Word](t *Team, v []T) []byte {
	if len(v)*sizeOf[T]() > maxPost {
		return encodeVec(v)
	}
	if t.vec == nil {
		t.vec = make([]byte, 0, maxPost)
	}
	return appendVec(t.vec[:0], v)
}

// reduceFuncT is the body of ReduceFunc and AllReduceFunc, unordered.
func reduceFuncT[T Word](t *Team, root int, f func(a, b T) T, v []T, all bool) ([]T, error) {
	out, err := reduceBytes(t, root, coll.OpFunc, kindOf[T](), encodeVec(v), funcCombine(f), all)
	return decodeResult[T](t, out), err
}

// reduceBytes runs a reduction of the packed vector acc, which it may
// overwrite. Its result may lie in shared memory or the team's call
// (Team.collected) until the team's next collective, or in the team's run
// (coll.Run.Shared) until its next reduction.
func reduceBytes(t *Team, root int, op coll.Op, k amo.Kind, acc []byte, combine coll.Combine, all bool) ([]byte, error) {
	v, err := t.collect(reduceCall(root, op, k, acc, all), acc, nil, combine)
	return v.Data, err
}

// reduceCall is the call of a reduction of the packed vector acc.
func reduceCall(root int, op coll.Op, k amo.Kind, acc []byte, all bool) coll.Call {
	call := coll.Call{Kind: coll.Reduce, Op: op, Elem: k, Root: root, Len: len(acc) / k.Size()}
	if all {
		call.Kind, call.Root = coll.AllReduce, 0
	}
	return call
}

// reduceNB starts a reduction of v with op (f where op is coll.OpFunc):
// split (splitNB) where that applies and op suits T, else on a goroutine
// of its own.
func reduceNB[T Word](t *Team, root int, op coll.Op, f func(a, b T) T, v []T, all bool) *Handle[[]T] {
	n := t.ticket()
	k := kindOf[T]()
	if op == coll.OpFunc || coll.CheckOp(op, k) == nil {
		var combine coll.Combine
		if op == coll.OpFunc {
			combine = funcCombine(f)
		} else {
			combine = coll.OpCombine(op, k)
		}
		// In its turn (serving n), a vector that fits a slot may split:
		// the call packs it into the team's buffer, as a blocking one,
		// and the team's next call completes this one before it packs
		// its own.
		if t.serving.Load() == n && len(v)*sizeOf[T]() <= maxPost {
			acc := packVec(t, v)
			if h := split[[]T](t, n, reduceCall(root, op, k, acc, all), acc, combine, vecOf[T]{}); h != nil {
				return h
			}
		}
	}
	own := slices.Clone(v) // the call's, not the caller's, as a split one's
	return startAt(t, n, func() ([]T, error) {
		if op == coll.OpFunc {
			return reduceFuncT(t, root, f, own, all)
		}
		return reduceT(t, root, op, own, all)
	})
}

// vecOf is the result of a reduction of vectors of T, decoded.
type vecOf[T Word] struct{}

func (vecOf[T]) decode(t *Team, v coll.Result) []T { return decodeResult[T](t, v.Data) }

// funcCombine is the combine of a program's operator f.
func funcCombine[T Word](f func(a, b T) T) coll.Combine {
	return func(acc, in []byte) {
		a, b := decodeVec[T](acc), decodeVec[T](in)
		for i := range a {
			a[i] = f(a[i], b[i])
		}
		copy(acc, encodeVec(a))
	}
}

// kindOf is the amo kind of T, from its arithmetic and size: constants
// of the generic function's shape, where a type switch would look T up
// in its dictionary (a line that is cold at a crowded host's every turn).
func kindOf[T Word]() amo.Kind {
	var one T = 1
	four := sizeOf[T]() == 4
	switch {
	case one/2 != 0: // a half
		if four {
			return amo.Float32
		}
		return amo.Float64
	case -one > 0: // wrapped
		if four {
			return amo.Uint32
		}
		return amo.Uint64
	case four:
		return amo.Int32
	}
	return amo.Int64
}

// encodeVec packs v little-endian, 4 or 8 bytes an element.
func encodeVec[T Word](v []T) []byte {
	return appendVec(make([]byte, 0, sizeOf[T]()*len(v)), v)
}

// sizeOf is the size of T, 4 or 8 bytes, a constant of the generic
// function's shape: no look-up in its dictionary.
func sizeOf[T Word]() int {
	var zero T
	return int(unsafe.Sizeof(zero))
}

// vecBytes is v's memory as bytes: where nativeLE, its packing.
func vecBytes[T Word](v []T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*sizeOf[T]())
}

// appendVec appends v to b as encodeVec packs it.
func appendVec[T Word](b []byte, v []T) []byte {
	if nativeLE {
		return append(b, vecBytes(v)...)
	}
	return appendEach(b, v)
}

// appendEach is appendVec element by element, on any architecture.
func appendEach[T Word](b []byte, v []T) []byte {
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
	return decodeTo(make([]T, len(b)/sizeOf[T]()), b)
}

// decodeResult is decodeVec of a reduction's result on t, for the
// caller: a small one is carved from the team's slab (resultVec).
func decodeResult[T Word](t *Team, b []byte) []T {
	if b == nil {
		return nil
	}
	return decodeTo(resultVec[T](t, len(b)/sizeOf[T]()), b)
}

// slabWords is the size, in 8-byte words, of the slab that a team's small
// results are carved from (2 KiB, which a result kept alone keeps
// alive); slabResult, that of the largest so carved.
const (
	slabWords  = 256
	slabResult = 8
)

// resultVec returns a vector of n elements of T for a result of a
// reduction on t, in the rank's turn on it: up to slabResult words, one
// carved from the team's slab, which a new one replaces when it runs out,
// so that a reduction allocates once every few hundred calls, not at
// each one (on a crowded host, an allocation's lines and code are cold at
// every turn); its capacity is its length, so that an append copies it.
// The slab is of words without pointers, as every Word.
func resultVec[T Word](t *Team, n int) []T {
	words := (n*sizeOf[T]() + 7) / 8
	if n == 0 || words > slabResult {
		return make([]T, n)
	}
	if len(t.slab) < words {
		t.slab = make([]uint64, slabWords)
	}
	w := t.slab[:words:words]
	t.slab = t.slab[words:]
	return unsafe.Slice((*T)(unsafe.Pointer(&w[0])), n)
}

// decodeTo unpacks b, what encodeVec packed, into v, as long, and
// returns v.
func decodeTo[T Word](v []T, b []byte) []T {
	if nativeLE {
		copy(vecBytes(v), b)
		return v
	}
	return decodeEach(v, b)
}

// decodeEach is decodeTo element by element, on any architecture.
func decodeEach[T Word](v []T, b []byte) []T {
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
