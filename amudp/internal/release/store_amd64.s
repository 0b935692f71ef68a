//go:build amd64 && !race

#include "textflag.h"

// func Store(p *atomic.Uint64, v uint64)
// amd64 keeps stores in program order (TSO): a plain move is a release.
TEXT ·Store(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ v+8(FP), BX
	MOVQ BX, (AX)
	RET
