package conduit

import (
	"context"
	"errors"
	"fmt"
)

// Handle is a non-blocking operation in progress, whose result Wait
// returns: a Put, Get or vector transfer (T is struct{}: its effect is in
// the segments or the caller's buffer), an atomic (the value the word held
// before, or struct{}), a collective (its result). Every non-blocking call
// of the package returns one (GASNet-EX's gex_Event_t, MPI's
// MPI_Request, UPC++'s future). Test, Wait and WaitContext may be called
// from any goroutine, by several at once; WaitAll and WaitAny wait for
// several, of any result types.
type Handle[T any] struct {
	op  pending
	get func() T // the result, once op completed without error; nil: T's zero
}

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

// Test reports whether the operation has completed (MPI_Test,
// gex_Event_Test): Wait then returns at once.
func (h *Handle[T]) Test() bool { return h.op.done() }

// Wait waits, servicing the network (see Job.WaitUntil for where handlers
// run meanwhile), until the operation completes, and returns its result.
// Not from a handler.
func (h *Handle[T]) Wait() (T, error) {
	if err := h.op.wait(); err != nil {
		var zero T
		return zero, err
	}
	return h.result(), nil
}

// WaitContext is Wait bounded by ctx: when ctx ends first it returns
// ctx's error, and the operation goes on; a later Wait or Test sees it
// complete.
func (h *Handle[T]) WaitContext(ctx context.Context) (T, error) {
	if err := h.op.waitContext(ctx); err != nil {
		var zero T
		return zero, err
	}
	return h.result(), nil
}

func (h *Handle[T]) result() T {
	if h.get == nil {
		var zero T
		return zero
	}
	return h.get()
}

func (h *Handle[T]) pending() pending { return h.op }

// Waiter is any Handle, whatever its result type, for WaitAll and
// WaitAny.
type Waiter interface {
	Test() bool
	pending() pending
}

// WaitAll waits until every handle's operation has completed (MPI_Waitall,
// gex_Event_WaitAll) and returns their errors joined (errors.Join), nil
// when none failed; each handle's result is then its Wait's, at once.
// Nil handles are skipped. Not from a handler.
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

// WaitAny waits until one of the handles' operations has completed
// (MPI_Waitany, gex_Event_WaitSome) and returns its index and error; its
// result is then its Wait's, at once. Nil handles are skipped; with none,
// it returns -1 and ErrNoHandle. Not from a handler.
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
			if h != nil && h.Test() {
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

// ErrNoHandle: WaitAny was given no handle to wait for.
var ErrNoHandle = errors.New("conduit: WaitAny: no handle")

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
