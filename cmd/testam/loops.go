package main

import (
	"fmt"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

// loopsTimed is the number of loops -barrier and -allreduce time, as many
// as GASNet's testbarrier times (of its six kinds of barrier).
const loopsTimed = 6

// barriers times loopsTimed loops of iters barriers of the whole job:
// Barrier, and BarrierNB then Wait, in turn, as "barrier" and
// "barrier_nb".
func barriers(iters int, emit func(Result)) error {
	world := conduit.World()
	return loops(iters, emit,
		loop{"barrier", world.Barrier},
		loop{"barrier_nb", func() error { _, err := world.BarrierNB().Wait(); return err }})
}

// allReduces times loopsTimed loops of iters sums of one uint64 over the
// whole job, each checked: AllReduce, and AllReduceNB then Wait, in turn,
// as "allreduce" and "allreduce_nb".
func allReduces(iters int, emit func(Result)) error {
	world, me, n := conduit.World(), uint64(conduit.Rank()), uint64(conduit.Size())
	v := []uint64{me}
	check := func(sum []uint64, err error) error {
		if want := n * (n - 1) / 2; err == nil && (len(sum) != 1 || sum[0] != want) {
			err = fmt.Errorf("rank %d: sum %v, want [%d]", me, sum, want)
		}
		return err
	}
	return loops(iters, emit,
		loop{"allreduce", func() error { return check(conduit.AllReduce(world, conduit.Sum, v)) }},
		loop{"allreduce_nb", func() error { return check(conduit.AllReduceNB(world, conduit.Sum, v).Wait()) }})
}

// A loop is one collective named as rank 0 reports it.
type loop struct {
	name string
	op   func() error
}

// loops times, as GASNet's testbarrier does, loopsTimed loops of iters
// calls on every rank, each after min(100, iters/100) calls to warm up
// and a barrier to start together; the loops take blocking and
// non-blocking in turn. Rank 0 reports each loop per call.
func loops(iters int, emit func(Result), blocking, nb loop) error {
	for i := range loopsTimed {
		l := blocking
		if i%2 == 1 {
			l = nb
		}
		for range min(100, iters/100) {
			if err := l.op(); err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
		}
		if err := conduit.Barrier(); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		start := time.Now()
		for range iters {
			if err := l.op(); err != nil {
				return fmt.Errorf("%s: %w", l.name, err)
			}
		}
		d := time.Since(start)
		if conduit.Rank() == 0 {
			emit(Result{Test: l.name, Iters: iters, US: us(d, iters), Ranks: conduit.Size()})
		}
	}
	return nil
}
