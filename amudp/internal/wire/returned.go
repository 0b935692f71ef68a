package wire

// A returned message (KindReturned) refuses a request: the receiver could not
// run it. Args[0] is the Reason; Handler echoes the handler index the request
// named (DESIGN.md §4).

// Reason says why a request was returned to its sender.
type Reason uint32

// Reasons for returning a request.
const (
	ReasonNone Reason = iota
	// ReasonBadHandler: the handler index has no handler registered at the
	// receiver.
	ReasonBadHandler
	// ReasonNoSegment: a Long message reached a receiver without a segment.
	ReasonNoSegment
	// ReasonBadOffset: a Long message would write outside the segment.
	ReasonBadOffset
	// ReasonTimeout: no reply came within the retransmission give-up time
	// (the request is undeliverable; generated locally, never sent).
	ReasonTimeout
	// ReasonClosed: the endpoint was closed with the request in flight
	// (generated locally, never sent).
	ReasonClosed
	reasonLast = ReasonClosed
)

var reasonNames = [...]string{"none", "no handler registered at that index",
	"receiver has no segment", "long payload outside the receiver's segment",
	"the peer sent nothing for the give-up time", "endpoint closed"}

// String describes the reason.
func (r Reason) String() string {
	if r > reasonLast {
		return "unknown reason"
	}
	return reasonNames[r]
}

// validateReturned checks the fields of a Returned message: one argument,
// the reason; a direct one (FlagDirect) may add the request's kind.
func validateReturned(h *Header) error {
	if h.NArgs != 1 && (h.Flags&FlagDirect == 0 || h.NArgs != 2) {
		return ErrNArgs
	}
	return nil
}
