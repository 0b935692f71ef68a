package wire

import "encoding/binary"

// An automatic reply (KindAutoReply) is sent when a request handler returns
// without replying, so that the request's credit is freed. It acknowledges
// the request of its header's (Slot, Seq) and, when it has a payload, the
// further requests listed there as little-endian (slot uint16, seq uint16)
// pairs: a receiver acknowledges a run of requests in one datagram
// (DESIGN.md §5).

// FlagAckNow on a request asks the receiver to send its automatic reply
// without holding it for others to share its datagram (at the end of the
// poll pass) or its record (on the shared-memory path, at once, with the
// run held before it): the sender may be about to wait for it.
const FlagAckNow uint8 = 1

// AckPairLen is the size of one further (slot, seq) pair in the payload of
// an AutoReply.
const AckPairLen = 4

// AppendAckPair appends one further (slot, seq) pair to the payload of an
// AutoReply.
func AppendAckPair(b []byte, slot, seq uint16) []byte {
	b = binary.LittleEndian.AppendUint16(b, slot)
	return binary.LittleEndian.AppendUint16(b, seq)
}

// AckPairs returns how many further (slot, seq) pairs an AutoReply carries.
func (m *Message) AckPairs() int { return len(m.Payload) / AckPairLen }

// AckPair returns the i-th further (slot, seq) pair of an AutoReply.
func (m *Message) AckPair(i int) (slot, seq uint16) {
	b := m.Payload[AckPairLen*i:]
	return binary.LittleEndian.Uint16(b), binary.LittleEndian.Uint16(b[2:])
}

// validateAck checks the fields of an AutoReply.
func validateAck(h *Header) error {
	if h.Len%AckPairLen != 0 {
		return ErrLength
	}
	if h.Handler != 0 || h.NArgs != 0 {
		return ErrFieldUnset
	}
	return nil
}
