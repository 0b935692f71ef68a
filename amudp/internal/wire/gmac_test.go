package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestGMACMatchesGCM: the fast GMAC's tag is crypto/cipher's AES-GCM tag
// with the same key, nonce and additional data, for every length from 0
// to shortMax bytes, under random keys.
func TestGMACMatchesGCM(t *testing.T) {
	if !fastGHASH {
		t.Log("no AES-NI or PCLMULQDQ here: nothing to compare")
		return
	}
	r := rand.New(rand.NewPCG(7, 8))
	data := randomBytes(r, MaxDatagram+32)
	for range 8 {
		key := randomBytes(r, 16)
		block, _ := aes.NewCipher(key)
		gcm, _ := cipher.NewGCM(block)
		g := newGMAC(key)
		for n := range shortMax + 1 {
			nonce := data[n%1000 : n%1000+12]
			off := r.IntN(16)
			aad := data[off : off+n]
			want := gcm.Seal(nil, nonce, nil, aad)
			got := make([]byte, 16)
			g.tagShort(got, nonce, aad)
			if !bytes.Equal(got, want) {
				t.Fatalf("key %x, %d bytes: tag %x, AES-GCM's %x", key, n, got, want)
			}
		}
	}
}

// TestAESEncrypt: aesEncrypt with expandKey128's round keys is
// crypto/aes, for random keys and blocks.
func TestAESEncrypt(t *testing.T) {
	if !fastGHASH {
		t.Log("no fast GHASH here: nothing to compare")
		return
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		var key, in, got, want [16]byte
		for i := range 16 {
			key[i], in[i] = byte(r.Uint32()), byte(r.Uint32())
		}
		block, _ := aes.NewCipher(key[:])
		block.Encrypt(want[:], in[:])
		rk := expandKey128(key[:])
		aesEncrypt(&rk, &got, &in)
		if got != want {
			t.Fatalf("key %x, block %x: %x, crypto/aes %x", key, in, got, want)
		}
	}
}

// BenchmarkOpenCopy measures what a receiver does with a Long payload of
// n bytes under the payload MAC, two ways: "check, copy" checks the tag
// over the datagram, then copies the payload into the segment (the way
// below splitMin); "one pass" checks the header tag (100 bytes of header
// and arguments), then the tag over the datagram while it copies
// (OpenHead, OpenPayload).
func BenchmarkOpenCopy(b *testing.B) {
	k := NewKey(make([]byte, 16), AuthPayload)
	head := make([]byte, HeaderLen+4*MaxArgs)
	var t [TagLen]byte
	nonce := head[8:20]
	for _, n := range []int{4096, 8192, 16384, 32768, 65000} {
		dgram := make([]byte, len(head)+n)
		fill(dgram) // see BenchmarkMAC
		seg := make([]byte, n)
		b.Run("check, copy/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				k.mac.tagCopy(t[:], nonce, dgram, nil, nil)
				copy(seg, dgram[len(head):])
			}
		})
		b.Run("one pass/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				k.headTag(t[:], head)
				k.mac.tagCopy(t[:], nonce, dgram[:len(head)], seg, dgram[len(head):])
			}
		})
	}
}

// TestSealedLargeDatagrams: datagrams of every tag's length (tagShort's,
// crypto/cipher's GMAC's, AEGIS's) open under a key without the fast
// GMAC (a CPU without AES-NI or PCLMULQDQ) and the other way round, and
// fail to open with any of 300 random bits flipped that the mode
// protects. (AEGIS's widths against each other: TestAegisSplits.)
func TestSealedLargeDatagrams(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	payload := randomBytes(r, MaxMedium)
	for _, md := range modes {
		fast, slow := keyPair(md.mode)
		// 0 to 192: the datagrams tagShort covers (up to shortMax
		// bytes with the 48 of header and arguments), and one over.
		// fastMin-48 and one fewer: either side of AEGIS's threshold.
		for _, size := range []int{0, 1, 15, 16, 100, 191, 192, 193, fastMin - 49, fastMin - 48, fastMin, 4096, MaxMedium} {
			m := Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 3, Src: 2, Slot: 1, Seq: 4}, Payload: payload[:size]}
			plain := encode(t, m)
			for _, dir := range []struct {
				name       string
				seal, open *Key
			}{{"fast to slow", fast, slow}, {"slow to fast", slow, fast}} {
				b := dir.seal.Seal(bytes.Clone(plain), 9, 1234)
				// Seal wrote the destination and nonce, bytes 4-16.
				if body, ok := dir.open.Open(bytes.Clone(b), 9); !ok || !bytes.Equal(body[:4], plain[:4]) || !bytes.Equal(body[16:], plain[16:]) {
					t.Fatalf("%s, %d bytes, %s: does not open to the datagram sealed", md.name, size, dir.name)
				}
				covered := HeaderLen + 4*int(m.NArgs)
				if md.mode != AuthHeader {
					covered = len(plain)
				}
				for range 300 {
					bit := r.IntN(8 * len(b))
					f := bytes.Clone(b)
					f[bit/8] ^= 1 << (bit % 8)
					_, ok := dir.open.Open(f, 9)
					if i := bit / 8; (i < covered || i >= len(plain)) && ok {
						t.Fatalf("%s, %d bytes, %s: flipping bit %d (byte %d) passes", md.name, size, dir.name, bit, i)
					}
				}
			}
		}
	}
}

// TestSealPayload: sealing a datagram encoded without its payload, with
// the payload given apart, gives the bytes of Seal of the whole datagram,
// in every mode and around the fast path's threshold.
func TestSealPayload(t *testing.T) {
	payload := make([]byte, MaxMedium)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	for _, md := range modes {
		key := NewKey([]byte("job secret"), md.mode)
		// 44 bytes of header and arguments: fastMin-44 payload bytes are
		// the first datagram that AEGIS tags.
		for _, n := range []int{0, 1, 100, fastMin - 45, fastMin - 44, fastMin, 1000, MaxMedium} {
			m := Message{Header: Header{Kind: KindMediumReply, Handler: 131, NArgs: 2, Src: 1}, Payload: payload[:n]}
			whole := key.Seal(encode(t, m), 3, 99)
			head, err := m.AppendHead(nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := key.SealPayload(head, 3, 99, payload[:n]); !bytes.Equal(got, whole) {
				t.Errorf("%s, %d payload bytes: SealPayload differs from Seal", md.name, n)
			}
		}
	}
}

// TestSplitDatagrams: under AuthPayload a Long datagram of splitMin
// payload bytes or more carries a header tag after its tag (two tags'
// worth more than its encoding), and no other datagram does. OpenHead
// checks the header tag alone, and OpenPayload the rest, copying the
// payload; keys with and without the fast GMAC seal the same bytes, and
// open each other's. Any bit flipped in the header, the arguments or the
// header tag fails OpenHead; in the payload or the tag over the whole,
// OpenPayload and Open.
func TestSplitDatagrams(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	payload := randomBytes(r, MaxLong)
	for _, md := range modes {
		fast, slow := keyPair(md.mode)
		for _, kind := range []Kind{KindLongRequest, KindLongReply} {
			for _, size := range []int{0, splitMin - 1, splitMin, MaxLong} {
				m := Message{Header: Header{Kind: kind, Handler: 140, NArgs: 2, Src: 2, Slot: 1, Seq: 4, Offset: 64}, Payload: payload[:size]}
				plain := encode(t, m)
				split := md.mode == AuthPayload && size >= splitMin
				b := fast.Seal(bytes.Clone(plain), 9, 1234)
				want := len(plain) + TagLen
				if split {
					want += TagLen
				}
				if len(b) != want {
					t.Fatalf("%s, %v, %d bytes: sealed into %d bytes, want %d", md.name, kind, size, len(b), want)
				}
				head, err := m.AppendHead(nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(slow.Seal(bytes.Clone(plain), 9, 1234), b) || !bytes.Equal(fast.SealPayload(head, 9, 1234, m.Payload), b) {
					t.Fatalf("%s, %v, %d bytes: Seal without the fast GMAC, or SealPayload, seals other bytes", md.name, kind, size)
				}
				if !split {
					continue
				}
				in := m
				in.Flags, in.Len, in.Payload = FlagInPlace, uint32(size), nil
				if p := encode(t, in); len(fast.Seal(p, 9, 1235)) != len(p)+TagLen {
					t.Fatalf("%s, %v, %d bytes: a Long datagram in place carries a header tag", md.name, kind, size)
				}
				end := HeaderLen + 4*int(m.NArgs)
				for _, open := range []*Key{fast, slow} {
					body, tag, ok := open.OpenHead(bytes.Clone(b), 9)
					dst := make([]byte, size)
					if !ok || tag == nil || !open.OpenPayload(body, tag, dst) || !bytes.Equal(dst, m.Payload) || !bytes.Equal(body[end:], m.Payload) {
						t.Fatalf("%s, %v, %d bytes: does not open in two steps to the payload sealed", md.name, kind, size)
					}
					for range 300 {
						bit := r.IntN(8 * len(b))
						f := bytes.Clone(b)
						f[bit/8] ^= 1 << (bit % 8)
						body, tag, ok := open.OpenHead(f, 9)
						i := bit / 8
						if headed := i < end || i >= len(plain)+TagLen; headed == ok {
							t.Fatalf("%s, %v, %d bytes: flipping byte %d, OpenHead says %v", md.name, kind, size, i, ok)
						}
						dst := make([]byte, size)
						if ok && (open.OpenPayload(body, tag, dst) || open.OpenPayload(body, tag, nil)) {
							t.Fatalf("%s, %v, %d bytes: flipping byte %d passes OpenPayload", md.name, kind, size, i)
						}
						if _, ok := open.Open(bytes.Clone(f), 9); ok {
							t.Fatalf("%s, %v, %d bytes: flipping byte %d passes Open", md.name, kind, size, i)
						}
					}
				}
			}
		}
	}
}

// TestSplitBounds: a datagram that would be split but for claiming more
// than MaxArgs arguments, with a right tag over the whole and a right
// header tag over its header and claimed arguments, opens neither with
// the fast GMAC nor without it (the fast header tag covers at most
// shortMax bytes: it must not be asked for more); and OpenPayload fails
// a destination of another length than the payload's.
func TestSplitBounds(t *testing.T) {
	fast, slow := keyPair(AuthPayload)
	for _, nargs := range []int{MaxArgs + 1, 51, 60, 255} {
		b := hugeArgs(fast, nargs)
		for _, k := range []*Key{fast, slow} {
			if _, _, ok := k.OpenHead(bytes.Clone(b), 3); ok {
				t.Errorf("%d arguments claimed, fast GMAC %v: the datagram opens", nargs, k.g != nil)
			}
		}
	}
	m := Message{Header: Header{Kind: KindLongReply, Handler: 140, NArgs: MaxArgs, Src: 2}, Payload: make([]byte, splitMin)}
	b := fast.Seal(encode(t, m), 3, 5)
	for _, k := range []*Key{fast, slow} {
		body, tag, ok := k.OpenHead(bytes.Clone(b), 3)
		if !ok || tag == nil {
			t.Fatalf("fast GMAC %v: a split datagram of %d arguments does not open", k.g != nil, MaxArgs)
		}
		if k.OpenPayload(body, tag, make([]byte, splitMin+1)) || k.OpenPayload(body, tag, make([]byte, splitMin-1)) {
			t.Errorf("fast GMAC %v: OpenPayload takes a destination of another length", k.g != nil)
		}
		if !k.OpenPayload(body, tag, make([]byte, splitMin)) {
			t.Errorf("fast GMAC %v: OpenPayload fails the payload's destination", k.g != nil)
		}
	}
}

// hugeArgs returns a Long request of splitMin payload bytes whose header
// claims nargs arguments, sealed by hand under k: its tag over the whole
// right, and a header tag right over its header and claimed arguments.
func hugeArgs(k *Key, nargs int) []byte {
	b := make([]byte, HeaderLen+4*nargs+splitMin)
	b[0], b[1], b[2], b[3] = Version, byte(KindLongRequest), 140, byte(nargs)
	binary.LittleEndian.PutUint32(b[4:], 3)
	binary.LittleEndian.PutUint64(b[8:], 5)
	binary.LittleEndian.PutUint32(b[24:], splitMin)
	var tag [TagLen]byte
	k.mac.tagCopy(tag[:], nonce(b), b, nil, nil) // more than fastMin bytes
	b = append(b, tag[:]...)
	return k.headAEAD.Seal(b, nonce(b), nil, b[:HeaderLen+4*nargs])
}

// keyPair returns the test's key in mode, and withoutFast of it.
func keyPair(mode Mode) (fast, slow *Key) {
	fast = NewKey([]byte("job secret"), mode)
	return fast, withoutFast(fast)
}

// withoutFast returns a copy of k that seals and opens as on a CPU
// without the fast GMAC.
func withoutFast(k *Key) *Key {
	s := *k
	s.g, s.headG = nil, nil
	return &s
}

// randomBytes returns n bytes drawn from r.
func randomBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
