package amudp

import (
	"reflect"
	"runtime"

	"github.com/udpconduit/udpconduit/amudp/internal/release"
)

// Handlers may only reply: a request sent from inside one would wait for
// credit that only its own goroutine's polling returns, which is inside
// the handler (GASNet's rule). Every handler runs through runHandler or
// runReturned, and a request checks whether one of them is on its own
// goroutine's stack: a walk of the stack, made only while some handler of
// the endpoint runs (handling, polledHandling), so that requests of other
// goroutines cost two atomic loads otherwise.

// runHandler runs the handler h of a message that a poll pass took, on the
// goroutine that holds the poll. It must stay a frame of its own
// (inHandler looks for it on the stack).
//
//go:noinline
func (e *Endpoint) runHandler(h Handler, t *Token, args []uint32, payload []byte) {
	// The holder of the poll alone writes polledHandling, and only its
	// own goroutine needs to see it non-zero: release stores do.
	release.Inc(&e.polledHandling)
	defer release.Store(&e.polledHandling, e.polledHandling.Load()-1)
	h(t, args, payload)
}

// runLocalHandler runs the handler h of a message to this endpoint on
// the sender's goroutine (runLocal), as runHandler runs the others.
//
//go:noinline
func (e *Endpoint) runLocalHandler(h Handler, t *Token, args []uint32, payload []byte) {
	e.handling.Add(1)
	defer e.handling.Add(-1)
	h(t, args, payload)
}

// runReturned runs handler 0, h, for r, as runHandler runs the others.
//
//go:noinline
func (e *Endpoint) runReturned(h func(Returned), r Returned) {
	e.handling.Add(1)
	defer e.handling.Add(-1)
	h(r)
}

// handlerEntries are the entry PCs of runHandler, runLocalHandler and
// runReturned.
var handlerEntries = [3]uintptr{
	runtime.FuncForPC(reflect.ValueOf((*Endpoint).runHandler).Pointer()).Entry(),
	runtime.FuncForPC(reflect.ValueOf((*Endpoint).runLocalHandler).Pointer()).Entry(),
	runtime.FuncForPC(reflect.ValueOf((*Endpoint).runReturned).Pointer()).Entry(),
}

// maxHandlerDepth bounds the frames inHandler looks through: a handler
// that calls deeper than this before it sends a request is not caught.
const maxHandlerDepth = 128

// InHandler reports whether the calling goroutine is running a handler of
// e (any endpoint's, in fact: the frames are the same), for the calls a
// handler must not make.
func (e *Endpoint) InHandler() bool { return e.inHandler() }

// inHandler reports whether the calling goroutine is running a handler of
// e (any endpoint's, in fact: the frames are the same).
func (e *Endpoint) inHandler() bool {
	if e.handling.Load() == 0 && e.polledHandling.Load() == 0 {
		return false
	}
	var pcs [maxHandlerDepth]uintptr
	n := runtime.Callers(2, pcs[:])
	for _, pc := range pcs[:n] {
		if f := runtime.FuncForPC(pc - 1); f != nil {
			if entry := f.Entry(); entry == handlerEntries[0] || entry == handlerEntries[1] || entry == handlerEntries[2] {
				return true
			}
		}
	}
	return false
}
