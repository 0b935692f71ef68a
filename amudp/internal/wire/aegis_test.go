package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// eachAegisWidth runs f with the state update on each width this CPU
// has (aegisWidth), Go's included, and restores it.
// UDPCONDUIT_AEGIS_WIDTH makes it fail where this CPU has less (make
// test's run under qemu: its assembly must run).
func eachAegisWidth(t *testing.T, f func(t *testing.T)) {
	if w, err := strconv.Atoi(os.Getenv("UDPCONDUIT_AEGIS_WIDTH")); err == nil && aegisWidth < w {
		t.Fatalf("UDPCONDUIT_AEGIS_WIDTH=%d: this CPU runs AEGIS on %d-bit registers (0: in Go)", w, aegisWidth)
	}
	has := aegisWidth
	defer func() { aegisWidth = has }()
	for _, w := range []int{0, 128, 256} {
		if w > has {
			t.Logf("no %d-bit AES instructions here: not run", w)
			continue
		}
		aegisWidth = w
		t.Run(map[int]string{0: "go", 128: "128-bit", 256: "256-bit"}[w], f)
	}
}

// TestAegisAbsorbWidths: the state update in assembly leaves the state
// that the one in Go does, and copies what it absorbs.
func TestAegisAbsorbWidths(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var start aegisState
	for i := range start {
		copy(start[i][:], randomBytes(r, 32))
	}
	src := randomBytes(r, 64*37)
	var want aegisState
	var wantDst []byte
	eachAegisWidth(t, func(t *testing.T) {
		for _, n := range []int{1, 2, 37} {
			s := start
			dst := make([]byte, 64*n)
			aegisAbsorb(&s, dst, src[:64*n])
			if !bytes.Equal(dst, src[:64*n]) {
				t.Fatalf("%d blocks: dst is not a copy of src", n)
			}
			s2 := start
			aegisAbsorb(&s2, nil, src[:64*n])
			if s2 != s {
				t.Fatalf("%d blocks: the state differs with and without a copy", n)
			}
			if n == 37 {
				if wantDst == nil {
					want, wantDst = s, dst
				} else if s != want {
					t.Fatalf("%d blocks: state differs from Go's", n)
				}
			}
		}
	})
}

// BenchmarkMAC: the tags of a datagram's bytes, AEGIS-128X2's MAC against
// crypto/cipher's GMAC, each copying the bytes as sealing does.
func BenchmarkMAC(b *testing.B) {
	key := make([]byte, 16)
	a := newAegisMAC(key)
	nonce := make([]byte, 12)
	out := make([]byte, 16)
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	for _, n := range []int{256, 512, 4096, 65000} {
		head, src, dst := make([]byte, 40), make([]byte, n), make([]byte, n)
		fill(src)
		b.Run("aegis/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				a.tagCopy(out, nonce, head, dst, src)
			}
		})
		b.Run("crypto-cipher-gmac/"+strconv.Itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				copy(dst, src)
				gcm.Seal(out[:0], nonce, nil, dst)
			}
		})
	}
}

// TestAegisVectors: draft-irtf-cfrg-aegis-aead-17's test vectors of the
// AES round (A.1), AEGIS-128X2's initial state (A.4.1) and AEGISMAC-128X2
// (A.8.2), on each width.
func TestAegisVectors(t *testing.T) {
	eachAegisWidth(t, func(t *testing.T) {
		var in, rk, out [16]byte
		copy(in[:], unhex(t, "000102030405060708090a0b0c0d0e0f"))
		copy(rk[:], unhex(t, "101112131415161718191a1b1c1d1e1f"))
		aesRound(&out, &in, &rk)
		if got := hex.EncodeToString(out[:]); got != "7a7b4e5638782546a8c0477a3b813f43" {
			t.Errorf("AESRound: %s", got)
		}

		a := newAegisMAC(unhex(t, "000102030405060708090a0b0c0d0e0f"))
		var s aegisState
		var n [16]byte
		copy(n[:], unhex(t, "101112131415161718191a1b1c1d1e1f"))
		a.init(&s, &n)
		for _, c := range []struct {
			j, lane int
			want    string
		}{
			{0, 0, "a4fc1ad9a72942fb88bd2cabbba6509a"}, {0, 1, "80a40e392fc71084209b6c3319bdc6cc"},
			{1, 0, "380f435cf801763b1f0c2a2f7212052d"}, {1, 1, "73796607b59b1b650ee91c152af1f18a"},
			{2, 0, "6ee1de433ea877fa33bc0782abff2dcb"}, {2, 1, "b9fab2ab496e16d1facaffd5453cbf14"},
			{3, 0, "85f94b0d4263bfa86fdf45a603d8b6ac"},
		} {
			if got := hex.EncodeToString(s[c.j][16*c.lane : 16*c.lane+16]); got != c.want {
				t.Errorf("initial V[%d,%d] = %s, want %s", c.j, c.lane, got, c.want)
			}
		}

		a = newAegisMAC(unhex(t, "10010000000000000000000000000000"))
		data := unhex(t, "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f202122")
		nonce := unhex(t, "10000200000000000000000000000000")
		tag := make([]byte, 16)
		// Every split of the data into head and src, copied or not.
		for h := range len(data) + 1 {
			dst := make([]byte, len(data)-h)
			a.tagCopy(tag, nonce, data[:h], dst, data[h:])
			if got := hex.EncodeToString(tag); got != "6873ee34e6b5c59143b6d35c5e4f2c6e" {
				t.Fatalf("head of %d bytes: tag128 %s", h, got)
			}
			if !bytes.Equal(dst, data[h:]) {
				t.Fatalf("head of %d bytes: dst is not a copy", h)
			}
		}
	})
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAegisSplits: the tag of head ‖ src is the tag of their
// concatenation in Go, and src is copied, however the bytes are split
// between the two and whatever their lengths around the rate, on each
// width.
func TestAegisSplits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	data := randomBytes(r, MaxDatagram)
	a := newAegisMAC(data[:16])
	nonce := data[16:28]
	lengths := []int{0, 1, 63, 64, 65, 127, 128, 200, 511, 512, 4096, 65000, MaxDatagram}
	// The tags of the whole, in Go.
	wholes := map[int][]byte{}
	has := aegisWidth
	aegisWidth = 0
	for _, n := range lengths {
		wholes[n] = make([]byte, TagLen)
		a.tagCopy(wholes[n], nonce, data[:n], nil, nil)
	}
	aegisWidth = has
	eachAegisWidth(t, func(t *testing.T) {
		for _, n := range lengths {
			whole := wholes[n]
			for _, h := range []int{0, 1, 35, 36, 63, 64, 65, 100, 128, 129, 300} {
				if h > n {
					continue
				}
				got, dst := make([]byte, TagLen), make([]byte, n-h)
				a.tagCopy(got, nonce, data[:h], dst, data[h:n])
				if !bytes.Equal(got, whole) || !bytes.Equal(dst, data[h:n]) {
					t.Fatalf("%d bytes, head %d: tag %x, whole's %x; copied intact: %v", n, h, got, whole, bytes.Equal(dst, data[h:n]))
				}
			}
		}
	})
}

// fill writes b, so that a benchmark's source is memory of its own: a
// buffer never written may read the kernel's one zero page, and copies
// from it run slower than from memory written (BENCHMARKS.md, Datagram
// protection).
func fill(b []byte) {
	for i := range b {
		b[i] = byte(i)
	}
}
