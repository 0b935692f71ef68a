package amudp

import "github.com/udpconduit/udpconduit/amudp/internal/wire"

// The names of the wire format that the endpoint's API uses, defined in
// amudp/internal/wire and exported here, once, for amudp's users.
type (
	// Kind is the message kind of a datagram (wire.Kind).
	Kind = wire.Kind
	// Category is Short, Medium or Long (wire.Category).
	Category = wire.Category
	// Reason says why a request was returned (wire.Reason).
	Reason = wire.Reason
)

// Message kinds (see package wire).
const (
	KindShortRequest  = wire.KindShortRequest
	KindMediumRequest = wire.KindMediumRequest
	KindLongRequest   = wire.KindLongRequest
	KindShortReply    = wire.KindShortReply
	KindMediumReply   = wire.KindMediumReply
	KindLongReply     = wire.KindLongReply
	KindAutoReply     = wire.KindAutoReply
	KindReturned      = wire.KindReturned
)

// The three categories of active messages.
const (
	Short  = wire.Short
	Medium = wire.Medium
	Long   = wire.Long
)

// Reasons for returning a request (see wire.Reason).
const (
	ReasonNone       = wire.ReasonNone
	ReasonBadHandler = wire.ReasonBadHandler
	ReasonNoSegment  = wire.ReasonNoSegment
	ReasonBadOffset  = wire.ReasonBadOffset
	ReasonTimeout    = wire.ReasonTimeout
	ReasonClosed     = wire.ReasonClosed
)

// Protocol limits (see package wire).
const (
	MaxArgs     = wire.MaxArgs
	MaxMedium   = wire.MaxMedium
	MaxLong     = wire.MaxLong
	MaxDatagram = wire.MaxDatagram
)
