package conduit

// This file is the job's broadcasts and reductions of uint64 and float64
// vectors, over the tree collectives (tree.go).

import (
	"encoding/binary"
	"math"
)

// Broadcast sends the root's data to every rank: every rank calls it with
// the same root, and each returns a copy of the data the root passed (the
// others' data is not used). It runs over active messages among the ranks,
// down a binomial tree ⌈log2 N⌉ deep, without the console; in a job whose
// ranks all share memory (one group, see Barrier), data of up to 1640
// bytes goes through a slot in shared memory instead, which the others
// read after a synchronisation on shared words. Broadcasts and
// reductions are collectives of one sequence: every rank calls them in the
// same order, and concurrent calls of one rank's goroutines run one after
// another. As for Barrier, a rank enters once every request it sent has
// been answered; unlike Barrier, Broadcast does not synchronise: the root
// may return before the others have received.
func (j *Job) Broadcast(root int, data []byte) ([]byte, error) {
	var out []byte
	err := j.treeCollective("broadcast", root, 0, func() error {
		if w := j.bar.words; w != nil && w.whole {
			b, ok, err := j.wordTree(w, wordBroadcast, root, 0, 0, data)
			if err != nil || ok {
				out = b
				return err
			}
		}
		b, err := j.broadcastLocked(root, data)
		if err == nil && j.rank == root {
			b = append([]byte{}, b...)
		}
		out = b
		return err
	})
	return out, err
}

// ReduceUint64 combines the vectors of every rank element by element with
// op and returns the result at the root (nil elsewhere). Sum, Min and Max
// run as below; Prod, And, Or and Xor run as Reduce on World does. Every rank passes
// a vector of the same length. It runs up a binomial tree among the ranks,
// as Broadcast runs down one, with the same ordering rules; in a job whose
// ranks all share memory, vectors of up to 205 elements go through slots
// in shared memory, and the root combines them in rank order. Ranks whose
// calls differ (root, operator, type, length) get what they get over
// messages: the slots show it to every rank, which then run the call over
// messages.
func (j *Job) ReduceUint64(root int, op Op, v []uint64) ([]uint64, error) {
	if op > Max {
		return Reduce(j.world, root, op, v) // over the team engine
	}
	var out []byte
	err := j.treeCollective("reduce", root, op, func() (err error) {
		out, err = j.reduceTo(root, op, elemUint64, uint64Bytes(v))
		return err
	})
	return bytesUint64(out), err
}

// ReduceFloat64 is ReduceUint64 for float64 vectors.
func (j *Job) ReduceFloat64(root int, op Op, v []float64) ([]float64, error) {
	if op > Max {
		return Reduce(j.world, root, op, v) // over the team engine
	}
	var out []byte
	err := j.treeCollective("reduce", root, op, func() (err error) {
		out, err = j.reduceTo(root, op, elemFloat64, float64Bytes(v))
		return err
	})
	return bytesFloat64(out), err
}

// AllReduceUint64 is ReduceUint64 whose result every rank gets: a reduction
// to rank 0 and a broadcast from it (2⌈log2 N⌉ rounds), as one step of the
// ranks' collective order; in a job whose ranks all share memory, each
// rank combines every rank's vector from the slots, in rank order, so
// that every rank gets the same bits.
func (j *Job) AllReduceUint64(op Op, v []uint64) ([]uint64, error) {
	if op > Max {
		return AllReduce(j.world, op, v) // over the team engine
	}
	out, err := j.allReduce(op, elemUint64, uint64Bytes(v))
	return bytesUint64(out), err
}

// AllReduceFloat64 is AllReduceUint64 for float64 vectors.
func (j *Job) AllReduceFloat64(op Op, v []float64) ([]float64, error) {
	if op > Max {
		return AllReduce(j.world, op, v) // over the team engine
	}
	out, err := j.allReduce(op, elemFloat64, float64Bytes(v))
	return bytesFloat64(out), err
}

func uint64Bytes(v []uint64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, x)
	}
	return b
}

func bytesUint64(b []byte) []uint64 {
	if b == nil {
		return nil
	}
	v := make([]uint64, len(b)/8)
	for i := range v {
		v[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return v
}

func float64Bytes(v []float64) []byte {
	b := make([]byte, 0, 8*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func bytesFloat64(b []byte) []float64 {
	if b == nil {
		return nil
	}
	v := make([]float64, len(b)/8)
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v
}
