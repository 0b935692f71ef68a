package conduit

import (
	"context"
	"errors"
	"fmt"
)

// Handle is a non-blocking operation in progress (GASNet-EX's gex_Event_t,
// MPI_Request): every NB call returns one. Its methods may be called from
// any goroutine; WaitAll and WaitAny wait for handles of any result types.
type Handle[T any] struct {
	op  pending
	res valuer[T] // the result, once op completed without error; nil: T's zero
}

// valuer holds a Handle's result.
type valuer[T any] interface{ value() T }

// pending is an operation in progress, of any kind.
type pending interface {
	// done reports whether the operation completed.
	done() bool
	// wait waits until it completes, and returns its error.
	wait() error
	// waitContext is wait bounded by ctx, whose error it then returns;
	// the operation goes on.
	waitContext(ctx context.Context) error
	// owner is the Job whose network a wait for it services.
	owner() *Job
}

// Test reports whether the operation has completed; where it has not, it
// may poll the network once. From a handler, a split NB collective
// (Team.BarrierNB says which) that every rank has arrived at tests true,
// and completes at the rank's next Wait, Test outside a handler, or
// collective on the team.
func (h *Handle[T]) Test() bool {
	if t, ok := h.op.(tester); ok {
		return t.test()
	}
	return h.op.done()
}

// tester is a pending operation that Test completes where done finds it
// can complete (a splitColl): done alone is a look, for the condition
// of a wait.
type tester interface{ test() bool }

// Wait runs handlers until the operation completes and returns its result,
// the same at every Wait (a slice result, the same slice). Not from a
// handler: there a collective's is ErrWaitInHandler.
func (h *Handle[T]) Wait() (T, error) {
	if err := h.op.wait(); err != nil {
		var zero T
		return zero, err
	}
	return h.result(), nil
}

// WaitContext is Wait bounded by ctx: when ctx ends first it returns ctx's
// error, and the operation goes on.
func (h *Handle[T]) WaitContext(ctx context.Context) (T, error) {
	if err := h.op.waitContext(ctx); err != nil {
		var zero T
		return zero, err
	}
	return h.result(), nil
}

func (h *Handle[T]) result() T {
	if h.res == nil {
		var zero T
		return zero
	}
	return h.res.value()
}

func (h *Handle[T]) pending() pending { return h.op }

// Waiter is any Handle, whatever its result type, for WaitAll and
// WaitAny.
type Waiter interface {
	Test() bool
	pending() pending
}

// WaitAll waits for every handle and returns their errors joined.
func WaitAll(hs ...Waiter) error {
	var errs []error
	for i, h := range hs {
		if h == nil {
			continue
		}
		if err := h.pending().wait(); err != nil {
			errs = append(errs, fmt.Errorf("handle %d: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// WaitAny waits until one handle (nil ones skipped) has completed and returns
// its index and error; with none, -1 and ErrNoHandle.
func WaitAny(hs ...Waiter) (int, error) {
	var j *Job
	for _, h := range hs {
		if h != nil {
			j = h.pending().owner()
			break
		}
	}
	if j == nil {
		return -1, ErrNoHandle
	}
	first := -1
	done := func() bool {
		for i, h := range hs {
			if h != nil && h.pending().done() {
				first = i
				return true
			}
		}
		return false
	}
	j.enter()
	if !done() {
		if err := j.wait(done); err != nil {
			return -1, err
		}
	}
	return first, hs[first].pending().wait()
}

// handleOf wraps op, made by a call that may have failed.
func handleOf(op *rmaOp, err error) (*Handle[struct{}], error) {
	if err != nil {
		return nil, err
	}
	return &Handle[struct{}]{op: op}, nil
}

// waitNB waits for h, made by a call that may have failed.
func waitNB[T any](h *Handle[T], err error) error {
	if err != nil {
		return err
	}
	_, err = h.Wait()
	return err
}
