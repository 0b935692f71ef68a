package amudp

import (
	"reflect"
	"runtime"
)

// Handlers may only reply: a request sent from inside one would wait for
// credit that only its own goroutine's polling returns, which is inside
// the handler (GASNet's rule). Every handler runs through runHandler or
// runReturned, and a request checks whether one of them is on its own
// goroutine's stack: a walk of the stack, made only while some handler of
// the endpoint runs (handling), so that requests of other goroutines
// cost one atomic load otherwise.

// runHandler runs a message's handler h. It must stay a frame of its own
// (inHandler looks for it on the stack).
//
//go:noinline
func (e *Endpoint) runHandler(h Handler, t *Token, args []uint32, payload []byte) {
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

// handlerEntries are the entry PCs of runHandler and runReturned.
var handlerEntries = [2]uintptr{
	runtime.FuncForPC(reflect.ValueOf((*Endpoint).runHandler).Pointer()).Entry(),
	runtime.FuncForPC(reflect.ValueOf((*Endpoint).runReturned).Pointer()).Entry(),
}

// maxHandlerDepth bounds the frames inHandler looks through: a handler
// that calls deeper than this before it sends a request is not caught.
const maxHandlerDepth = 128

// inHandler reports whether the calling goroutine is running a handler of
// e (any endpoint's, in fact: the frames are the same).
func (e *Endpoint) inHandler() bool {
	if e.handling.Load() == 0 {
		return false
	}
	var pcs [maxHandlerDepth]uintptr
	n := runtime.Callers(2, pcs[:])
	for _, pc := range pcs[:n] {
		if f := runtime.FuncForPC(pc - 1); f != nil {
			if entry := f.Entry(); entry == handlerEntries[0] || entry == handlerEntries[1] {
				return true
			}
		}
	}
	return false
}
