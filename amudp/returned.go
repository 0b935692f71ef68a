package amudp

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Returned describes a message that could not run: a request of this
// endpoint refused by its receiver or given up after the retransmission time
// (DESIGN.md §5), or a reply that reached this endpoint and was refused here
// (Incoming).
type Returned struct {
	Reason Reason
	// Dest is the other side: the rank the request was sent to, or for an
	// Incoming reply the rank that sent it.
	Dest    int
	Addr    netip.AddrPort
	Kind    Kind  // the kind of the message
	Handler uint8 // the handler index it named
	// Incoming is true for a reply from Dest that this endpoint refused.
	Incoming bool
	// Tried lists the addresses of Dest that a request undeliverable
	// within the timeout went to, when its Router gave more than one and
	// none carried a reply (route.go); nil otherwise.
	Tried []netip.AddrPort
}

// String says who did what, e.g. "short-request to rank 1 at
// 127.0.0.1:4000 (handler 130) was refused by rank 1: no handler registered
// at that index".
func (r Returned) String() string {
	switch {
	case r.Incoming:
		return fmt.Sprintf("%s from rank %d at %v (handler %d) was refused here: %s", r.Kind, r.Dest, r.Addr, r.Handler, r.Reason)
	case r.Reason == ReasonTimeout || r.Reason == ReasonClosed:
		return fmt.Sprintf("%s to rank %d at %s (handler %d) is undeliverable: %s", r.Kind, r.Dest, r.Where(), r.Handler, r.Reason)
	}
	return fmt.Sprintf("%s to rank %d at %v (handler %d) was refused by rank %d: %s", r.Kind, r.Dest, r.Addr, r.Handler, r.Dest, r.Reason)
}

// ReturnedHandler is handler 0: it receives requests that could not be
// delivered. It runs on the polling goroutine.
type ReturnedHandler func(r Returned)

// ReturnedError is what Poll and the waiting calls return when a request was
// returned and no ReturnedHandler is set.
type ReturnedError struct{ Returned }

func (e *ReturnedError) Error() string { return "amudp: " + e.Returned.String() }

// Timeout reports whether the request was undeliverable within the request
// timeout (net.Error).
func (e *ReturnedError) Timeout() bool { return e.Reason == ReasonTimeout }

// Temporary is false: net.Error.
func (e *ReturnedError) Temporary() bool { return false }

// Unwrap makes a closed-endpoint return match net.ErrClosed.
func (e *ReturnedError) Unwrap() error {
	if e.Reason == ReasonClosed {
		return net.ErrClosed
	}
	return nil
}

var _ net.Error = (*ReturnedError)(nil)

// takeRetErr returns and clears the pending returned-request error.
func (e *Endpoint) takeRetErr() error {
	if !e.retPending.Load() {
		return nil
	}
	e.mu.Lock()
	err := e.retErr
	e.retErr = nil
	e.retPending.Store(false)
	e.mu.Unlock()
	return err
}

// returned hands a returned request to handler 0, or keeps it as the error
// of the next poll.
func (e *Endpoint) returned(r Returned) {
	e.stats.returned.Add(1)
	e.mu.Lock()
	h := e.onRet
	if h == nil && e.retErr == nil {
		e.retErr = &ReturnedError{r}
		e.retPending.Store(true)
	}
	e.mu.Unlock()
	if h != nil {
		e.runReturned(h, r)
	}
}

// Where is Addr, or, when several addresses were tried, all of them:
// "10.78.0.2:4000 or 10.77.0.2:4000, tried in turn".
func (r Returned) Where() string {
	if len(r.Tried) == 0 {
		return r.Addr.String()
	}
	var b strings.Builder
	for i, a := range r.Tried {
		if i > 0 {
			b.WriteString(" or ")
		}
		b.WriteString(a.String())
	}
	b.WriteString(", tried in turn")
	return b.String()
}
