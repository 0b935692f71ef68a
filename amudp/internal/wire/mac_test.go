package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"strconv"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

// TestSipHashVectors checks SipHash-2-4 against the reference vectors of
// the SipHash paper (key 00..0f, message 00..len-1).
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
		if got := Sum64(k0, k1, msg[:v.n]); got != v.want {
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

// TestForgedHeadersDropped: flipping any bit that the MAC covers (the
// header, the arguments, an automatic reply's acknowledgements, and the
// payload when payloads are authenticated) makes the datagram fail; so do
// another job's key and another destination rank. Only a payload bit of a
// job that authenticates headers alone passes, as documented.
func TestForgedHeadersDropped(t *testing.T) {
	key, other := NewKey([]byte("job secret")), NewKey([]byte("another job"))
	medium := Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 2, Src: 3, Slot: 5, Seq: 9}, Payload: []byte("payload bytes")}
	medium.Args[0], medium.Args[1] = 7, 8
	ack := Message{Header: Header{Kind: KindAutoReply, Src: 1, Slot: 2, Seq: 3}}
	ack.Payload = AppendAckPair(AppendAckPair(nil, 4, 5), 6, 7)
	for _, tc := range []struct {
		name    string
		m       Message
		payload bool
	}{{"medium, headers only", medium, false}, {"medium, payload too", medium, true}, {"automatic reply", ack, false}} {
		b := encode(t, tc.m)
		key.Seal(b, 4, tc.payload)
		if !key.Verify(b, 4, tc.payload) {
			t.Fatalf("%s: a sealed datagram does not verify", tc.name)
		}
		if key.Verify(b, 5, tc.payload) || other.Verify(b, 4, tc.payload) {
			t.Errorf("%s: verifies for another rank or another job", tc.name)
		}
		covered := HeaderLen + 4*int(tc.m.NArgs)
		if tc.payload || tc.m.Kind == KindAutoReply {
			covered = len(b)
		}
		for bit := 0; bit < 8*len(b); bit++ {
			f := append([]byte(nil), b...)
			f[bit/8] ^= 1 << (bit % 8)
			ok := key.Verify(f, 4, tc.payload)
			if bit/8 < covered && ok {
				t.Errorf("%s: flipping bit %d (byte %d) passes", tc.name, bit, bit/8)
			}
			if bit/8 >= covered && !ok {
				t.Errorf("%s: flipping payload bit %d fails in a headers-only job", tc.name, bit)
			}
		}
		if key.Verify(b[:len(b)-1], 4, tc.payload) && covered == len(b) {
			t.Errorf("%s: a truncated datagram verifies", tc.name)
		}
	}
}

func BenchmarkMAC(b *testing.B) {
	key := NewKey([]byte("job secret"))
	for _, n := range []int{0, 512, MaxMedium} {
		m := Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 4}, Payload: make([]byte, n)}
		buf, _ := m.Append(nil)
		for _, payload := range []bool{false, true} {
			if n == 0 && payload {
				continue
			}
			name := "header"
			if payload {
				name = "full"
			}
			b.Run(name+"/"+strconv.Itoa(n), func(b *testing.B) {
				b.SetBytes(int64(len(buf)))
				for b.Loop() {
					key.Seal(buf, 1, payload)
				}
			})
		}
	}
}

// BenchmarkMACCandidates measures, per datagram and per byte, what
// authenticating payloads by default could cost (issue 26): SipHash-2-4
// over the whole datagram, as GASNET_AUTH_PAYLOAD=1 does now; GMAC (AES-GCM
// with the payload as additional data: AES-NI and carry-less
// multiplication); and, for encryption, AES-128-GCM and ChaCha20-Poly1305
// sealing the payload (Poly1305 alone needs a one-time key per message,
// which is what ChaCha20-Poly1305 makes). Figures, not a test.
func BenchmarkMACCandidates(b *testing.B) {
	key := NewKey([]byte("job secret"))
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
			{"siphash", func(uint64) { key.Seal(buf, 1, true) }},
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
