package coll

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// TestAccumulator: for every operator and integer kind that Accumulable
// accepts, members' elements combined into an accumulator in any order
// (amo.Compute of Accumulable's operation on an unsigned 64-bit word)
// decode to what OpCombine folds in member order, edge values included;
// Prod and float kinds are not accumulable.
func TestAccumulator(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	edges := []uint64{0, 1, math.MaxUint64, 1 << 63, 1<<63 - 1, math.MaxUint32, 1 << 31, 1<<31 - 1, 0xdeadbeef}
	for op := Sum; op < numOps; op++ {
		for k := amo.Int32; k <= amo.Float64; k++ {
			acc, ok := Accumulable(op, k)
			if want := !k.IsFloat() && op != Prod; ok != want {
				t.Fatalf("Accumulable(%v, %v) = %v, want %v", op, k, ok, want)
			}
			if !ok {
				continue
			}
			size := k.Size()
			for trial := range 300 {
				n := 1 + r.IntN(20)
				elems := make([][]byte, n)
				for i := range elems {
					v := r.Uint64()
					if r.IntN(3) == 0 {
						v = edges[r.IntN(len(edges))]
					}
					elems[i] = binary.LittleEndian.AppendUint64(nil, v)[:size]
				}
				want := bytes.Clone(elems[0])
				for _, e := range elems[1:] {
					OpCombine(op, k)(want, e)
				}
				var a uint64
				for _, i := range r.Perm(n) {
					a = amo.Compute(amo.Uint64, acc, a, AccIn(op, k, elems[i]), 0)
				}
				got := make([]byte, size)
				AccOut(op, k, a, got)
				if !bytes.Equal(got, want) {
					t.Fatalf("%v of %v, trial %d, elements %x: accumulated %x, OpCombine %x", op, k, trial, elems, got, want)
				}
			}
		}
	}
}
