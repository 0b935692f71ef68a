//go:build (amd64 || arm64) && !purego

package wire

import "unsafe"

// aegisAsm is aegisAbsorb in assembly (aegis_amd64.s, aegis_arm64.s):
// on 256-bit registers where aegisWidth is 256, else a lane at a time on
// 128-bit ones. It reports false where this CPU has no AES instructions.
func aegisAsm(s *aegisState, dst, src []byte) bool {
	if aegisWidth == 0 {
		return false
	}
	var scratch [aegisRate]byte
	d, inc := &scratch[0], uintptr(0)
	if dst != nil {
		d, inc = &dst[0], aegisRate
	}
	n := len(src) / aegisRate
	if aegisWidth == 256 {
		aegisAbsorb256(s, d, &src[0], inc, n)
		return true
	}
	for lane := range uintptr(2) {
		aegisAbsorb128((*byte)(unsafe.Add(unsafe.Pointer(&s[0][0]), 16*lane)),
			(*byte)(unsafe.Add(unsafe.Pointer(d), 16*lane)), &src[16*lane], inc, n)
	}
	return true
}

// aegisAbsorb128 absorbs nblocks 64-byte blocks at src into one lane of
// the state and copies the lane's bytes of each to dst, which advances
// by dstInc a block (0: a scratch block written over): s, dst and src
// point at the lane's first 16 bytes.
//
//go:noescape
func aegisAbsorb128(s, dst, src *byte, dstInc uintptr, nblocks int)
