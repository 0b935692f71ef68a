package coll

import (
	"encoding/binary"
	"testing"
)

// FuzzBox feeds a member's box what the network may bring (messages,
// notices and probes of any header, for any collective, from any sender,
// in any order) between its own calls: it never panics, and a collective
// told failed stays failed until the member leaves it.
func FuzzBox(f *testing.F) {
	f.Add([]byte{0, 1, 1, 10, 0, 0, 1, 2, 1, 3, 0, 0, 2, 1, 0, 4, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var b Box
		seq := uint64(1)
		want := Call{Kind: AllReduce, Op: Sum, Elem: 4, Len: 1}
		b.Enter(seq, want)
		for len(ops) >= 6 {
			op, s, src := ops[0]%6, uint64(ops[1]%4), int(ops[2]%5)
			h := Unpack(binary.LittleEndian.Uint32(append([]byte{ops[3], ops[4], ops[5]}, 0)), uint32(ops[4]), uint32(ops[5]))
			ops = ops[6:]
			switch op {
			case 0:
				b.Put(s, src, h, []byte{1})
			case 1:
				b.Notice(s, src, DecodeFailure([]byte{ops0(ops), 'x'}))
			case 2:
				b.Probe(s, src, h.Call)
			case 3:
				_, _, _, f, failed, done := b.Poll(seq, src, want)
				if failed && (!done || f.Why == "") {
					t.Fatalf("a failure without a description, or not done")
				}
			case 4:
				b.Leave(seq, src%2 == 0)
				seq++
				b.Enter(seq, want)
			case 5:
				b.Abort()
			}
		}
	})
}

func ops0(b []byte) byte {
	if len(b) == 0 {
		return 'm'
	}
	return b[0]
}
