// Command ending is a test job of how a job ends (tests/ending_test.go):
//
//	ending N broadcast     a broadcast from the last rank, whose result each
//	                       rank prints, then Exit(0) at once
//	ending N allreduce     the same with a sum of the ranks
//	ending N lastget-exit  after the final barrier rank 0 Gets a word from
//	                       the last rank and prints it; the others Exit(0)
//	ending N lastget-final the same, every rank ending with Finalize(0)
//	ending N final-codes   every rank calls Finalize(rank % 3)
//	ending N final-barrier rank 0 calls Finalize(0), the others Barrier
//	ending N final-exit    rank 0 calls Finalize(3), then the others Exit(0)
//
// A rank whose call fails says so on stderr and ends the job with 1.
package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

func check(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "rank %d: %s: %v\n", conduit.Rank(), what, err)
		conduit.Exit(1)
	}
}

func main() {
	conduit.Usage = "broadcast|allreduce|lastget-exit|lastget-final|final-codes|final-barrier|final-exit"
	conduit.Init()
	r, n := conduit.Rank(), conduit.Size()
	seg, err := conduit.Attach(nil, 4096)
	check("Attach", err)
	mode := ""
	if len(os.Args) == 2 {
		mode = os.Args[1]
	}
	switch mode {
	case "broadcast":
		b, err := conduit.World().Broadcast(n-1, []byte(fmt.Sprintf("from %d", n-1)))
		check("Broadcast", err)
		fmt.Printf("rank %d: broadcast %q\n", r, b)
		conduit.Exit(0)
	case "allreduce":
		s, err := conduit.AllReduce(conduit.World(), conduit.Sum, []uint64{uint64(r)})
		check("AllReduce", err)
		fmt.Printf("rank %d: sum %d\n", r, s[0])
		conduit.Exit(0)
	case "lastget-exit", "lastget-final":
		binary.LittleEndian.PutUint64(seg, uint64(1000+r))
		check("Barrier", conduit.Barrier())
		if r == 0 {
			// The others are past the barrier by now: with Exit they
			// have ended the job.
			time.Sleep(100 * time.Millisecond)
			buf := make([]byte, 8)
			check("Get", conduit.Get(n-1, 0, buf))
			fmt.Printf("rank 0 got %d from rank %d\n", binary.LittleEndian.Uint64(buf), n-1)
		}
		if mode == "lastget-exit" {
			conduit.Exit(0)
		}
		conduit.Finalize(0)
	case "final-codes":
		conduit.Finalize(r % 3)
	case "final-barrier":
		if r == 0 {
			conduit.Finalize(0)
		}
		check("Barrier", conduit.Barrier())
		conduit.Exit(0)
	case "final-exit":
		if r == 0 {
			conduit.Finalize(3)
		}
		time.Sleep(200 * time.Millisecond) // rank 0's Finalize comes first
		conduit.Exit(0)
	}
	if r == 0 {
		fmt.Fprintf(os.Stderr, "ending: mode %q: accepted: %s\n", mode, conduit.Usage)
	}
	conduit.Exit(1)
}
