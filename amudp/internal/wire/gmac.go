package wire

import (
	"encoding/binary"
	"math/bits"
)

// gmac computes AES-GCM tags over at most shortMax bytes of additional
// data alone (GMAC) with ghash_amd64.s, in one call where crypto/cipher's
// AES-GCM takes several (BenchmarkSeal); the tags are the same bytes
// (TestGMACMatchesGCM).
type gmac struct {
	rk [11][16]byte // the AES-128 round keys, for aesEncrypt
	// tbl holds H^16 .. H^1, in ghash_amd64.s's representation.
	tbl [16][16]byte
}

// newGMAC returns the GMAC under the AES-128 key, or nil where the fast
// GHASH is not built or not supported.
func newGMAC(key []byte) *gmac {
	if !fastGHASH {
		return nil
	}
	g := &gmac{rk: expandKey128(key)}
	var h [16]byte
	aesEncrypt(&g.rk, &h, &h)
	// Byte-reversed, then doubled in the field (H·x): the representation
	// of ghash_amd64.s.
	lo, hi := binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint64(h[:8])
	carry := hi >> 63
	hi, lo = hi<<1|lo>>63, lo<<1
	if carry != 0 {
		hi ^= 0xc200000000000000
		lo ^= 1
	}
	var h1 [16]byte
	binary.LittleEndian.PutUint64(h1[:8], lo)
	binary.LittleEndian.PutUint64(h1[8:], hi)
	g.tbl[15] = h1
	for k := 14; k >= 0; k-- {
		gfmul(&g.tbl[k+1], &h1, &g.tbl[k])
	}
	return g
}

// shortMax is the most bytes tagShort takes: 15 blocks and the lengths
// block, the table's 16 powers of H.
const shortMax = 15 * 16

// tagShort writes to out the AES-GCM tag of nonce (12 bytes) with aad,
// at most shortMax bytes, as the additional data and nothing to encrypt,
// in one call of 128-bit instructions: the AES block and the products
// overlap, and the sum of products is reduced once.
func (g *gmac) tagShort(out []byte, nonce, aad []byte) {
	// The full blocks are read where they are; the partial one and the
	// lengths block from tail.
	full := len(aad) / 16
	var tail [32]byte
	r := copy(tail[:], aad[16*full:])
	ntail := 1
	if r > 0 {
		ntail = 2
	}
	binary.BigEndian.PutUint64(tail[16*(ntail-1):], uint64(len(aad))*8)
	var j0, t [16]byte
	copy(j0[:12], nonce)
	j0[15] = 1
	var data *byte
	if full > 0 {
		data = &aad[0]
	}
	gmacShort(&t, &g.rk, &g.tbl, data, full, &tail[0], ntail, &j0)
	copy(out, t[:])
}

// expandKey128 returns the round keys of an AES-128 key (FIPS 197 §5.2),
// in the byte order of AES-NI's round keys.
func expandKey128(key []byte) [11][16]byte {
	var w [44]uint32
	for i := range 4 {
		w[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	rcon := uint32(1)
	for i := 4; i < 44; i++ {
		t := w[i-1]
		if i%4 == 0 {
			t = subWord(bits.RotateLeft32(t, 8)) ^ rcon<<24
			rcon = uint32(xtime(byte(rcon)))
		}
		w[i] = w[i-4] ^ t
	}
	var rk [11][16]byte
	for i, x := range w {
		binary.BigEndian.PutUint32(rk[i/4][4*(i%4):], x)
	}
	return rk
}

// xtime multiplies by x in AES's field.
func xtime(b byte) byte {
	if b&0x80 != 0 {
		return b<<1 ^ 0x1b
	}
	return b << 1
}

// sbox is AES's S-box, computed: the field inverse, then the affine map.
var sbox = func() (s [256]byte) {
	p, q := byte(1), byte(1)
	for {
		p ^= xtime(p) // p·3
		// q/3: q·0xf6
		q ^= q << 1
		q ^= q << 2
		q ^= q << 4
		if q&0x80 != 0 {
			q ^= 0x09
		}
		s[p] = q ^ bits.RotateLeft8(q, 1) ^ bits.RotateLeft8(q, 2) ^ bits.RotateLeft8(q, 3) ^ bits.RotateLeft8(q, 4) ^ 0x63
		if p == 1 {
			break
		}
	}
	s[0] = 0x63
	return s
}()

func subWord(x uint32) uint32 {
	return uint32(sbox[x>>24])<<24 | uint32(sbox[x>>16&0xff])<<16 | uint32(sbox[x>>8&0xff])<<8 | uint32(sbox[x&0xff])
}
