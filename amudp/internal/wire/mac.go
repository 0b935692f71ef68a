package wire

import (
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
)

// Datagram authentication (DESIGN.md §4). The header's Tag field carries a
// 64-bit MAC, SipHash-2-4 keyed by the job secret, over
//
//	destination rank (uint32) ‖ header bytes 0–3 ‖ header bytes 12–31 ‖ arguments
//
// and the payload too when the job authenticates payloads, and always for
// automatic replies, whose payload acknowledges requests. A datagram whose
// MAC does not verify is dropped before any field of it is believed: a
// forged or bit-flipped datagram (or one of another job, or meant for
// another rank) never reaches a handler and is never answered. Replays
// within a job are duplicates of messages already run, which the sequence
// numbers discard.
//
// SipHash is a pseudorandom function built for short inputs (Aumasson and
// Bernstein, 2012), tens of times cheaper than HMAC-SHA-256 for a header
// (BenchmarkMAC measures it).

// Key is the MAC key of a job.
type Key struct{ k0, k1 uint64 }

// NewKey derives the datagram MAC key from the job secret.
func NewKey(secret []byte) Key {
	h := sha256.New()
	h.Write([]byte("udpconduit datagram mac v1\x00"))
	h.Write(secret)
	var sum [sha256.Size]byte
	s := h.Sum(sum[:0])
	return Key{binary.LittleEndian.Uint64(s[0:]), binary.LittleEndian.Uint64(s[8:])}
}

// macEnd returns the end of the bytes of b the MAC covers, or -1 when b is
// too short to be a datagram.
func macEnd(b []byte, payload bool) int {
	if len(b) < HeaderLen {
		return -1
	}
	end := HeaderLen + 4*int(b[3])
	if end > len(b) {
		return -1
	}
	if payload || Kind(b[1]&0x0f) == KindAutoReply {
		end = len(b)
	}
	return end
}

// mac computes the MAC of datagram b to rank dest.
func (k *Key) mac(b []byte, dest uint32, end int) uint64 {
	first := uint64(dest) | uint64(binary.LittleEndian.Uint32(b[0:4]))<<32
	return sipHash(k.k0, k.k1, first, true, b[12:end])
}

// Seal writes the MAC of the encoded datagram b, bound for rank dest, into
// its Tag field. payload says whether the job authenticates payloads.
func (k *Key) Seal(b []byte, dest uint32, payload bool) {
	if end := macEnd(b, payload); end >= 0 {
		binary.LittleEndian.PutUint64(b[4:12], k.mac(b, dest, end))
	}
}

// Verify reports whether b carries the MAC of a datagram to rank dest.
func (k *Key) Verify(b []byte, dest uint32, payload bool) bool {
	end := macEnd(b, payload)
	return end >= 0 && binary.LittleEndian.Uint64(b[4:12]) == k.mac(b, dest, end)
}

// Sum64 is SipHash-2-4 of msg under the key (k0, k1), for tests against the
// reference vectors.
func Sum64(k0, k1 uint64, msg []byte) uint64 { return sipHash(k0, k1, 0, false, msg) }

// sipHash is SipHash-2-4 of the message first ‖ msg (first, 8 bytes
// little-endian, only when hasFirst). The state lives in locals, so that
// the compiler keeps it in registers.
func sipHash(k0, k1, first uint64, hasFirst bool, msg []byte) uint64 {
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	total := len(msg)
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13) ^ v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16) ^ v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21) ^ v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17) ^ v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	if hasFirst {
		total += 8
		v3 ^= first
		round()
		round()
		v0 ^= first
	}
	for len(msg) >= 8 {
		m := binary.LittleEndian.Uint64(msg)
		v3 ^= m
		round()
		round()
		v0 ^= m
		msg = msg[8:]
	}
	last := uint64(total) << 56
	for i, c := range msg {
		last |= uint64(c) << (8 * i)
	}
	v3 ^= last
	round()
	round()
	v0 ^= last
	v2 ^= 0xff
	round()
	round()
	round()
	round()
	return v0 ^ v1 ^ v2 ^ v3
}
