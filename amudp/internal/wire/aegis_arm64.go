//go:build !purego

package wire

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// aegisWidth says how aegisAbsorb runs on this CPU: 128 on 128-bit
// registers a lane at a time (the AES extension), 0 in Go. A variable
// for tests.
var aegisWidth = func() int {
	if cpu.ARM64.HasAES {
		return 128
	}
	return 0
}()

// aegisAsm is aegisAbsorb in aegis_arm64.s, reporting false where this
// CPU has no AES instructions.
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
	for lane := range uintptr(2) {
		aegisAbsorb128((*byte)(unsafe.Add(unsafe.Pointer(&s[0][0]), 16*lane)),
			(*byte)(unsafe.Add(unsafe.Pointer(d), 16*lane)), &src[16*lane], inc, n)
	}
	return true
}

func aegisInitAsm(s *aegisState, key, nonce *[16]byte) bool { return false }

func aegisFinalAsm(s *aegisState, out *[16]byte, lens *[2][16]byte) {
	panic("wire: no 256-bit AEGIS here")
}

//go:noescape
func aegisAbsorb128(s, dst, src *byte, dstInc uintptr, nblocks int)
