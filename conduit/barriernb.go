package conduit

// This file is BarrierNB on shared words in two halves: its arrival at
// the call, its completion at Wait or Test.

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// splitBarrier is a BarrierNB of World on the group's words whose arrival
// ran at its call (teamCall.post) and whose completion (Team.collected)
// runs at its Wait, at a Test that finds every rank arrived, or at the
// turn of the team's next call, which waits for it anyway (Team.turn).
// It holds the team's turn until then. It is made only where what
// remains after the arrival asks nothing more of this rank
// (words.passive): the other ranks complete the barrier whether this one
// waits or not.
type splitBarrier struct {
	t   *Team
	mu  sync.Mutex
	fin atomic.Bool // completed: err is set
	err error
	// polled: the error of a Test's poll pass, which the barrier's wait
	// returns, as a Barrier's wait returns its polls' errors.
	polled atomic.Pointer[error]
}

// barrierNB makes BarrierNB's call n, its ticket, a splitBarrier where
// that applies: n this rank's turn, no request of the rank's unanswered
// (the drain that begins a barrier then returns at once, unless another
// goroutine sends one in between, whose answer it then waits for), not
// from a handler, and World on words whose synchronisation is passive, or a
// team of one member, whose barrier it runs at once. Else nil.
func (t *Team) barrierNB(n uint64) *splitBarrier {
	j := t.j
	if j == nil || t.serving.Load() != n || j.ep.Outstanding() != 0 || j.ep.InHandler() {
		return nil
	}
	if len(t.ranks) != 1 && (!t.onWords() || !j.words.passive()) {
		return nil
	}
	s := &splitBarrier{t: t}
	// A call that ends the rank (the job ended, or aborted) passes the
	// turn on as it goes, as ordered's does.
	ok := false
	defer func() {
		if !ok {
			s.end(ErrInterrupted)
		}
	}()
	ended := func(err error) *splitBarrier {
		s.end(err)
		ok = true
		return s
	}
	if len(t.ranks) == 1 {
		return ended(t.barrier())
	}
	call := coll.Call{Kind: coll.Barrier}
	c, err := t.begin(call, true)
	if err != nil {
		return ended(err)
	}
	if err := c.post(j.words, coll.Post{Call: call}); err != nil {
		return ended(c.end(err))
	}
	if j.hangWarn > 0 {
		j.watch.leave(t.watch) // the rank does not wait until it waits
	}
	ok = true
	t.started.Store(s)
	t.wake()
	return s
}

// end ends the barrier with err, passes the team's turn on, and wakes a
// wait for it that sleeps in the network (WaitAny, WaitContext).
func (s *splitBarrier) end(err error) {
	s.err = err
	s.fin.Store(true)
	s.t.started.CompareAndSwap(s, nil)
	s.t.release()
	s.t.j.ep.Wake()
}

// ready reports, s.mu held, whether every rank has arrived.
func (s *splitBarrier) ready() bool {
	return s.fin.Load() || s.t.call.ready(s.t.j.words)
}

// complete waits until the barrier completes, and completes it.
func (s *splitBarrier) complete() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fin.Load() {
		return
	}
	t, j := s.t, s.t.j
	if j.hangWarn > 0 && !s.ready() {
		j.watch.enter(t.watch, &t.call, j.hangWarn)
	}
	_, err := t.collected(&t.call, nil, nil, nil)
	s.end(err)
}

// done reports whether the barrier can complete without waiting: it
// completed, or every rank has arrived. A look without a wait, from any
// goroutine, a wait's condition too.
func (s *splitBarrier) done() bool {
	if s.fin.Load() {
		return true
	}
	if !s.mu.TryLock() {
		return false // another goroutine completes it
	}
	defer s.mu.Unlock()
	return s.ready()
}

// test is Handle.Test: done, and then the barrier completed, but from a
// handler (which must not wait for the poll pass it runs in); where not
// done, a poll pass, which ends the rank if the job has ended, and a
// look again.
func (s *splitBarrier) test() bool {
	j := s.t.j
	in := j.ep.InHandler()
	if !s.done() {
		if in {
			return false
		}
		if err := j.Poll(); err != nil {
			s.polled.CompareAndSwap(nil, &err)
		}
		if !s.done() {
			return false
		}
	}
	if !in {
		s.complete()
	}
	return true
}

// wait completes the barrier and returns its error, or that of a Test's
// poll pass; from a handler, ErrWaitInHandler unless it has completed.
func (s *splitBarrier) wait() error {
	if err := s.t.j.refuseWait(s.fin.Load()); err != nil {
		return err
	}
	s.complete()
	if p := s.polled.Load(); p != nil && s.err == nil {
		return s.t.j.done(*p)
	}
	return s.err
}

func (s *splitBarrier) waitContext(ctx context.Context) error {
	if err := s.t.j.refuseWait(s.fin.Load()); err != nil {
		return err
	}
	if err := s.t.j.waitContext(ctx, s.done); err != nil {
		return err
	}
	return s.wait()
}

func (s *splitBarrier) owner() *Job { return s.t.j }
