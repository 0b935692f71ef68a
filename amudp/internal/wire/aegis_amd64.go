//go:build !purego

package wire

import "golang.org/x/sys/cpu"

// aegisWidth says how AEGIS (aegisAbsorb, its initialization and
// finalization) runs on this CPU: 256 on 256-bit registers (VAES: CPUID
// leaf 7's ECX bit 9, with AVX2), 128 on 128-bit ones a lane at a time
// (AES-NI with AVX), 0 in Go. A variable for tests.
var aegisWidth = func() int {
	switch {
	case cpu.X86.HasAES && cpu.X86.HasAVX2 && cpuid7ECX()&(1<<9) != 0:
		return 256
	case cpu.X86.HasAES && cpu.X86.HasAVX:
		return 128
	}
	return 0
}()

// aegisInitAsm is aegisMAC.init in assembly, on 256-bit registers or a
// lane at a time on 128-bit ones, reporting false where neither runs.
func aegisInitAsm(s *aegisState, key, nonce *[16]byte) bool {
	switch aegisWidth {
	case 256:
		aegisInit256(s, key, nonce, &aegisC0, &aegisC1)
	case 128:
		for lane := range 2 {
			aegisInit128(&s[0][16*lane], key, nonce, &aegisC0, &aegisC1, &aegisLaneCtx[lane])
		}
	default:
		return false
	}
	return true
}

// aegisLaneCtx is each lane's context separator: its index, then the
// degree less one.
var aegisLaneCtx = [2][16]byte{{0, 1}, {1, 1}}

// aegisFinalAsm is aegisMAC.finalize in assembly (aegisFinal256,
// aegisFinal128), reporting false where neither runs.
func aegisFinalAsm(s *aegisState, out *[16]byte, lens *[2][16]byte) bool {
	switch aegisWidth {
	case 256:
		aegisFinal256(s, out, lens)
	case 128:
		aegisFinal128(s, out, lens)
	default:
		return false
	}
	return true
}

//go:noescape
func aegisInit128(s *byte, key, nonce, c0, c1, ctx *[16]byte)

//go:noescape
func aegisFinal128(s *aegisState, out *[16]byte, lens *[2][16]byte)

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
