package conduit

// Tests of the packing of reductions' vectors and results (reduce.go).

import (
	"bytes"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// TestResultVec: the results carved from a team's slab are as long as
// asked, each with its own memory, whose capacity is its length; a
// slab that runs out is replaced, and a result too large for one, or
// empty, is made on its own.
func TestResultVec(t *testing.T) {
	tm := &Team{}
	var all [][]int32
	for n := range 2*slabResult + 1 {
		v := resultVec[int32](tm, n)
		if len(v) != n || cap(v) != n || v == nil {
			t.Fatalf("resultVec(%d): len %d, cap %d, nil %v", n, len(v), cap(v), v == nil)
		}
		for i := range v {
			v[i] = int32(n)
		}
		all = append(all, v)
	}
	for n, v := range all {
		for i, e := range v {
			if e != int32(n) {
				t.Fatalf("result %d's element %d = %d: another result shares its memory", n, i, e)
			}
		}
	}
	for range 3 * slabWords {
		if v := resultVec[float64](tm, 1); len(v) != 1 || cap(v) != 1 {
			t.Fatalf("resultVec(1) = len %d, cap %d", len(v), cap(v))
		}
	}
	if a := testing.AllocsPerRun(slabWords*4, func() { resultVec[uint64](tm, 1) }); a > 1.0/slabWords+0.01 {
		t.Errorf("%.3f allocations a one-element result, want one a slab of %d", a, slabWords)
	}
}

// TestVecPacking: a vector packs little-endian, 4 or 8 bytes an element,
// as the native copy (appendVec, decodeTo where nativeLE) and the
// element-by-element form (appendEach, decodeEach, any architecture)
// both pack and unpack it, float bits as they are.
func TestVecPacking(t *testing.T) {
	nan := math.Float64frombits(0x7ff8_0000_dead_beef)
	checkPacking(t, []int32{-1, 2}, []byte{0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0})
	checkPacking(t, []uint32{0x01020304}, []byte{4, 3, 2, 1})
	checkPacking(t, []int64{-2}, []byte{0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	checkPacking(t, []uint64{0x0102030405060708, 9}, []byte{8, 7, 6, 5, 4, 3, 2, 1, 9, 0, 0, 0, 0, 0, 0, 0})
	checkPacking(t, []float32{1}, []byte{0, 0, 0x80, 0x3f})
	checkPacking(t, []float64{nan}, []byte{0xef, 0xbe, 0xad, 0xde, 0, 0, 0xf8, 0x7f})
	checkPacking(t, []float64{}, []byte{})
}

func checkPacking[T Word](t *testing.T, v []T, want []byte) {
	t.Helper()
	for name, got := range map[string][]byte{"appendVec": appendVec([]byte{}, v), "appendEach": appendEach([]byte{}, v), "encodeVec": encodeVec(v)} {
		if !bytes.Equal(got, want) {
			t.Errorf("%s(%v) = % x, want % x", name, v, got, want)
		}
	}
	bits := func(v []T) []byte { return appendEach(nil, v) } // NaN != NaN
	for name, got := range map[string][]T{"decodeTo": decodeTo(make([]T, len(v)), want), "decodeEach": decodeEach(make([]T, len(v)), want), "decodeVec": decodeVec[T](want)} {
		if len(got) != len(v) || !bytes.Equal(bits(got), want) {
			t.Errorf("%s(% x) = %v, want %v", name, want, got, v)
		}
	}
}

// TestKindOf: each Word type's amo kind.
func TestKindOf(t *testing.T) {
	got := []amo.Kind{kindOf[int32](), kindOf[uint32](), kindOf[int64](), kindOf[uint64](), kindOf[float32](), kindOf[float64]()}
	want := []amo.Kind{amo.Int32, amo.Uint32, amo.Int64, amo.Uint64, amo.Float32, amo.Float64}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
