package conduit_test

import (
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/conduit"
)

// A job's program: the console spawns the workers inside Init; each worker
// sends a short request around a ring and waits for every rank.
func Example() {
	conduit.Init()
	var got int
	_, err := conduit.Attach([]conduit.HandlerEntry{
		{Index: 130, Fn: func(t *conduit.Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]+1) }},
		{Index: 131, Fn: func(_ *conduit.Token, args []uint32, _ []byte) { got = int(args[0]) }},
	}, 1<<16)
	if err != nil {
		conduit.Exit(1)
	}
	conduit.RequestShort((conduit.Rank()+1)%conduit.Size(), 130, 41)
	conduit.WaitUntil(func() bool { return got != 0 })
	conduit.Finalize(0)
}

// Put and Get move bytes to and from another rank's segment.
func ExamplePut() {
	conduit.Init()
	seg, _ := conduit.Attach(nil, 1024)
	peer := (conduit.Rank() + 1) % conduit.Size()
	conduit.Put(peer, 0, []byte("hello"))
	conduit.Barrier()
	fmt.Println(string(seg[:5]))
	buf := make([]byte, 5)
	conduit.Get(peer, 0, buf)
	conduit.Finalize(0)
}

// Collectives: a barrier, a broadcast from rank 0, a sum over every rank.
func ExampleAllReduce() {
	conduit.Init()
	conduit.Barrier()
	cfg, _ := conduit.World().Broadcast(0, []byte("settings from rank 0"))
	sum, _ := conduit.AllReduce(conduit.World(), conduit.Sum, []uint64{uint64(conduit.Rank())})
	if conduit.Rank() == 0 {
		fmt.Printf("%s; sum of ranks %d\n", cfg, sum[0])
	}
	conduit.Finalize(0)
}

// A job of 4 ranks inside this process (RunLocal): each rank asks the
// next one, with a short request, to add 100 to its rank; the reply's
// handler keeps the answer, and an all-gather brings every answer to rank 0,
// which prints them.
func ExampleRunLocal() {
	code, err := conduit.RunLocal(4, func(j *conduit.Job) {
		var answer atomic.Int64
		answer.Store(-1)
		_, err := j.Attach([]conduit.HandlerEntry{
			{Index: 130, Fn: func(t *conduit.Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]+100) }},
			{Index: 131, Fn: func(_ *conduit.Token, args []uint32, _ []byte) { answer.Store(int64(args[0])) }},
		}, 0)
		if err != nil {
			j.Exit(1)
		}
		j.RequestShort((j.Rank()+1)%j.Size(), 130, uint32(j.Rank()))
		j.WaitUntil(func() bool { return answer.Load() >= 0 })
		all, _ := j.World().AllGather([]byte(strconv.FormatInt(answer.Load(), 10)))
		if j.Rank() == 0 {
			for r, a := range all {
				fmt.Printf("rank %d: %s\n", r, a)
			}
		}
	})
	fmt.Println("exit code", code, err)
	// Output:
	// rank 0: 100
	// rank 1: 101
	// rank 2: 102
	// rank 3: 103
	// exit code 0 <nil>
}

// Put writes into another rank's segment and Get reads from one; a barrier
// orders the writes before the reads. Each rank writes a greeting into the
// segment of the next rank, then reads its own segment directly and the
// previous rank's segment with Get.
func ExampleJob_Put() {
	conduit.RunLocal(3, func(j *conduit.Job) {
		seg, _ := j.Attach(nil, 64)
		next, prev := (j.Rank()+1)%j.Size(), (j.Rank()+j.Size()-1)%j.Size()
		j.Put(next, 0, fmt.Appendf(nil, "from %d", j.Rank()))
		j.World().Barrier() // every Put has landed
		local := string(seg[:6])
		remote := make([]byte, 6)
		j.Get(prev, 0, remote) // what prev's predecessor wrote there
		out, _ := j.World().AllGather(fmt.Appendf(nil, "rank %d holds %q, rank %d holds %q", j.Rank(), local, prev, remote))
		if j.Rank() == 0 {
			for _, o := range out {
				fmt.Println(string(o))
			}
		}
	})
	// Output:
	// rank 0 holds "from 2", rank 2 holds "from 1"
	// rank 1 holds "from 0", rank 0 holds "from 2"
	// rank 2 holds "from 1", rank 1 holds "from 0"
}

// Broadcast sends rank 0's bytes to every rank; AllReduce gives every
// rank the sum (or minimum, maximum) over all ranks, element by element.
func ExampleTeam_Broadcast() {
	conduit.RunLocal(5, func(j *conduit.Job) {
		var cfg []byte
		if j.Rank() == 0 {
			cfg = []byte("step=0.25")
		}
		cfg, _ = j.World().Broadcast(0, cfg)
		r := uint64(j.Rank())
		sum, _ := conduit.AllReduce(j.World(), conduit.Sum, []uint64{r, r * r})
		max, _ := conduit.AllReduce(j.World(), conduit.Max, []uint64{r})
		if j.Rank() == 4 {
			fmt.Printf("%s; sums %v; max %v\n", cfg, sum, max)
		}
	})
	// Output:
	// step=0.25; sums [10 30]; max [4]
}

// Finalize ends the job once every rank has called it, with the highest
// code passed; until then a rank serves the others' requests: here rank 0
// reads rank 1's word after the last barrier, while rank 1 already waits
// in Finalize.
func ExampleJob_Finalize() {
	code, _ := conduit.RunLocal(2, func(j *conduit.Job) {
		seg, _ := j.Attach(nil, 8)
		seg[0] = byte(10 + j.Rank())
		j.World().Barrier()
		if j.Rank() == 0 {
			buf := make([]byte, 1)
			j.Get(1, 0, buf)
			fmt.Println("rank 0 read", buf[0])
		}
		j.Finalize(2 * j.Rank())
	})
	fmt.Println("exit code", code)
	// Output:
	// rank 0 read 11
	// exit code 2
}

// Exit ends the whole job with its code at once, even ranks that wait for a message
// that will never come: here rank 1 gives up, and rank 0, waiting for a
// barrier that rank 1 never enters, is ended too.
func ExampleJob_Exit() {
	code, _ := conduit.RunLocal(2, func(j *conduit.Job) {
		if j.Rank() == 1 {
			j.Exit(3)
		}
		j.World().Barrier()
		fmt.Println("not reached")
	})
	fmt.Println("exit code", code)
	// Output:
	// exit code 3
}

// Remote atomics on words of rank 0's segment: every rank adds its rank
// plus one to a counter, and tries to claim a slot by compare-and-swap,
// which only one rank wins; a barrier orders the operations before rank
// 0 reads both words.
func ExampleAtomics() {
	code, err := conduit.RunLocal(4, func(j *conduit.Job) {
		if _, err := j.Attach(nil, 64); err != nil {
			j.Exit(1)
		}
		words := conduit.NewAtomics[int64](j)
		words.Apply(0, 0, conduit.AtomicAdd, int64(j.Rank()+1), 0)
		old, _ := words.Fetch(0, 8, conduit.AtomicCompareSwap, 0, int64(j.Rank()+100))
		won, _ := conduit.AllReduce(j.World(), conduit.Sum, []uint64{map[bool]uint64{true: 1}[old == 0]})
		j.World().Barrier()
		if j.Rank() == 0 {
			sum, _ := words.Fetch(0, 0, conduit.AtomicGet, 0, 0)
			owner, _ := words.Fetch(0, 8, conduit.AtomicGet, 0, 0)
			fmt.Printf("counter %d, %d winner, slot holds a rank's claim: %v\n", sum, won[0], owner >= 100 && owner < 104)
		}
	})
	fmt.Println("exit code", code, err)
	// Output:
	// counter 10, 1 winner, slot holds a rank's claim: true
	// exit code 0 <nil>
}

// A 2×3 grid of 6 ranks: each row sums its ranks, each column gathers
// them at its top (nil elsewhere), and the rows exchange blocks
// all-to-all.
func ExampleTeam() {
	code, err := conduit.RunLocal(6, func(j *conduit.Job) {
		me := j.Rank()
		row, _ := j.World().Split(me/3, me%3)
		col, _ := j.World().Split(me%3, me/3)
		sum, _ := conduit.AllReduce(row, conduit.Sum, []int32{int32(me)})
		tops, _ := col.Gather(0, []byte{byte(me)})
		blocks, _ := row.Alltoall([]byte{byte(10 * me), byte(10*me + 1), byte(10*me + 2)})
		for r := range j.Size() {
			j.World().Barrier()
			if r == me && row.Rank() == 0 {
				fmt.Printf("row of rank %d: sum %d, column gathered %v, blocks %v\n", me, sum[0], tops, blocks)
			}
		}
	})
	fmt.Println("exit code", code, err)
	// Output:
	// row of rank 0: sum 3, column gathered [[0] [3]], blocks [0 10 20]
	// row of rank 3: sum 12, column gathered [], blocks [30 40 50]
	// exit code 0 <nil>
}

// Rank 0 writes a column of a 4×4 matrix of uint32s held row-major in
// rank 1's segment, in one strided Put, and reads the diagonal back with
// one indexed Get.
func ExampleJob_PutStrided() {
	code, err := conduit.RunLocal(2, func(j *conduit.Job) {
		if _, err := j.Attach(nil, 64); err != nil {
			j.Exit(1)
		}
		if j.Rank() == 0 {
			col := []byte{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0}
			// Column 2: 4 pieces of 4 bytes, at 8, 24, 40 and 56.
			j.PutStrided(1, conduit.Strided{Offset: 8, Stride: 16, Count: 4, Size: 4}, col, 4)
			diag := make([]byte, 16)
			j.GetIndexed(1, []uint64{0, 20, 40, 60}, 4, diag)
			fmt.Println("diagonal:", diag[0], diag[4], diag[8], diag[12])
		}
		j.World().Barrier()
		if j.Rank() == 1 {
			fmt.Println("row 3:", j.LocalView(1)[48:64])
		}
	})
	fmt.Println("exit code", code, err)
	// Output:
	// diagonal: 0 0 3 0
	// row 3: [0 0 0 0 0 0 0 0 4 0 0 0 0 0 0 0]
	// exit code 0 <nil>
}
