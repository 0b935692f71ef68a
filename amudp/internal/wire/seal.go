package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"slices"
)

// Datagram protection (DESIGN.md §4). Every datagram is sealed with
// AES-128-GCM under a key derived from the job secret, with the 12-byte
// nonce that header bytes 8–20 hold: a counter the sender advances for
// every datagram it seals, never the same twice, then the sender's rank.
// As ranks are distinct within a job and each rank's counter only grows,
// no two datagrams of a job are sealed with the same nonce; a retransmission
// sends the same sealed bytes again, never resealing other bytes under
// the nonce they carry. The header, its destination rank included, is
// always authenticated, and so is what the mode adds:
//
//   - AuthHeader: the header and the arguments (and the payload of automatic
//     replies, which acknowledges requests); the tag is GMAC over them.
//   - AuthPayload (the default): the whole datagram; GMAC over it.
//   - Encrypt: the header authenticated, the arguments and the payload
//     encrypted and authenticated.
//
// Open checks the tag before anything of the datagram is believed: a
// forged or altered datagram, one of another job or one sealed for
// another rank never reaches a handler. Replays carry a nonce already
// seen; the endpoint discards them (amudp's receive path).

// Mode says what a sealed datagram's tag covers.
type Mode uint8

// The protection modes.
const (
	AuthHeader Mode = iota
	AuthPayload
	Encrypt
)

// Key seals and opens the datagrams of a job.
type Key struct {
	aead cipher.AEAD
	mode Mode
	// g computes the tags (GMAC) of AuthHeader and AuthPayload that
	// cover fastMin bytes or more, or shortMax or fewer, where the CPU
	// runs the fast GHASH (gmac.go), nil elsewhere: aead does then, and
	// the rest.
	g *gmac
}

// NewKey derives the datagram key of the job whose secret is secret.
func NewKey(secret []byte, mode Mode) *Key {
	h := sha256.New()
	h.Write([]byte("udpconduit datagram aes-128-gcm v2\x00"))
	h.Write(secret)
	var sum [sha256.Size]byte
	key := h.Sum(sum[:0])[:16]
	block, err := aes.NewCipher(key)
	if err != nil { // a 16-byte key is always valid
		panic(err)
	}
	aead, err := cipher.NewGCM(block) // 12-byte nonce, 16-byte tag
	if err != nil {
		panic(err)
	}
	return &Key{aead: aead, mode: mode, g: newGMAC(key)}
}

// fastMin is the fewest bytes a tag covers for which the fast GMAC is
// faster than crypto/cipher's AES-GCM (BenchmarkGMAC against
// BenchmarkSeal): below it, its three calls and the AES block cost more
// than GHASH saves.
const fastMin = 512

// nonce returns the AES-GCM nonce of datagram b (at least HeaderLen
// bytes): its Nonce and Src fields.
func nonce(b []byte) []byte { return b[8:20] }

// Seal sets the destination rank and the nonce of the encoded datagram b,
// whose capacity should hold TagLen more bytes, protects it as the key's
// mode says, and returns it with its tag. ctr must be a value the sender
// never sealed with before (amudp's endpoint counts them). b's arguments
// and payload are encrypted in place under Encrypt.
func (k *Key) Seal(b []byte, dest uint32, ctr uint64) []byte { return k.SealPayload(b, dest, ctr, nil) }

// SealPayload is Seal of b with payload appended, where b is a datagram
// encoded without its payload (Message.AppendHead): with the fast GMAC and
// the payload authenticated, the payload is copied and authenticated in
// one pass. payload must not overlap b's backing array.
func (k *Key) SealPayload(b []byte, dest uint32, ctr uint64, payload []byte) []byte {
	if len(b) < HeaderLen {
		return append(b, payload...)
	}
	binary.LittleEndian.PutUint32(b[4:], dest)
	binary.LittleEndian.PutUint64(b[8:], ctr)
	// A payload of fastMin bytes or more is copied and authenticated in
	// one pass (AuthPayload); AuthHeader's tags, and short ones, are
	// tagShort's, below.
	if k.g != nil && k.mode == AuthPayload && len(b)+len(payload) >= fastMin {
		n := len(b)
		b = slices.Grow(b, len(payload)+TagLen)[:n+len(payload)+TagLen]
		k.g.tagCopy(b[n+len(payload):], nonce(b), b[:n], b[n:n+len(payload)], payload)
		return b
	}
	b = append(b, payload...)
	if k.mode == Encrypt {
		return k.aead.Seal(b[:HeaderLen], nonce(b), b[HeaderLen:], b[:HeaderLen])
	}
	end := k.covered(b, len(b))
	if end < 0 {
		return b
	}
	if k.g != nil && end <= shortMax {
		n := len(b)
		b = slices.Grow(b, TagLen)[:n+TagLen]
		k.g.tagShort(b[n:], nonce(b), b[:end])
		return b
	}
	return k.aead.Seal(b, nonce(b), nil, b[:end])
}

// covered returns the end of the bytes of datagram b[:n] that a
// AuthHeader or AuthPayload tag covers, or -1 when its arguments overrun it.
func (k *Key) covered(b []byte, n int) int {
	end := HeaderLen + 4*int(b[3])
	if end > n {
		return -1
	}
	if k.mode == AuthPayload || Kind(b[1]&0x0f) == KindAutoReply {
		end = n
	}
	return end
}

// Open checks the tag of datagram b, sealed for rank dest, and returns
// the datagram without its tag, decrypted in place under Encrypt; ok is
// false, and b must be dropped, when the tag is wrong or b is not a
// datagram for dest.
func (k *Key) Open(b []byte, dest uint32) (body []byte, ok bool) {
	if len(b) < HeaderLen+TagLen || binary.LittleEndian.Uint32(b[4:]) != dest {
		return nil, false
	}
	n := len(b) - TagLen
	if k.mode == Encrypt {
		pt, err := k.aead.Open(b[HeaderLen:HeaderLen], nonce(b), b[HeaderLen:], b[:HeaderLen])
		if err != nil {
			return nil, false
		}
		return b[:HeaderLen+len(pt)], true
	}
	end := k.covered(b, n)
	if end < 0 {
		return nil, false
	}
	if k.g != nil && (end >= fastMin || end <= shortMax) {
		var t [TagLen]byte
		k.g.tag(t[:], nonce(b), b[:end])
		if subtle.ConstantTimeCompare(t[:], b[n:]) != 1 {
			return nil, false
		}
		return b[:n], true
	}
	if _, err := k.aead.Open(nil, nonce(b), b[n:], b[:end]); err != nil {
		return nil, false
	}
	return b[:n], true
}
