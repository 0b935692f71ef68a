package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

// rmaSegment is the segment of every rank under -rma: the largest size
// that mode accepts.
const rmaSegment = 1 << 20

// defaultRMASizes are -rma's sizes: GASNet's testsmall measures latency
// at small sizes and testlarge bandwidth at large ones.
const defaultRMASizes = "8,1048576"

// parseRMASizes is parseSizes for -rma, whose sizes go up to its segment.
func parseRMASizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > rmaSegment {
			return nil, fmt.Errorf("-sizes %s: %q is not a size; accepted with -rma: comma-separated integers 1..%d", s, f, rmaSegment)
		}
		out = append(out, n)
	}
	return out, nil
}

// rma measures, from rank 0 to peer, blocking Puts and then blocking Gets
// of each size (GASNet's testsmall and testlarge, section A: PutBlocking
// and GetBlocking), each K times after a warm-up, and reports the time
// per operation and the bandwidth; the other ranks wait in the final
// barrier. Each timed loop calls Job.Put or Job.Get directly, as
// testsmall's loop calls gex_RMA_PutBlocking.
func rma(peer, iters int, sizes []int, emit func(Result)) error {
	j := conduit.Default()
	if j.Rank() != 0 {
		return nil
	}
	buf := make([]byte, rmaSegment)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, size := range sizes {
		b := buf[:size]
		for _, op := range []struct {
			name string
			run  func(n int) error // n operations
		}{
			{"put", func(n int) error {
				for range n {
					if err := j.Put(peer, 0, b); err != nil {
						return err
					}
				}
				return nil
			}},
			{"get", func(n int) error {
				for range n {
					if err := j.Get(peer, 0, b); err != nil {
						return err
					}
				}
				return nil
			}},
		} {
			for start := time.Now(); time.Since(start) < warmUp; {
				if err := op.run(100); err != nil {
					return fmt.Errorf("%s of %d bytes: %w", op.name, size, err)
				}
			}
			start := time.Now()
			if err := op.run(iters); err != nil {
				return fmt.Errorf("%s of %d bytes: %w", op.name, size, err)
			}
			d := time.Since(start)
			emit(Result{Test: op.name, Bytes: size, Iters: iters, US: us(d, iters), MBps: float64(size) * float64(iters) / d.Seconds() / 1e6})
		}
	}
	return nil
}
