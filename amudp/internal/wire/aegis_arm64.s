//go:build !purego

#include "textflag.h"

// ROUND sets T to an AES round of S without its round key (AESE with a
// zero key in V31, then AESMC): AESENC's round less the key's exclusive or.
#define ROUND(S, T) \
	VORR  S.B16, S.B16, T.B16; \
	AESE  V31.B16, T.B16; \
	AESMC T.B16, T.B16

// func aegisAbsorb128(s, dst, src *byte, dstInc uintptr, nblocks int)
// absorbs nblocks 64-byte blocks at src into one lane of AEGIS-128X2's
// state (aegis_arm64.go), copying each block's bytes it reads to dst,
// which advances by dstInc a block: s, dst and src point at the lane's
// first 16 bytes, each block gives it the 16 bytes there and 32 bytes on,
// and its words lie 32 bytes apart. Each new word is the AES round of
// the word before it keyed by itself; words 0 and 4 also take the block.
TEXT ·aegisAbsorb128(SB), NOSPLIT, $0-40
	MOVD s+0(FP), R0
	MOVD dst+8(FP), R1
	MOVD src+16(FP), R2
	MOVD dstInc+24(FP), R3
	MOVD nblocks+32(FP), R4
	MOVD  R0, R5
	MOVD  $32, R6
	VLD1.P (R5)(R6), [V0.B16]
	VLD1.P (R5)(R6), [V1.B16]
	VLD1.P (R5)(R6), [V2.B16]
	VLD1.P (R5)(R6), [V3.B16]
	VLD1.P (R5)(R6), [V4.B16]
	VLD1.P (R5)(R6), [V5.B16]
	VLD1.P (R5)(R6), [V6.B16]
	VLD1.P (R5)(R6), [V7.B16]
	VEOR V31.B16, V31.B16, V31.B16

loop:
	VLD1 (R2), [V8.B16]
	ADD  $32, R2, R6
	VLD1 (R6), [V9.B16]
	VST1 [V8.B16], (R1)
	ADD  $32, R1, R7
	VST1 [V9.B16], (R7)
	VEOR V8.B16, V0.B16, V8.B16
	VEOR V9.B16, V4.B16, V9.B16
	ROUND(V0, V16)
	ROUND(V1, V17)
	ROUND(V2, V18)
	ROUND(V3, V19)
	ROUND(V4, V20)
	ROUND(V5, V21)
	ROUND(V6, V22)
	ROUND(V7, V23)
	VEOR V23.B16, V8.B16, V0.B16
	VEOR V16.B16, V1.B16, V1.B16
	VEOR V17.B16, V2.B16, V2.B16
	VEOR V18.B16, V3.B16, V3.B16
	VEOR V19.B16, V9.B16, V4.B16
	VEOR V20.B16, V5.B16, V5.B16
	VEOR V21.B16, V6.B16, V6.B16
	VEOR V22.B16, V7.B16, V7.B16
	ADD  $64, R2
	ADD  R3, R1
	SUBS $1, R4
	BNE  loop

	MOVD  R0, R5
	MOVD  $32, R6
	VST1.P [V0.B16], (R5)(R6)
	VST1.P [V1.B16], (R5)(R6)
	VST1.P [V2.B16], (R5)(R6)
	VST1.P [V3.B16], (R5)(R6)
	VST1.P [V4.B16], (R5)(R6)
	VST1.P [V5.B16], (R5)(R6)
	VST1.P [V6.B16], (R5)(R6)
	VST1.P [V7.B16], (R5)(R6)
	RET
