//go:build !purego

package wire

import "golang.org/x/sys/cpu"

// aegisWidth says how aegisAbsorb runs on this CPU: 256 on 256-bit
// registers (VAES: CPUID leaf 7's ECX bit 9, with AVX2), 128 on 128-bit
// ones a lane at a time (AES-NI with AVX), 0 in Go. A variable for tests.
var aegisWidth = func() int {
	switch {
	case cpu.X86.HasAES && cpu.X86.HasAVX2 && cpuid7ECX()&(1<<9) != 0:
		return 256
	case cpu.X86.HasAES && cpu.X86.HasAVX:
		return 128
	}
	return 0
}()

// aegisInitAsm is aegisMAC.init on 256-bit registers, reporting false
// where they are not used.
func aegisInitAsm(s *aegisState, key, nonce *[16]byte) bool {
	if aegisWidth != 256 {
		return false
	}
	aegisInit256(s, key, nonce, &aegisC0, &aegisC1)
	return true
}

// aegisFinalAsm is aegisMAC.finalize on 256-bit registers
// (aegisFinal256), reporting false where they are not used.
func aegisFinalAsm(s *aegisState, out *[16]byte, lens *[2][16]byte) bool {
	if aegisWidth != 256 {
		return false
	}
	aegisFinal256(s, out, lens)
	return true
}

//go:noescape
func aegisInit256(s *aegisState, key, nonce, c0, c1 *[16]byte)

//go:noescape
func aegisFinal256(s *aegisState, out *[16]byte, lens *[2][16]byte)

//go:noescape
func aegisAbsorb256(s *aegisState, dst, src *byte, dstInc uintptr, nblocks int)

// cpuid7ECX returns ECX of CPUID leaf 7, subleaf 0.
//
//go:noescape
func cpuid7ECX() uint32
