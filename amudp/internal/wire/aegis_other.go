//go:build (!amd64 && !arm64) || purego

package wire

// aegisWidth is aegis_amd64.go's, for the tests: the state update runs
// in Go here.
var aegisWidth = 0

func aegisAsm(s *aegisState, dst, src []byte) bool { return false }

func aegisInitAsm(s *aegisState, key, nonce *[16]byte) bool { return false }

func aegisFinalAsm(s *aegisState, out *[16]byte, lens *[2][16]byte) bool { return false }
