package conduit

// This file is the reductions of teams over any Word type: operators,
// vectors' encoding and combining.

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// amoOps is the amo operation of each reduction operator.
var amoOps = [...]amo.Op{Sum: amo.Add, Min: amo.Min, Max: amo.Max, Prod: amo.Mult, And: amo.And, Or: amo.Or, Xor: amo.Xor}

// checkOp returns an error when op does not apply to elements of kind k.
func checkOp(op Op, k amo.Kind) error {
	if op == 0 || int(op) >= len(amoOps) {
		return fmt.Errorf("%w: %v; accepted: Sum, Min, Max, Prod, And, Or, Xor", ErrReduceOp, op)
	}
	if k.IsFloat() && (op == And || op == Or || op == Xor) {
		return fmt.Errorf("%w: %v on %v: bitwise operators apply to integers only", ErrReduceOp, op, k)
	}
	return nil
}

// reduceT is the body of its exported form, unordered.
func reduceT[T Word](t *Team, root int, op Op, v []T) ([]T, error) {
	k := kindOf[T]()
	if err := checkOp(op, k); err != nil {
		return nil, err
	}
	if t.whole() && op <= Max && (k == amo.Uint64 || k == amo.Float64) {
		return jobReduce(t.j, root, op, v, false)
	}
	out, err := t.reduceBytes(teamReduce, root, op, k, encodeVec(v), func(acc, in []byte) ([]byte, error) {
		return acc, combineVec(op, k, acc, in)
	})
	return decodeVec[T](out), err
}

// allReduceT is the body of its exported form, unordered.
func allReduceT[T Word](t *Team, op Op, v []T) ([]T, error) {
	k := kindOf[T]()
	if err := checkOp(op, k); err != nil {
		return nil, err
	}
	if t.whole() && op <= Max && (k == amo.Uint64 || k == amo.Float64) {
		return jobReduce(t.j, 0, op, v, true)
	}
	out, err := t.reduceBytes(teamAllReduce, 0, op, k, encodeVec(v), func(acc, in []byte) ([]byte, error) {
		return acc, combineVec(op, k, acc, in)
	})
	return decodeVec[T](out), err
}

// reduceFuncT is the body of its exported form, unordered.
func reduceFuncT[T Word](t *Team, root int, f func(a, b T) T, v []T) ([]T, error) {
	out, err := t.reduceBytes(teamReduce, root, opFunc, kindOf[T](), encodeVec(v), funcCombine(f))
	return decodeVec[T](out), err
}

// allReduceFuncT is the body of its exported form, unordered.
func allReduceFuncT[T Word](t *Team, f func(a, b T) T, v []T) ([]T, error) {
	out, err := t.reduceBytes(teamAllReduce, 0, opFunc, kindOf[T](), encodeVec(v), funcCombine(f))
	return decodeVec[T](out), err
}

// jobReduce runs a reduction of uint64 or float64 elements (T is one of
// them) with Sum, Min or Max over the Job's own collectives.
func jobReduce[T Word](j *Job, root int, op Op, v []T, all bool) ([]T, error) {
	switch x := any(v).(type) {
	case []uint64:
		var r []uint64
		var err error
		if all {
			r, err = j.AllReduceUint64(op, x)
		} else {
			r, err = j.ReduceUint64(root, op, x)
		}
		return any(r).([]T), err
	case []float64:
		var r []float64
		var err error
		if all {
			r, err = j.AllReduceFloat64(op, x)
		} else {
			r, err = j.ReduceFloat64(root, op, x)
		}
		return any(r).([]T), err
	}
	panic("conduit: jobReduce of " + kindOf[T]().String())
}

// reduceBytes runs a reduction of the packed vector acc on the team: of
// kind teamReduce to root, or teamAllReduce (root 0) to every member.
func (t *Team) reduceBytes(kind, root int, op Op, k amo.Kind, acc []byte, combine func(acc, in []byte) ([]byte, error)) ([]byte, error) {
	all := kind == teamAllReduce
	c, err := t.begin(kind, op, uint8(k), root)
	if err != nil {
		return nil, err
	}
	checked := func(acc, in []byte) ([]byte, error) {
		if len(in) != len(acc) {
			return nil, fmt.Errorf("a vector of %d elements, this rank's has %d", len(in)/k.Size(), len(acc)/k.Size())
		}
		return combine(acc, in)
	}
	out, err := c.reduce(root, acc, 0, checked)
	if err == nil && all {
		out, err = c.bcast(0, out, 1)
		if err == nil && len(out) != len(acc) {
			err = c.mismatch(fmt.Errorf("a result of %d elements, this rank's vector has %d", len(out)/k.Size(), len(acc)/k.Size()))
		}
	}
	return out, c.end(err)
}

// combineVec sets acc[i] = acc[i] op in[i] for every element of kind k;
// the two are the same length.
func combineVec(op Op, k amo.Kind, acc, in []byte) error {
	aop := amoOps[op]
	switch k.Size() {
	case 4:
		for i := 0; i+4 <= len(acc); i += 4 {
			r := amo.Compute(k, aop, uint64(binary.LittleEndian.Uint32(acc[i:])), uint64(binary.LittleEndian.Uint32(in[i:])), 0)
			binary.LittleEndian.PutUint32(acc[i:], uint32(r))
		}
	default:
		for i := 0; i+8 <= len(acc); i += 8 {
			r := amo.Compute(k, aop, binary.LittleEndian.Uint64(acc[i:]), binary.LittleEndian.Uint64(in[i:]), 0)
			binary.LittleEndian.PutUint64(acc[i:], r)
		}
	}
	return nil
}

// funcCombine combines packed vectors with f element by element.
func funcCombine[T Word](f func(a, b T) T) func(acc, in []byte) ([]byte, error) {
	return func(acc, in []byte) ([]byte, error) {
		a, b := decodeVec[T](acc), decodeVec[T](in)
		for i := range a {
			a[i] = f(a[i], b[i])
		}
		return encodeVec(a), nil
	}
}

// kindOf is the amo kind of T.
func kindOf[T Word]() amo.Kind {
	var zero T
	switch any(zero).(type) {
	case int32:
		return amo.Int32
	case uint32:
		return amo.Uint32
	case int64:
		return amo.Int64
	case uint64:
		return amo.Uint64
	case float32:
		return amo.Float32
	}
	return amo.Float64
}

// encodeVec packs v little-endian, 4 or 8 bytes an element.
func encodeVec[T Word](v []T) []byte {
	b := make([]byte, 0, kindOf[T]().Size()*len(v))
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
	v := make([]T, len(b)/kindOf[T]().Size())
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
