package main

import (
	"fmt"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

// barrierLoops is the number of loops -barrier times, as many as GASNet's
// testbarrier times (of its six kinds of barrier).
const barrierLoops = 6

// barriers times, as GASNet's testbarrier does, barrierLoops loops of
// iters barriers of the whole job on every rank, each after min(100,
// iters/100) barriers to warm up and one to start together; the loops
// call Barrier and BarrierNB then Wait in turn. Rank 0 reports each loop
// per barrier, as "barrier" or "barrier_nb".
func barriers(iters int, emit func(Result)) error {
	world := conduit.World()
	nb := func() error { _, err := world.BarrierNB().Wait(); return err }
	for i := range barrierLoops {
		name, op := "barrier", world.Barrier
		if i%2 == 1 {
			name, op = "barrier_nb", nb
		}
		for range min(100, iters/100) {
			if err := op(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		if err := world.Barrier(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		start := time.Now()
		for range iters {
			if err := op(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		d := time.Since(start)
		if conduit.Rank() == 0 {
			emit(Result{Test: name, Iters: iters, US: us(d, iters), Ranks: conduit.Size()})
		}
	}
	return nil
}
