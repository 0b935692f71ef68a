// Package wire is the datagram format of amudp: one fixed 36-byte header,
// up to 16 32-bit arguments, a payload and a 16-byte authentication tag,
// two on a large Long datagram (DESIGN.md §4). It has no I/O: Append
// encodes a Message onto a caller's buffer and Decode parses one without
// allocating, so the endpoint's hot path reuses its buffers.
//
// The message families have a file each: active messages (am.go: requests
// and the replies of handlers), automatic replies that acknowledge requests
// in batches (ack.go), and refusals (returned.go). The header and the codec
// shared by all of them are in header.go; sealing and opening (GMAC,
// AEGIS-128X2 and AES-GCM keyed by the job secret) in seal.go.
package wire

// Protocol limits, from AMUDP 3.x on Linux (DESIGN.md §3, §4).
const (
	// Version is the wire-format version carried in every datagram.
	Version = 4

	// HeaderLen is the size of the fixed header in bytes.
	HeaderLen = 36

	// TagLen is the size of the authentication tag that ends every sealed
	// datagram.
	TagLen = 16

	// MaxArgs is the largest number of 32-bit arguments per message.
	MaxArgs = 16

	// MaxMedium is the largest Medium payload in bytes (AMUDP's AM_MaxMedium).
	MaxMedium = 65000

	// MaxLong is the largest Long payload in bytes (AMUDP's AM_MaxLong).
	MaxLong = 65000

	// MaxDatagram is the largest datagram the protocol produces, its tags
	// included (a Long one's two: seal.go).
	MaxDatagram = HeaderLen + 4*MaxArgs + MaxLong + 2*TagLen
)
