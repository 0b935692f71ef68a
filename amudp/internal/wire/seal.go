package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"slices"
)

// Datagram protection (DESIGN.md §4). Every datagram is sealed under
// keys derived from the job secret, with the 12-byte
// nonce that header bytes 8–20 hold: a counter the sender advances for
// every datagram it seals, never the same twice, then the sender's rank.
// As ranks are distinct within a job and each rank's counter only grows,
// no two datagrams of a job are sealed with the same nonce; a retransmission
// sends the same sealed bytes again, never resealing other bytes under
// the nonce they carry. The header, its destination rank included, is
// always authenticated, and so is what the mode adds:
//
//   - AuthHeader: the header and the arguments (and the payload of automatic
//     replies, which acknowledges requests).
//   - AuthPayload (the default): the whole datagram. A Long
//     datagram of splitMin payload bytes or more (split) carries a second
//     tag after it, GMAC over its header and arguments under a key of their
//     own, so that the receiver believes where the payload goes before it
//     checks the payload and copies it there in one pass (OpenHead, then
//     OpenPayload).
//   - Encrypt: the header authenticated, the arguments and the payload
//     encrypted and authenticated (AES-128-GCM).
//
// The tags of the first two are AES-128-GMAC, or AEGIS-128X2's MAC where
// they cover fastMin bytes or more (fastTag).
//
// Open checks the tags before anything of the datagram is believed: a
// forged or altered datagram, one of another job or one sealed for
// another rank never reaches a handler. A split datagram's payload is
// checked as it is copied into the segment, where an altered one writes
// before it is dropped (DESIGN.md §4 bounds where).
// Replays carry a nonce already seen; the endpoint discards them (amudp's
// receive path).

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
	// mac computes the tags of AuthHeader and AuthPayload that cover
	// fastMin bytes or more (AEGIS-128X2's MAC, aegis.go).
	mac *aegisMAC
	// g computes those that cover shortMax bytes or fewer (GMAC) where
	// the CPU runs the fast GHASH (gmac.go), nil elsewhere: aead does
	// then, and the rest.
	g *gmac
	// headAEAD and headG are aead and g under the key of the header
	// tags of split datagrams.
	headAEAD cipher.AEAD
	headG    *gmac
}

// NewKey derives the datagram key of the job whose secret is secret.
func NewKey(secret []byte, mode Mode) *Key {
	k := &Key{mode: mode}
	k.aead, k.g = newAEAD("udpconduit datagram aes-128-gcm v2\x00", secret)
	k.headAEAD, k.headG = newAEAD("udpconduit datagram header gmac v1\x00", secret)
	k.mac = newAegisMAC(deriveKey("udpconduit datagram aegis-128x2 mac v1\x00", secret))
	return k
}

// newAEAD returns AES-128-GCM, and the fast GMAC where the CPU runs it,
// under the key that the SHA-256 of label and secret begins with.
func newAEAD(label string, secret []byte) (cipher.AEAD, *gmac) {
	key := deriveKey(label, secret)
	block, err := aes.NewCipher(key)
	if err != nil { // a 16-byte key is always valid
		panic(err)
	}
	aead, err := cipher.NewGCM(block) // 12-byte nonce, 16-byte tag
	if err != nil {
		panic(err)
	}
	return aead, newGMAC(key)
}

// deriveKey returns the 16-byte key that the SHA-256 of label and
// secret begins with.
func deriveKey(label string, secret []byte) []byte {
	h := sha256.New()
	h.Write([]byte(label))
	h.Write(secret)
	var sum [sha256.Size]byte
	return h.Sum(sum[:0])[:16]
}

// fastMin is the fewest bytes a tag covers for which AEGIS-128X2's MAC
// is faster than GMAC (BenchmarkMAC) on 256-bit registers: below it, its
// 25 state updates of initialization and finalization cost more than its
// updates save. A lane at a time on 128-bit registers they cost more,
// and GMAC stays ahead past it (BENCHMARKS.md, Datagram protection: 221
// ns against 127 at 512 bytes on Zen 2).
const fastMin = 512

// splitMin is the fewest payload bytes of a split datagram: from there
// a check and a copy in one pass (OpenPayload), the header tag's check
// included, takes no longer than the check and then the copy, which a
// smaller payload's copy within the first-level cache beats
// (BenchmarkOpenCopy).
const splitMin = 16384

// split reports whether the encoded datagram b (its header at least),
// sealed under k, carries a header tag (see Key): a Long one, its payload
// not in place, of splitMin bytes or more, with at most MaxArgs
// arguments, under AuthPayload. It reads b's header as it is: Open checks
// what it says.
func (k *Key) split(b []byte) bool {
	return len(b) >= HeaderLen && b[3] <= MaxArgs &&
		k.TagsLen(Kind(b[1]&0x0f), b[1]>>4&FlagInPlace != 0, int(binary.LittleEndian.Uint32(b[24:]))) == 2*TagLen
}

// TagsLen returns the bytes that sealing under k adds to a datagram of
// kind with n payload bytes (in place or not): its tag, and a split
// datagram's header tag (see Key).
func (k *Key) TagsLen(kind Kind, inPlace bool, n int) int {
	if k.mode == AuthPayload && (kind == KindLongRequest || kind == KindLongReply) && !inPlace && n >= splitMin {
		return 2 * TagLen
	}
	return TagLen
}

// nonce returns the nonce of datagram b (at least HeaderLen
// bytes): its Nonce and Src fields.
func nonce(b []byte) []byte { return b[8:20] }

// Seal sets the destination rank and the nonce of the encoded datagram b,
// whose capacity should hold 2·TagLen more bytes, protects it as the key's
// mode says, and returns it with its tags. ctr must be a value the sender
// never sealed with before (amudp's endpoint counts them). b's arguments
// and payload are encrypted in place under Encrypt.
func (k *Key) Seal(b []byte, dest uint32, ctr uint64) []byte { return k.SealPayload(b, dest, ctr, nil) }

// SealPayload is Seal of b with payload appended, where b is a datagram
// encoded without its payload (Message.AppendHead): under AuthPayload,
// from fastMin bytes, the payload is copied and authenticated in one
// pass. payload must not overlap b's backing array.
func (k *Key) SealPayload(b []byte, dest uint32, ctr uint64, payload []byte) []byte {
	if len(b) < HeaderLen {
		return append(b, payload...)
	}
	binary.LittleEndian.PutUint32(b[4:], dest)
	binary.LittleEndian.PutUint64(b[8:], ctr)
	b = k.seal(b, payload)
	if !k.split(b) {
		return b
	}
	// The header tag, over the header and the arguments.
	n := len(b)
	b = slices.Grow(b, TagLen)[:n+TagLen]
	k.headTag(b[n:], b[:HeaderLen+4*int(b[3])])
	return b
}

// seal is SealPayload but for a split datagram's header tag.
func (k *Key) seal(b []byte, payload []byte) []byte {
	// A payload of a datagram of fastMin bytes or more is copied and
	// authenticated in one pass (AuthPayload); AuthHeader's tags, and
	// short ones, are fastTag's or crypto/cipher's, below.
	if k.mode == AuthPayload && len(b)+len(payload) >= fastMin {
		n := len(b)
		b = slices.Grow(b, len(payload)+2*TagLen)[:n+len(payload)+TagLen]
		k.mac.tagCopy(b[n+len(payload):], nonce(b), b[:n], b[n:n+len(payload)], payload)
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
	n := len(b)
	b = slices.Grow(b, TagLen)
	if k.fastTag(b[n:n+TagLen], b[:end]) {
		return b[:n+TagLen]
	}
	return k.aead.Seal(b, nonce(b), nil, b[:end])
}

// fastTag writes to out, which has room for it, the tag of aad, a
// datagram's first bytes, under AuthHeader or AuthPayload: AEGIS-128X2's
// MAC from fastMin bytes, the fast GMAC up to shortMax where the CPU runs
// it. It reports false, writing nothing, where the tag is
// crypto/cipher's GMAC (aead), which its callers call themselves: out
// through an interface would escape, an allocation per datagram opened.
func (k *Key) fastTag(out, aad []byte) bool {
	switch {
	case len(aad) >= fastMin:
		k.mac.tagCopy(out, nonce(aad), aad, nil, nil)
	case k.g != nil && len(aad) <= shortMax:
		k.g.tagShort(out, nonce(aad), aad)
	default:
		return false
	}
	return true
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

// Open checks the tags of datagram b, sealed for rank dest, and returns
// the datagram without them, decrypted in place under Encrypt; ok is
// false, and b must be dropped, when a tag is wrong or b is not a
// datagram for dest.
func (k *Key) Open(b []byte, dest uint32) (body []byte, ok bool) {
	body, tag, ok := k.OpenHead(b, dest)
	if ok && tag != nil {
		ok = k.OpenPayload(body, tag, nil)
	}
	return body, ok
}

// OpenHead is Open of all but the payload of a split datagram: of one, it
// checks the header tag, and returns with body the tag over the whole,
// which OpenPayload must check before anything of the payload is
// believed; of any other, it is Open, tag nil.
func (k *Key) OpenHead(b []byte, dest uint32) (body, tag []byte, ok bool) {
	if len(b) < HeaderLen+TagLen || binary.LittleEndian.Uint32(b[4:]) != dest {
		return nil, nil, false
	}
	if k.split(b) {
		n := len(b) - 2*TagLen
		end := HeaderLen + 4*int(b[3])
		if end > n || !k.headTagOK(b[:end], b[n+TagLen:]) {
			return nil, nil, false
		}
		return b[:n], b[n : n+TagLen], true
	}
	n := len(b) - TagLen
	if k.mode == Encrypt {
		pt, err := k.aead.Open(b[HeaderLen:HeaderLen], nonce(b), b[HeaderLen:], b[:HeaderLen])
		if err != nil {
			return nil, nil, false
		}
		return b[:HeaderLen+len(pt)], nil, true
	}
	end := k.covered(b, n)
	if end < 0 || !k.tagOK(b[:end], b[n:]) {
		return nil, nil, false
	}
	return b[:n], nil, true
}

// OpenPayload checks tag, which OpenHead returned with the body of a
// split datagram, over body, and copies the payload to dst on the way
// (dst of the payload's length, or nil for none). It reports whether the
// tag is right; dst is written either way, one pass over the payload. A
// dst of another length than the payload's fails.
func (k *Key) OpenPayload(body, tag, dst []byte) bool {
	start := HeaderLen + 4*int(body[3])
	if dst != nil && len(dst) != len(body)-start {
		return false
	}
	var t [TagLen]byte
	k.mac.tagCopy(t[:], nonce(body), body[:start], dst, body[start:])
	return subtle.ConstantTimeCompare(t[:], tag) == 1
}

// tagOK reports whether tag is the tag of aad, a datagram's first bytes
// (fastTag).
func (k *Key) tagOK(aad, tag []byte) bool {
	var t [TagLen]byte
	if k.fastTag(t[:], aad) {
		return subtle.ConstantTimeCompare(t[:], tag) == 1
	}
	_, err := k.aead.Open(nil, nonce(aad), tag, aad)
	return err == nil
}

// headTag writes to out the header tag of a split datagram whose header
// and arguments are head (at most shortMax bytes: split's bound on the
// arguments).
func (k *Key) headTag(out, head []byte) {
	if k.headG != nil && len(head) <= shortMax {
		k.headG.tagShort(out, nonce(head), head)
		return
	}
	k.headAEAD.Seal(out[:0], nonce(head), nil, head)
}

// headTagOK reports whether tag is the header tag of a split datagram
// whose header and arguments are head (crypto/cipher's through Open, as
// tagOK's: no buffer of its own through an interface).
func (k *Key) headTagOK(head, tag []byte) bool {
	if k.headG != nil && len(head) <= shortMax {
		var t [TagLen]byte
		k.headG.tagShort(t[:], nonce(head), head)
		return subtle.ConstantTimeCompare(t[:], tag) == 1
	}
	_, err := k.headAEAD.Open(nil, nonce(head), tag, head)
	return err == nil
}
