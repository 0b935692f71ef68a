package amo

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
func f64(v float64) uint64 { return math.Float64bits(v) }
func i32(v int32) uint64   { return uint64(uint32(v)) }
func i64(v int64) uint64   { return uint64(v) }

// TestCompute checks each operation's meaning on each kind, where the
// kinds differ: signedness, wrapping, floats, the compare of CompareSwap.
func TestCompute(t *testing.T) {
	for _, c := range []struct {
		k         Kind
		op        Op
		old, x, y uint64
		want      uint64
	}{
		{Int32, Min, i32(-1), 1, 0, i32(-1)},
		{Uint32, Min, i32(-1), 1, 0, 1},
		{Int64, Max, i64(-5), i64(-7), 0, i64(-5)},
		{Uint64, Max, 3, math.MaxUint64, 0, math.MaxUint64},
		{Int32, Add, i32(math.MaxInt32), 1, 0, i32(math.MinInt32)},
		{Uint32, Dec, 0, 0, 0, math.MaxUint32},
		{Uint32, Inc, math.MaxUint32, 0, 0, 0},
		{Int64, Sub, 10, 12, 0, i64(-2)},
		{Int64, Mult, i64(-3), 7, 0, i64(-21)},
		{Uint32, Mult, 1 << 31, 2, 0, 0},
		{Float32, Add, f32(1.5), f32(2.25), 0, f32(3.75)},
		{Float32, Inc, f32(-1), 0, 0, f32(0)},
		{Float64, Dec, f64(0.5), 0, 0, f64(-0.5)},
		{Float64, Mult, f64(1.5), f64(-4), 0, f64(-6)},
		{Float64, Min, f64(2), f64(math.NaN()), 0, f64(math.NaN())},
		{Float32, Max, f32(-2), f32(3), 0, f32(3)},
		{Float64, Sub, f64(1), f64(0.25), 0, f64(0.75)},
		{Uint64, And, 0b1100, 0b1010, 0, 0b1000},
		{Uint32, Or, 0b1100, 0b1010, 0, 0b1110},
		{Int64, Xor, 0b1100, 0b1010, 0, 0b0110},
		{Uint64, CompareSwap, 5, 5, 9, 9},
		{Uint64, CompareSwap, 5, 6, 9, 5},
		{Float64, CompareSwap, f64(0), f64(math.Copysign(0, -1)), f64(1), f64(0)}, // bits, not values
		{Int32, Swap, 4, i32(-4), 0, i32(-4)},
		{Int32, Set, 4, 7, 0, 7},
		{Uint32, Get, 4, 7, 0, 4},
		{Uint32, Set, 0, 1<<32 | 3, 0, 3}, // bits above a 32-bit word are ignored
	} {
		if got := Compute(c.k, c.op, c.old, c.x, c.y); got != c.want && !(c.k == Float64 && math.IsNaN(math.Float64frombits(got)) && math.IsNaN(math.Float64frombits(c.want))) {
			t.Errorf("Compute(%v, %v, %#x, %#x, %#x) = %#x, want %#x", c.k, c.op, c.old, c.x, c.y, got, c.want)
		}
	}
}

// TestCheck: bitwise operations on floats, unknown kinds and operations
// are refused with a message that names them.
func TestCheck(t *testing.T) {
	for k := Int32; k <= Float64; k++ {
		for op := Set; op < numOps; op++ {
			err := Check(k, op)
			bitwise := op == And || op == Or || op == Xor
			if (err != nil) != (k.IsFloat() && bitwise) {
				t.Errorf("Check(%v, %v) = %v", k, op, err)
			}
		}
	}
	for _, c := range []struct {
		k  Kind
		op Op
	}{{0, Add}, {7, Add}, {Int64, 0}, {Int64, numOps}} {
		if Check(c.k, c.op) == nil {
			t.Errorf("Check(%v, %v) accepted", c.k, c.op)
		}
	}
}

// TestApplyMatchesCompute: the atomic on memory does what the pure
// function says, for random kinds, operations and operands (special
// floats among them), and leaves the bytes around a 32-bit word alone.
func TestApplyMatchesCompute(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []uint64{0, 1, math.MaxUint64, math.MaxUint32, 1 << 31, 1 << 63, f64(math.Inf(1)), f64(math.NaN()),
		f64(math.Copysign(0, -1)), f32(float32(math.Inf(-1))), f32(2.5), f64(-3.25)}
	val := func() uint64 {
		if rng.IntN(3) == 0 {
			return specials[rng.IntN(len(specials))]
		}
		return rng.Uint64() >> rng.IntN(64)
	}
	var mem [3]uint64
	for i := 0; i < 200000; i++ {
		k := Kind(1 + rng.IntN(6))
		op := Op(1 + rng.IntN(int(numOps)-1))
		if Check(k, op) != nil {
			continue
		}
		old, x, y := val(), val(), val()
		if rng.IntN(4) == 0 {
			x = old // CompareSwap's success, Min and Max of equals
		}
		mem = [3]uint64{0xa5a5a5a5a5a5a5a5, old, 0x5a5a5a5a5a5a5a5a}
		if k.Size() == 4 {
			mem[1] = old&math.MaxUint32 | 0xdead_beef<<32
		}
		got := Apply(unsafe.Pointer(&mem[1]), k, op, x, y)
		want := Compute(k, op, old, x, y)
		wantOld := old
		if k.Size() == 4 {
			wantOld &= math.MaxUint32
			if mem[1]>>32 != 0xdead_beef {
				t.Fatalf("%v %v wrote past its word: %#x", k, op, mem[1])
			}
			mem[1] &= math.MaxUint32
		}
		if got != wantOld || mem[1] != want || mem[0] != 0xa5a5a5a5a5a5a5a5 || mem[2] != 0x5a5a5a5a5a5a5a5a {
			t.Fatalf("Apply(%v, %v, old %#x, x %#x, y %#x): fetched %#x, word %#x; want %#x, %#x", k, op, old, x, y, got, mem[1], wantOld, want)
		}
	}
}
