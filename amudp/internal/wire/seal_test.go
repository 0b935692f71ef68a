package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"math/bits"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"golang.org/x/crypto/chacha20poly1305"
)

// TestSipHashVectors checks the SipHash-2-4 of BenchmarkMACCandidates
// against the reference vectors of the SipHash paper (key 00..0f, message
// 00..len-1).
func TestSipHashVectors(t *testing.T) {
	const k0, k1 = 0x0706050403020100, 0x0f0e0d0c0b0a0908
	msg := make([]byte, 64)
	for i := range msg {
		msg[i] = byte(i)
	}
	for _, v := range []struct {
		n    int
		want uint64
	}{{0, 0x726fdb47dd0e0e31}, {1, 0x74f839c593dc67fd}, {15, 0xa129ca6149be45e5}, {63, 0x958a324ceb064572}} {
		if got := sipHash(k0, k1, 0, false, msg[:v.n]); got != v.want {
			t.Errorf("SipHash-2-4 of %d bytes = %#x, want %#x", v.n, got, v.want)
		}
	}
}

func encode(t *testing.T, m Message) []byte {
	t.Helper()
	b, err := m.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// modes are the protection modes, named as the tests print them.
var modes = []struct {
	name string
	mode Mode
}{{"header", AuthHeader}, {"payload", AuthPayload}, {"encrypt", Encrypt}}

// TestSealedDatagramsDropped: in every mode a sealed datagram opens, for
// its destination rank only, under its job's key only, and decodes to the
// message sealed; flipping any bit the mode protects (the header, the
// arguments, an automatic reply's acknowledgements, and the payload unless
// the job authenticates headers alone), or the tag, or cutting a byte
// off, makes it fail. Under Encrypt the arguments and payload do not
// appear on the wire.
func TestSealedDatagramsDropped(t *testing.T) {
	medium := Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 2, Src: 3, Slot: 5, Seq: 9}, Payload: []byte("payload bytes")}
	medium.Args[0], medium.Args[1] = 0x41414141, 0x42424242
	ack := Message{Header: Header{Kind: KindAutoReply, Src: 1, Slot: 2, Seq: 3}}
	ack.Payload = AppendAckPair(AppendAckPair(nil, 4, 5), 6, 7)
	// An automatic reply's acknowledgements are covered under AuthHeader
	// too: one of fastMin bytes or more takes the other MAC.
	bigAck := Message{Header: Header{Kind: KindAutoReply, Src: 1, Slot: 2, Seq: 3}}
	for i := range 130 {
		bigAck.Payload = AppendAckPair(bigAck.Payload, uint16(i), uint16(i+1))
	}
	long := Message{Header: Header{Kind: KindLongReply, Handler: 140, Src: 3, Slot: 1, Seq: 2, Offset: 4096}, Payload: []byte("into the segment")}
	for _, md := range modes {
		key, other := NewKey([]byte("job secret"), md.mode), NewKey([]byte("another job"), md.mode)
		for _, tc := range []struct {
			name string
			m    Message
		}{{"medium", medium}, {"automatic reply", ack}, {"large automatic reply", bigAck}, {"long", long}} {
			name := md.name + ", " + tc.name
			plain := encode(t, tc.m)
			b := key.Seal(append([]byte(nil), plain...), 4, 77)
			if len(b) != len(plain)+TagLen {
				t.Fatalf("%s: sealed %d bytes into %d", name, len(plain), len(b))
			}
			if md.mode == Encrypt && bytes.Contains(b, tc.m.Payload) {
				t.Errorf("%s: the payload is on the wire in clear", name)
			}
			if md.mode == Encrypt && tc.m.NArgs > 0 && bytes.Contains(b, []byte("AAAA")) {
				t.Errorf("%s: the arguments are on the wire in clear", name)
			}
			opened := func(f []byte, dest uint32) bool {
				_, ok := key.Open(append([]byte(nil), f...), dest)
				return ok
			}
			body, ok := key.Open(append([]byte(nil), b...), 4)
			var got Message
			if !ok {
				t.Fatalf("%s: a sealed datagram does not open", name)
			} else if err := Decode(body, &got); err != nil {
				t.Fatalf("%s: the opened datagram does not decode: %v", name, err)
			}
			want := tc.m
			want.Dst, want.Nonce, want.Len = 4, 77, uint32(len(tc.m.Payload))
			if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s: opened message differs (-sealed +opened):\n%s", name, diff)
			}
			if opened(b, 5) || func() bool { _, ok := other.Open(append([]byte(nil), b...), 4); return ok }() {
				t.Errorf("%s: opens for another rank or another job", name)
			}
			covered := HeaderLen + 4*int(tc.m.NArgs)
			if md.mode != AuthHeader || tc.m.Kind == KindAutoReply {
				covered = len(plain)
			}
			for bit := 0; bit < 8*len(b); bit++ {
				f := append([]byte(nil), b...)
				f[bit/8] ^= 1 << (bit % 8)
				ok := opened(f, 4)
				switch i := bit / 8; {
				case (i < covered || i >= len(plain)) && ok:
					t.Errorf("%s: flipping bit %d (byte %d) passes", name, bit, i)
				case i >= covered && i < len(plain) && !ok:
					t.Errorf("%s: flipping payload bit %d fails in a headers-only job", name, bit)
				}
			}
			for cut := 1; cut <= TagLen+1; cut++ {
				if opened(b[:len(b)-cut], 4) {
					t.Errorf("%s: the datagram less its last %d bytes opens", name, cut)
				}
			}
		}
	}
}

// TestOpenGarbage: Open refuses, without panicking, whatever is too short
// to be sealed or claims more arguments than it holds.
func TestOpenGarbage(t *testing.T) {
	for _, md := range modes {
		key := NewKey([]byte("job secret"), md.mode)
		for n := range HeaderLen + TagLen + 8 {
			b := make([]byte, n)
			if n > 3 {
				b[3] = 16
			}
			if _, ok := key.Open(b, 0); ok {
				t.Errorf("%s: %d zero bytes open", md.name, n)
			}
		}
	}
}

// BenchmarkSeal and BenchmarkOpen measure each mode per datagram
// (0 payload bytes) and per byte.
func BenchmarkSeal(b *testing.B) { benchSealOpen(b, false) }

// BenchmarkOpen: see BenchmarkSeal.
func BenchmarkOpen(b *testing.B) { benchSealOpen(b, true) }

func benchSealOpen(b *testing.B, open bool) {
	for _, md := range modes {
		key := NewKey([]byte("job secret"), md.mode)
		for _, n := range []int{0, 64, 1024, 8192, MaxMedium} {
			m := Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 4}, Payload: make([]byte, n)}
			fill(m.Payload)
			plain, _ := m.Append(nil)
			sealed := key.Seal(append(make([]byte, 0, len(plain)+TagLen), plain...), 1, 1)
			buf := make([]byte, len(sealed), len(sealed)+TagLen) // Seal asks 2·TagLen of room
			b.Run(md.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(int64(len(plain)))
				b.ReportAllocs()
				for i := uint64(1); b.Loop(); i++ {
					if open {
						copy(buf, sealed) // Encrypt decrypts in place
						if _, ok := key.Open(buf, 1); !ok {
							b.Fatal("does not open")
						}
					} else {
						key.Seal(buf[:len(plain)], 1, i)
					}
				}
			})
		}
	}
}

// BenchmarkMACCandidates measures, per datagram and per byte, what
// authenticating payloads by default could cost (issue 26): SipHash-2-4
// over the whole datagram (the MAC before AES-GCM); GMAC (AES-GCM
// with the payload as additional data: AES-NI and carry-less
// multiplication); and, for encryption, AES-128-GCM and ChaCha20-Poly1305
// sealing the payload (Poly1305 alone needs a one-time key per message,
// which is what ChaCha20-Poly1305 makes). Figures, not a test.
func BenchmarkMACCandidates(b *testing.B) {
	k0, k1 := uint64(0x0706050403020100), uint64(0x0f0e0d0c0b0a0908)
	blk, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(blk)
	if err != nil {
		b.Fatal(err)
	}
	cc, err := chacha20poly1305.New(make([]byte, chacha20poly1305.KeySize))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, 64, 1024, 8192, MaxMedium} {
		m := Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 4}, Payload: make([]byte, n)}
		buf, _ := m.Append(nil)
		out := make([]byte, 0, len(buf)+32)
		var nonce [12]byte
		for _, c := range []struct {
			name string
			f    func(i uint64)
		}{
			{"siphash", func(uint64) { sipHash(k0, k1, 1, true, buf[12:]) }},
			{"gmac", func(i uint64) {
				binary.LittleEndian.PutUint64(nonce[:], i)
				out = gcm.Seal(out[:0], nonce[:], nil, buf)
			}},
			{"aes-gcm", func(i uint64) {
				binary.LittleEndian.PutUint64(nonce[:], i)
				out = gcm.Seal(out[:0], nonce[:], buf[HeaderLen:], buf[:HeaderLen])
			}},
			{"chacha20-poly1305", func(i uint64) {
				binary.LittleEndian.PutUint64(nonce[:], i)
				out = cc.Seal(out[:0], nonce[:], buf[HeaderLen:], buf[:HeaderLen])
			}},
		} {
			b.Run(c.name+"/"+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				for i := uint64(0); b.Loop(); i++ {
					c.f(i)
				}
			})
		}
	}
}

// sipHash is SipHash-2-4 of the message first ‖ msg (first, 8 bytes
// little-endian, only when hasFirst), as datagrams were authenticated
// before AES-GCM: a candidate of BenchmarkMACCandidates.
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

// FuzzOpen: opening arbitrary bytes, in two steps or one, in every mode,
// never panics, and opens the same with the fast GMAC and without (the
// seeds: sealed datagrams of every family, a split one among them, and
// ones that claim more arguments than MaxArgs under right tags).
func FuzzOpen(f *testing.F) {
	keys := []*Key{NewKey([]byte("fuzz"), AuthHeader), NewKey([]byte("fuzz"), AuthPayload), NewKey([]byte("fuzz"), Encrypt)}
	long := Message{Header: Header{Kind: KindLongRequest, Handler: 140, NArgs: 1, Src: 1, Offset: 8}, Payload: make([]byte, splitMin)}
	for _, m := range append(sampleMessages(), long) {
		b, err := m.Append(nil)
		if err != nil {
			f.Fatal(err)
		}
		for i, k := range keys {
			f.Add(uint8(i), k.Seal(b, 0, 1))
		}
	}
	for _, nargs := range []int{MaxArgs + 1, 255} {
		f.Add(uint8(1), hugeArgs(keys[1], nargs))
	}
	// The same keys without the fast GMAC: what opens with one opens
	// with the other.
	slow := make([]*Key, len(keys))
	for i, k := range keys {
		slow[i] = withoutFast(k)
	}
	f.Fuzz(func(t *testing.T, mode uint8, b []byte) {
		i := int(mode) % len(keys)
		k := keys[i]
		body, tag, ok := k.OpenHead(bytes.Clone(b), 0)
		if ok && tag != nil {
			var m Message
			if Decode(body, &m) == nil {
				k.OpenPayload(body, tag, make([]byte, len(m.Payload)))
			}
			k.OpenPayload(body, tag, nil)
		}
		_, okFast := k.Open(bytes.Clone(b), 0)
		if _, okSlow := slow[i].Open(bytes.Clone(b), 0); okFast != okSlow {
			t.Errorf("mode %d: opens with the fast GMAC %v, without %v", i, okFast, okSlow)
		}
	})
}

// TestSealOpenAllocateNothing: sealing into a buffer with room for the
// tags, and opening, allocate nothing, in every mode and for every tag's
// length (tagShort's, crypto/cipher's GMAC's, AEGIS's; a split Long's
// two): they run once per datagram.
func TestSealOpenAllocateNothing(t *testing.T) {
	payload := make([]byte, MaxLong)
	for _, md := range modes {
		key := NewKey([]byte("job secret"), md.mode)
		for _, c := range []struct {
			kind Kind
			n    int
		}{{KindMediumRequest, 0}, {KindMediumRequest, 64}, {KindMediumRequest, 300}, {KindMediumRequest, 4096}, {KindLongRequest, splitMin}} {
			m := Message{Header: Header{Kind: c.kind, Handler: 130, NArgs: 2, Src: 1, Slot: 1, Seq: 2}, Payload: payload[:c.n]}
			plain := encode(t, m)
			buf := make([]byte, len(plain), len(plain)+2*TagLen)
			sealed := key.Seal(append(buf[:0], plain...), 3, 99)
			scratch := make([]byte, len(sealed))
			dst := make([]byte, c.n)
			if a := testing.AllocsPerRun(50, func() { key.Seal(append(buf[:0], plain...), 3, 99) }); a != 0 {
				t.Errorf("%s, %v of %d bytes: Seal allocates %.0f times", md.name, c.kind, c.n, a)
			}
			if a := testing.AllocsPerRun(50, func() {
				copy(scratch, sealed)
				body, tag, ok := key.OpenHead(scratch, 3)
				if !ok || tag != nil && !key.OpenPayload(body, tag, dst) {
					t.Fatalf("%s, %v of %d bytes: does not open", md.name, c.kind, c.n)
				}
			}); a != 0 {
				t.Errorf("%s, %v of %d bytes: opening allocates %.0f times", md.name, c.kind, c.n, a)
			}
		}
	}
}
