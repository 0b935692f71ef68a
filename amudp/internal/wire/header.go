package wire

import (
	"encoding/binary"
	"errors"
)

// Header is the fixed part of every datagram. The layout, little-endian:
//
//	0  version  uint8     1  kind    uint8    2 handler uint8   3 nargs uint8
//	4  dst      uint32    8  nonce   uint64  16 src     uint32
//	20 slot     uint16   22  seq     uint16  24 length  uint32
//	28 offset   uint64
//
// then nargs × uint32 arguments, then length payload bytes; a sealed
// datagram ends with a TagLen-byte tag, a large Long one with a second
// (seal.go). Bytes 8–20, the nonce and the sender's rank, are the nonce it
// is sealed with.
type Header struct {
	Kind Kind
	// Flags share the kind's byte: the kind in the low four bits, flags in
	// the high four.
	Flags   uint8
	Handler uint8
	NArgs   uint8
	// Dst is the rank the datagram is for; Seal sets it.
	Dst uint32
	// Nonce numbers the datagrams a rank seals, never twice the
	// same; Seal sets it.
	Nonce uint64
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

// FlagInPlace on a Long request or reply says that its payload, Len bytes,
// is already in the receiver's segment at Offset: the sender maps that
// segment (ranks of one host sharing memory) and wrote it there before it
// sent the datagram, which carries no payload.
const FlagInPlace uint8 = 2

// FlagDirect marks a message that went through a shared-memory inbox
// outside the datagram protocol (amudp's direct path between ranks of one
// host): it is not sealed (no tag, Dst and Nonce zero), Slot and Seq hold the request's
// number on the sender's path (a reply echoes its request's), a returned
// message may carry its request's kind as a second argument, and it is never
// retransmitted, as the inbox neither loses nor repeats. A datagram that
// comes by any other way with this flag is dropped.
const FlagDirect uint8 = 4

// FlagRouted marks a datagram of a rank that knows every rank's published
// addresses and takes datagrams from any of them (amudp's Router): its
// peers may then send to it at any of its addresses, not only the one of
// the address table. It may be set on any kind. With it the four flag
// bits are all in use: another flag needs another protocol version.
const FlagRouted uint8 = 8

// Message is a decoded datagram. Payload aliases the decoded buffer.
type Message struct {
	Header
	Args    [MaxArgs]uint32
	Payload []byte
}

// Errors of Decode. Each names what is wrong with a received datagram.
var (
	ErrTruncated  = errors.New("wire: datagram shorter than its header says")
	ErrVersion    = errors.New("wire: unknown protocol version")
	ErrKind       = errors.New("wire: unknown message kind")
	ErrNArgs      = errors.New("wire: more than 16 arguments")
	ErrLength     = errors.New("wire: payload length does not match the datagram")
	ErrFieldUnset = errors.New("wire: field must be zero for this kind")
	ErrFlags      = errors.New("wire: unknown flags, or flags on a reply")
)

// validate checks the header fields that do not depend on the datagram size.
func (h *Header) validate() error {
	if h.Kind < KindShortRequest || h.Kind > kindLast {
		return ErrKind
	}
	if h.Flags&^(FlagAckNow|FlagInPlace|FlagDirect|FlagRouted) != 0 || (h.Flags&FlagAckNow != 0 && !h.Kind.IsRequest()) ||
		(h.Flags&FlagInPlace != 0 && h.Kind.Category() != Long) {
		return ErrFlags
	}
	if h.NArgs > MaxArgs {
		return ErrNArgs
	}
	if h.Len > MaxLong {
		return ErrLength
	}
	if h.Kind != KindAutoReply && h.Kind.Category() == Short && h.Len != 0 {
		return ErrLength
	}
	if h.Kind.Category() != Long && h.Offset != 0 {
		return ErrFieldUnset
	}
	switch h.Kind {
	case KindAutoReply:
		return validateAck(h)
	case KindReturned:
		return validateReturned(h)
	}
	return nil
}

// Size returns the encoded size of m.
func (m *Message) Size() int { return HeaderLen + 4*int(m.NArgs) + len(m.Payload) }

// Append encodes m onto b and returns the extended slice. m.Len is taken from
// len(m.Payload), unless m carries FlagInPlace, whose Len the caller sets
// and whose Payload is empty. It allocates only when b lacks capacity.
func (m *Message) Append(b []byte) ([]byte, error) {
	if m.Flags&FlagInPlace != 0 && len(m.Payload) != 0 {
		return b, ErrLength
	}
	b, err := m.AppendHead(b)
	if err != nil {
		return b, err
	}
	n := len(b)
	b = grow(b, len(m.Payload))
	copy(b[n:], m.Payload)
	return b, nil
}

// AppendHead encodes m as Append does but without the payload bytes: the
// header, whose length field says len(m.Payload) (or m.Len with
// FlagInPlace), and the arguments. The caller sends the payload right
// after them.
func (m *Message) AppendHead(b []byte) ([]byte, error) {
	if m.Flags&FlagInPlace == 0 {
		m.Len = uint32(len(m.Payload))
	}
	if m.NArgs > MaxArgs {
		return b, ErrNArgs
	}
	return m.Header.AppendTo(b, m.Args[:m.NArgs])
}

// AppendTo encodes h and args, h.NArgs of them, onto b as AppendHead
// does, for a caller that holds the arguments in a slice of its own:
// h.Len is the payload's length as it is.
func (h *Header) AppendTo(b []byte, args []uint32) ([]byte, error) {
	if err := h.validate(); err != nil {
		return b, err
	}
	if len(args) != int(h.NArgs) {
		return b, ErrNArgs
	}
	n := len(b)
	b = grow(b, HeaderLen+4*len(args))
	p := b[n:]
	p[0] = Version
	p[1] = byte(h.Kind) | h.Flags<<4
	p[2] = h.Handler
	p[3] = h.NArgs
	binary.LittleEndian.PutUint32(p[4:], h.Dst)
	binary.LittleEndian.PutUint64(p[8:], h.Nonce)
	binary.LittleEndian.PutUint32(p[16:], h.Src)
	binary.LittleEndian.PutUint16(p[20:], h.Slot)
	binary.LittleEndian.PutUint16(p[22:], h.Seq)
	binary.LittleEndian.PutUint32(p[24:], h.Len)
	binary.LittleEndian.PutUint64(p[28:], h.Offset)
	o := HeaderLen
	for _, a := range args {
		binary.LittleEndian.PutUint32(p[o:], a)
		o += 4
	}
	return b, nil
}

// grow extends b by n bytes, reallocating only when its capacity is short.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n+2*TagLen) // room for Seal's tags
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}

// Decode parses a datagram, opened (its tag removed, see Key.Open), into
// m. m.Payload aliases b. It never panics; an
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
	m.Dst = binary.LittleEndian.Uint32(b[4:])
	m.Nonce = binary.LittleEndian.Uint64(b[8:])
	m.Src = binary.LittleEndian.Uint32(b[16:])
	m.Slot = binary.LittleEndian.Uint16(b[20:])
	m.Seq = binary.LittleEndian.Uint16(b[22:])
	m.Len = binary.LittleEndian.Uint32(b[24:])
	m.Offset = binary.LittleEndian.Uint64(b[28:])
	if err := m.validate(); err != nil {
		return err
	}
	argEnd := HeaderLen + 4*int(m.NArgs)
	if len(b) < argEnd {
		return ErrTruncated
	}
	if carried := len(b) - argEnd; (m.Flags&FlagInPlace == 0 && carried != int(m.Len)) || (m.Flags&FlagInPlace != 0 && carried != 0) {
		return ErrLength
	}
	for i := 0; i < int(m.NArgs); i++ {
		m.Args[i] = binary.LittleEndian.Uint32(b[HeaderLen+4*i:])
	}
	m.Payload = b[argEnd:]
	return nil
}
