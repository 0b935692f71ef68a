package wire

import (
	"encoding/binary"
	"math/bits"
)

// aegisMAC computes AEGIS-128X2 MAC tags (draft-irtf-cfrg-aegis-aead,
// AEGISMAC-128X with degree 2 and 128-bit tags): AES rounds over two
// independent lanes, 64 bytes a state update. Its tags cover fastMin
// bytes or more (seal.go's fastTag and seal), where it costs the least
// per byte of the MACs measured (BENCHMARKS.md, Datagram protection).
//
// The state update runs on 256-bit registers where the CPU has VAES, on
// 128-bit ones a lane at a time where it has AES-NI or arm64's AES
// extension (aegis_amd64.s, aegis_arm64.s), and in Go elsewhere
// (aesRound: table lookups, not constant-time).
type aegisMAC struct {
	key [16]byte
}

// aegisState is AEGIS-128X2's state: eight 256-bit words, each the
// 128-bit blocks of lane 0 then lane 1.
type aegisState [8][32]byte

// aegisRate is the bytes one state update absorbs: 256 bits of each of
// two words.
const aegisRate = 64

// The constants of AEGIS, C0 (the Fibonacci sequence modulo 256) and C1.
var (
	aegisC0 = [16]byte{0x00, 0x01, 0x01, 0x02, 0x03, 0x05, 0x08, 0x0d, 0x15, 0x22, 0x37, 0x59, 0x90, 0xe9, 0x79, 0x62}
	aegisC1 = [16]byte{0xdb, 0x3d, 0x18, 0x55, 0x6d, 0xc2, 0x2f, 0xf1, 0x20, 0x11, 0x31, 0x42, 0x73, 0xb5, 0x28, 0xdd}
)

// newAegisMAC returns the AEGIS-128X2 MAC under a 16-byte key.
func newAegisMAC(key []byte) *aegisMAC {
	a := &aegisMAC{}
	copy(a.key[:], key)
	return a
}

// repeat2 returns b in both lanes.
func repeat2(b *[16]byte) (v [32]byte) {
	copy(v[:16], b[:])
	copy(v[16:], b[:])
	return v
}

func xor32(dst *[32]byte, a, b *[32]byte) {
	for i := 0; i < 32; i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], binary.LittleEndian.Uint64(a[i:])^binary.LittleEndian.Uint64(b[i:]))
	}
}

// init sets s to the state of key and nonce (Init of AEGIS-128X).
func (a *aegisMAC) init(s *aegisState, nonce *[16]byte) {
	if aegisInitAsm(s, &a.key, nonce) {
		return
	}
	k, n := repeat2(&a.key), repeat2(nonce)
	c0, c1 := repeat2(&aegisC0), repeat2(&aegisC1)
	xor32(&s[0], &k, &n)
	s[1], s[2], s[3] = c1, c0, c1
	s[4] = s[0]
	xor32(&s[5], &k, &c0)
	xor32(&s[6], &k, &c1)
	s[7] = s[5]
	// ctx: each lane's index, then the degree less one.
	var ctx [32]byte
	ctx[0], ctx[1] = 0, 1
	ctx[16], ctx[17] = 1, 1
	var m [aegisRate]byte
	copy(m[:32], n[:])
	copy(m[32:], k[:])
	for range 10 {
		xor32(&s[3], &s[3], &ctx)
		xor32(&s[7], &s[7], &ctx)
		aegisAbsorb(s, nil, m[:])
	}
}

// tagCopy writes to out the tag of head ‖ src under nonce (at most 16
// bytes, zero-padded), copying src to dst (of src's length, or nil) on
// the way: one pass over the bytes.
func (a *aegisMAC) tagCopy(out, nonce, head, dst, src []byte) {
	var s aegisState
	var n16 [16]byte
	copy(n16[:], nonce)
	a.init(&s, &n16)
	total := len(head) + len(src)
	full := len(head) / aegisRate * aegisRate
	aegisAbsorb(&s, nil, head[:full])
	// The block that head's tail and src's start share; from there src's
	// blocks are the data's.
	var mid [aegisRate]byte
	r := copy(mid[:], head[full:])
	k := copy(mid[r:], src)
	if dst != nil {
		copy(dst, src[:k])
	}
	if r += k; r == aegisRate {
		aegisAbsorb(&s, nil, mid[:])
		m := (len(src) - k) / aegisRate * aegisRate
		var d []byte
		if dst != nil {
			d = dst[k : k+m]
		}
		aegisAbsorb(&s, d, src[k:k+m])
		k += m
		mid = [aegisRate]byte{}
		r = copy(mid[:], src[k:])
		if dst != nil {
			copy(dst[k:], src[k:])
		}
	}
	if r > 0 {
		aegisAbsorb(&s, nil, mid[:])
	}
	a.finalize(out, &s, total)
}

// finalize writes the 128-bit tag of s, which absorbed n bytes
// (FinalizeMac of AEGIS-128X): each lane is finalized, both lanes' tags
// are absorbed into lane 0, and lane 0 is finalized again.
func (a *aegisMAC) finalize(out []byte, s *aegisState, n int) {
	// The lengths blocks of the two finalizations: the data's length in
	// bits and the tag's, then the degree and the tag's.
	var lens [2][16]byte
	binary.LittleEndian.PutUint64(lens[0][:], uint64(n)*8)
	binary.LittleEndian.PutUint64(lens[0][8:], 128)
	binary.LittleEndian.PutUint64(lens[1][:], 2)
	binary.LittleEndian.PutUint64(lens[1][8:], 128)
	if aegisFinalAsm(s, (*[16]byte)(out), &lens) {
		return
	}
	var m [aegisRate]byte
	final := func(l *[16]byte) {
		for i := range 32 {
			m[i] = s[2][i] ^ l[i%16]
		}
		copy(m[32:], m[:32])
		for range 7 {
			aegisAbsorb(s, nil, m[:])
		}
	}
	final(&lens[0])
	var blk [aegisRate]byte
	for i := range 7 {
		for j := range 16 {
			blk[j] ^= s[i][j]       // lane 0's tag, to lane 0's first block
			blk[32+j] ^= s[i][16+j] // lane 1's, to lane 0's second
		}
	}
	aegisAbsorb(s, nil, blk[:])
	final(&lens[1]) // lane 1's result is not used
	var tag [16]byte
	for i := range 7 {
		for j := range 16 {
			tag[j] ^= s[i][j]
		}
	}
	copy(out, tag[:])
}

// aegisAbsorb absorbs src, a multiple of aegisRate bytes, into s, and
// copies it to dst (nil for none, else of src's length).
func aegisAbsorb(s *aegisState, dst, src []byte) {
	if len(src) == 0 {
		return
	}
	if aegisAsm(s, dst, src) {
		return
	}
	for lane := range 2 {
		aegisLaneGo(s, lane, src)
	}
	copy(dst, src)
}

// aegisLaneGo is one lane of aegisAbsorb, in Go: lane's half of each
// word is its state, and 16 bytes at 16·lane and at 32+16·lane of each
// 64 its data.
func aegisLaneGo(s *aegisState, lane int, src []byte) {
	var st [8][16]byte
	for i := range st {
		copy(st[i][:], s[i][16*lane:])
	}
	for len(src) >= aegisRate {
		var m0, m1 [16]byte
		copy(m0[:], src[16*lane:])
		copy(m1[:], src[32+16*lane:])
		aegisUpdate(&st, &m0, &m1)
		src = src[aegisRate:]
	}
	for i := range st {
		copy(s[i][16*lane:], st[i][:])
	}
}

// aegisUpdate is AEGIS-128L's state update with message blocks m0, m1.
func aegisUpdate(s *[8][16]byte, m0, m1 *[16]byte) {
	var k0, k4 [16]byte
	for i := range 16 {
		k0[i] = s[0][i] ^ m0[i]
		k4[i] = s[4][i] ^ m1[i]
	}
	old7 := s[7]
	for i := 7; i >= 1; i-- {
		key := s[i]
		if i == 4 {
			key = k4
		}
		aesRound(&s[i], &s[i-1], &key)
	}
	aesRound(&s[0], &old7, &k0)
}

// aesRound sets dst to one AES encryption round of in with round key key
// (AES-NI's AESENC): SubBytes, ShiftRows, MixColumns, AddRoundKey, a
// column at a time from aesTable. The bytes are in AES's column order,
// as AES-NI's registers hold them.
func aesRound(dst, in, key *[16]byte) {
	var t [4]uint32
	for c := range 4 {
		t[c] = aesTable[in[4*c]] ^
			bits.RotateLeft32(aesTable[in[4*((c+1)%4)+1]], 8) ^
			bits.RotateLeft32(aesTable[in[4*((c+2)%4)+2]], 16) ^
			bits.RotateLeft32(aesTable[in[4*((c+3)%4)+3]], 24)
	}
	for c := range 4 {
		binary.LittleEndian.PutUint32(dst[4*c:], t[c]^binary.LittleEndian.Uint32(key[4*c:]))
	}
}

// aesTable[x] is the column that MixColumns makes of S-box(x) in row 0
// and zeros elsewhere, row r in byte r: 2·s, s, s, 3·s.
var aesTable = func() (t [256]uint32) {
	for x := range t {
		s := sbox[x]
		t[x] = uint32(xtime(s)) | uint32(s)<<8 | uint32(s)<<16 | uint32(xtime(s)^s)<<24
	}
	return t
}()
