// Command mismatch is a test job of collectives that the ranks of a team
// call differently at the same point (tests/mismatch_test.go):
//
//	mismatch N allreduce-types  even team ranks all-reduce (Sum) a []uint64,
//	                            odd ones a []int64, on the whole job's team
//	mismatch N split-allgather  even ranks Split the whole job's team, odd
//	                            ones AllGather 16 bytes on it
//	mismatch N split-barrier    even ranks Split it, odd ones Barrier on it
//	mismatch N scatter-parts    rank 0 Scatters Size()+1 parts of 8 bytes
//	                            from itself, the others Scatter(0, nil)
//
// Each rank prints one line of what that call returned:
//
//	rank R: CASE: mismatch       an error wrapping ErrCollectiveMismatch
//	rank R: CASE: error: ERR     another error
//	rank R: CASE: no error
//
// then all-reduces its rank (Sum of a []uint64) on the same team, prints
// "rank R: next: sum S" (or "rank R: next: error: ERR") and calls Exit(0).
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/udpconduit/udpconduit/conduit"
)

const usage = "allreduce-types|split-allgather|split-barrier|scatter-parts"

func main() {
	conduit.Usage = usage
	conduit.Init()
	w := conduit.World()
	r, n := w.Rank(), w.Size()
	mode := ""
	if len(os.Args) == 2 {
		mode = os.Args[1]
	}
	even := r%2 == 0
	var err error
	switch mode {
	case "allreduce-types":
		if even {
			_, err = conduit.AllReduce(w, conduit.Sum, []uint64{1})
		} else {
			_, err = conduit.AllReduce(w, conduit.Sum, []int64{1})
		}
	case "split-allgather":
		if even {
			_, err = w.Split(0, r)
		} else {
			_, err = w.AllGather(make([]byte, 16))
		}
	case "split-barrier":
		if even {
			_, err = w.Split(0, r)
		} else {
			err = w.Barrier()
		}
	case "scatter-parts":
		var parts [][]byte
		if r == 0 {
			for range n + 1 {
				parts = append(parts, make([]byte, 8))
			}
		}
		_, err = w.Scatter(0, parts)
	default:
		if r == 0 {
			fmt.Fprintf(os.Stderr, "mismatch: mode %q: accepted: %s\n", mode, usage)
		}
		conduit.Exit(1)
	}
	switch {
	case errors.Is(err, conduit.ErrCollectiveMismatch):
		fmt.Printf("rank %d: %s: mismatch\n", r, mode)
	case err != nil:
		fmt.Printf("rank %d: %s: error: %v\n", r, mode, err)
	default:
		fmt.Printf("rank %d: %s: no error\n", r, mode)
	}
	sum, err := conduit.AllReduce(w, conduit.Sum, []uint64{uint64(r)})
	switch {
	case err != nil:
		fmt.Printf("rank %d: next: error: %v\n", r, err)
	case len(sum) == 1:
		fmt.Printf("rank %d: next: sum %d\n", r, sum[0])
	default:
		fmt.Printf("rank %d: next: sum %v\n", r, sum)
	}
	conduit.Exit(0)
}
