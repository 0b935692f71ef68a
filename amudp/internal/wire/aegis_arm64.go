//go:build !purego

package wire

import "golang.org/x/sys/cpu"

// aegisWidth says how aegisAbsorb runs on this CPU: 128 on 128-bit
// registers a lane at a time (the AES extension), 0 in Go. A variable
// for tests.
var aegisWidth = func() int {
	if cpu.ARM64.HasAES {
		return 128
	}
	return 0
}()

func aegisInitAsm(s *aegisState, key, nonce *[16]byte) bool { return false }

func aegisFinalAsm(s *aegisState, out *[16]byte, lens *[2][16]byte) bool { return false }

func aegisAbsorb256(s *aegisState, dst, src *byte, dstInc uintptr, nblocks int) {
	panic("wire: no 256-bit AEGIS here")
}
