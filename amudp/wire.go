package amudp

import (
	"encoding/binary"
	"errors"
)

// Kind is the message kind carried in the header.
type Kind uint8

// Message kinds. Requests and replies come in the three categories of
// active messages; AutoReply and Returned are system replies that run no user
// handler (DESIGN.md §3, §4).
const (
	KindShortRequest  Kind = 1
	KindMediumRequest Kind = 2
	KindLongRequest   Kind = 3
	KindShortReply    Kind = 4
	KindMediumReply   Kind = 5
	KindLongReply     Kind = 6
	// KindAutoReply is sent when a request handler returns without replying,
	// so that the request's credit is freed. It acknowledges the request of
	// its header's (Slot, Seq) and, when it has a payload, the further
	// requests listed there as little-endian (slot uint16, seq uint16)
	// pairs: a receiver acknowledges a run of requests in one datagram.
	KindAutoReply Kind = 7
	// KindReturned refuses a request; Args[0] is the Reason.
	KindReturned Kind = 8
	kindLast          = KindReturned
)

var kindNames = [...]string{"invalid", "short-request", "medium-request", "long-request",
	"short-reply", "medium-reply", "long-reply", "auto-reply", "returned"}

// String returns the kind's name.
func (k Kind) String() string {
	if k > kindLast {
		return "invalid"
	}
	return kindNames[k]
}

// IsRequest reports whether k is a request kind.
func (k Kind) IsRequest() bool { return k >= KindShortRequest && k <= KindLongRequest }

// Category is the AM category of a kind: Short, Medium or Long.
type Category uint8

// The three categories of active messages.
const (
	Short Category = iota
	Medium
	Long
)

// String returns the category's name.
func (c Category) String() string {
	switch c {
	case Short:
		return "short"
	case Medium:
		return "medium"
	case Long:
		return "long"
	}
	return "invalid"
}

// Category returns the category of a request or user reply kind; system
// kinds are Short.
func (k Kind) Category() Category {
	switch k {
	case KindMediumRequest, KindMediumReply:
		return Medium
	case KindLongRequest, KindLongReply:
		return Long
	}
	return Short
}

func requestKind(c Category) Kind { return KindShortRequest + Kind(c) }
func replyKind(c Category) Kind   { return KindShortReply + Kind(c) }

// Reason says why a request was returned to its sender (DESIGN.md §4).
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
	// (the request is undeliverable; generated locally).
	ReasonTimeout
	// ReasonClosed: the endpoint was closed with the request in flight
	// (generated locally).
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

// Header is the fixed part of every datagram. The layout, little-endian:
//
//	0  version  uint8     1  kind    uint8    2 handler uint8   3 nargs uint8
//	4  tag      uint64   12  src     uint32  16 slot    uint16 18 seq   uint16
//	20 length   uint32   24  offset  uint64
//
// then nargs × uint32 arguments, then length payload bytes.
type Header struct {
	Kind Kind
	// Flags share the kind's byte: the kind in the low four bits, flags in
	// the high four.
	Flags   uint8
	Handler uint8
	NArgs   uint8
	// Tag is derived from the job secret and the destination rank; a
	// datagram with another tag is dropped (see Tag).
	Tag uint64
	// Src is the sender's rank.
	Src uint32
	// Slot is the credit instance the request uses at its sender.
	Slot uint16
	// Seq is the slot's sequence number; a reply carries its request's.
	Seq uint16
	// Len is the payload length.
	Len uint32
	// Offset is the destination offset of a Long message in the receiver's
	// segment; zero for other kinds.
	Offset uint64
}

// FlagAckNow on a request asks the receiver to send its automatic reply at
// the end of the poll pass instead of letting it wait for others to share
// its datagram: the sender may be about to wait for it.
const FlagAckNow uint8 = 1

// AckPairLen is the size of one further (slot, seq) pair in the payload of
// an AutoReply.
const AckPairLen = 4

// AckPair returns the i-th further (slot, seq) pair of an AutoReply.
func (m *Message) AckPair(i int) (slot, seq uint16) {
	b := m.Payload[AckPairLen*i:]
	return binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:])
}

// Message is a decoded datagram. Payload aliases the decoded buffer.
type Message struct {
	Header
	Args    [MaxArgs]uint32
	Payload []byte
}

// Errors of Decode. Each names what is wrong with a received datagram.
var (
	ErrTruncated  = errors.New("amudp: datagram shorter than its header says")
	ErrVersion    = errors.New("amudp: unknown protocol version")
	ErrKind       = errors.New("amudp: unknown message kind")
	ErrNArgs      = errors.New("amudp: more than 16 arguments")
	ErrLength     = errors.New("amudp: payload length does not match the datagram")
	ErrFieldUnset = errors.New("amudp: field must be zero for this kind")
	ErrFlags      = errors.New("amudp: unknown flags, or flags on a reply")
)

// validate checks the header fields that do not depend on the datagram size.
func (h *Header) validate() error {
	if h.Kind < KindShortRequest || h.Kind > kindLast {
		return ErrKind
	}
	if h.Flags&^FlagAckNow != 0 || (h.Flags != 0 && !h.Kind.IsRequest()) {
		return ErrFlags
	}
	if h.NArgs > MaxArgs {
		return ErrNArgs
	}
	if h.Len > MaxLong {
		return ErrLength
	}
	switch {
	case h.Kind == KindAutoReply:
		if h.Len%AckPairLen != 0 {
			return ErrLength
		}
	case h.Kind.Category() == Short:
		if h.Len != 0 {
			return ErrLength
		}
	}
	if h.Kind.Category() != Long && h.Offset != 0 {
		return ErrFieldUnset
	}
	switch h.Kind {
	case KindAutoReply:
		if h.Handler != 0 || h.NArgs != 0 {
			return ErrFieldUnset
		}
	case KindReturned:
		if h.NArgs != 1 {
			return ErrNArgs
		}
	}
	return nil
}

// Size returns the encoded size of m.
func (m *Message) Size() int { return HeaderLen + 4*int(m.NArgs) + len(m.Payload) }

// Append encodes m onto b and returns the extended slice. m.Len is taken from
// len(m.Payload). It allocates only when b lacks capacity.
func (m *Message) Append(b []byte) ([]byte, error) {
	m.Len = uint32(len(m.Payload))
	if err := m.validate(); err != nil {
		return b, err
	}
	n := len(b)
	b = grow(b, m.Size())
	p := b[n:]
	p[0] = Version
	p[1] = byte(m.Kind) | m.Flags<<4
	p[2] = m.Handler
	p[3] = m.NArgs
	binary.LittleEndian.PutUint64(p[4:], m.Tag)
	binary.LittleEndian.PutUint32(p[12:], m.Src)
	binary.LittleEndian.PutUint16(p[16:], m.Slot)
	binary.LittleEndian.PutUint16(p[18:], m.Seq)
	binary.LittleEndian.PutUint32(p[20:], m.Len)
	binary.LittleEndian.PutUint64(p[24:], m.Offset)
	o := HeaderLen
	for _, a := range m.Args[:m.NArgs] {
		binary.LittleEndian.PutUint32(p[o:], a)
		o += 4
	}
	copy(p[o:], m.Payload)
	return b, nil
}

// grow extends b by n bytes, reallocating only when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// Decode parses a datagram into m. m.Payload aliases b. It never panics; an
// error says why b is not a valid datagram, and whatever Decode accepts,
// Append encodes to the same bytes.
func Decode(b []byte, m *Message) error {
	if len(b) < HeaderLen {
		return ErrTruncated
	}
	if b[0] != Version {
		return ErrVersion
	}
	m.Kind, m.Flags = Kind(b[1]&0x0f), b[1]>>4
	m.Handler = b[2]
	m.NArgs = b[3]
	m.Tag = binary.LittleEndian.Uint64(b[4:])
	m.Src = binary.LittleEndian.Uint32(b[12:])
	m.Slot = binary.LittleEndian.Uint16(b[16:])
	m.Seq = binary.LittleEndian.Uint16(b[18:])
	m.Len = binary.LittleEndian.Uint32(b[20:])
	m.Offset = binary.LittleEndian.Uint64(b[24:])
	if err := m.validate(); err != nil {
		return err
	}
	argEnd := HeaderLen + 4*int(m.NArgs)
	if len(b) < argEnd {
		return ErrTruncated
	}
	if len(b)-argEnd != int(m.Len) {
		return ErrLength
	}
	for i := 0; i < int(m.NArgs); i++ {
		m.Args[i] = binary.LittleEndian.Uint32(b[HeaderLen+4*i:])
	}
	m.Payload = b[argEnd:]
	return nil
}
