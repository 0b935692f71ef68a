package conduit

// This file is the non-blocking form of every collective: its Handle.

import (
	"context"
	"fmt"
)

// collOp is a non-blocking collective in progress, behind its Handle,
// where it is not split (splitColl).
// The collective takes its place in this rank's order of calls on its
// team when it is started, and runs on a goroutine of its own, whose
// waits poll the network as every wait does; several may be in progress
// at once, on one team or several.
type collOp[T any] struct {
	t        *Team
	finish   chan struct{} // closed when f has returned
	finished bool          // f returned (else its goroutine ended with the rank)
	panicked any           // what f panicked with, passed on to Wait
	v        T
	err      error
}

// startNB starts f, a collective on t, as ordered would run it, and
// returns its handle at once.
func startNB[T any](t *Team, f func() (T, error)) *Handle[T] {
	return startAt(t, t.ticket(), f)
}

// startAt is startNB of the call that took ticket n.
func startAt[T any](t *Team, n uint64, f func() (T, error)) *Handle[T] {
	h := &collOp[T]{t: t, finish: make(chan struct{})}
	go func() {
		if t.j != nil {
			defer t.j.ep.Wake() // a WaitAny that sleeps in the network
		}
		defer close(h.finish)
		t.turn(n)
		defer t.release()
		defer func() {
			if p := recover(); p != nil {
				h.panicked = p
			}
		}()
		h.v, h.err = f()
		h.finished = true
	}()
	return &Handle[T]{op: h, res: h}
}

func (h *collOp[T]) value() T { return h.v }

// result returns what f returned, once done is closed: a panic of f's is
// passed on, and a collective cut short because the rank ends (the job
// ended, or aborted) ends the caller as any call then does.
func (h *collOp[T]) result() (T, error) {
	if h.panicked != nil {
		panic(h.panicked)
	}
	if !h.finished {
		h.t.j.enter()
		var zero T
		return zero, fmt.Errorf("conduit: the collective ended with the rank: %w", ErrInterrupted)
	}
	return h.v, h.err
}

func (h *collOp[T]) owner() *Job { return h.t.j }

// done reports whether the collective has completed.
func (h *collOp[T]) done() bool {
	select {
	case <-h.finish:
		return true
	default:
		return false
	}
}

// wait waits until the collective completes and returns its error; from
// a handler, ErrWaitInHandler unless it has completed.
func (h *collOp[T]) wait() error {
	if err := h.t.j.refuseWait(h.done()); err != nil {
		return err
	}
	<-h.finish
	_, err := h.result()
	return err
}

// waitContext is wait bounded by ctx: when ctx ends first it returns
// ctx's error, and the collective goes on (the other members need this
// rank's part); a later wait returns its result.
func (h *collOp[T]) waitContext(ctx context.Context) error {
	if err := h.t.j.refuseWait(h.done()); err != nil {
		return err
	}
	select {
	case <-h.finish:
		_, err := h.result()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refuseWait is ErrWaitInHandler for a wait for a collective that has
// not completed (done false) from a handler of j's: its completion would
// need the poll pass the handler runs in to end first. Else nil.
func (j *Job) refuseWait(done bool) error {
	if !done && j != nil && j.ep.InHandler() {
		return ErrWaitInHandler
	}
	return nil
}
