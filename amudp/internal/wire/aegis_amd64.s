//go:build !purego

#include "textflag.h"

// AEGIS-128X2's state update over 64-byte blocks (aegis_amd64.go): the
// state's eight words in R0..R7, each new word an AES round (VAESENC) of
// the word before it keyed by itself; words 0 and 4 also take the
// block's two halves, M0 and M1. The eight rounds of an update are
// independent: word 7 is kept in T before it is overwritten.
#define UPDATE(R0, R1, R2, R3, R4, R5, R6, R7, M0, M1, T) \
	VPXOR M0, R0, M0; \
	VPXOR M1, R4, M1; \
	VMOVDQU R7, T; \
	VAESENC R7, R6, R7; \
	VAESENC R6, R5, R6; \
	VAESENC R5, R4, R5; \
	VAESENC M1, R3, R4; \
	VAESENC R3, R2, R3; \
	VAESENC R2, R1, R2; \
	VAESENC R1, R0, R1; \
	VAESENC M0, T, R0

// LOAD8 and STORE8 move the state's eight words at base, 32 bytes apart,
// to and from R0..R7.
#define LOAD8(base, R0, R1, R2, R3, R4, R5, R6, R7) \
	VMOVDQU 0(base), R0; \
	VMOVDQU 32(base), R1; \
	VMOVDQU 64(base), R2; \
	VMOVDQU 96(base), R3; \
	VMOVDQU 128(base), R4; \
	VMOVDQU 160(base), R5; \
	VMOVDQU 192(base), R6; \
	VMOVDQU 224(base), R7

#define STORE8(base, R0, R1, R2, R3, R4, R5, R6, R7) \
	VMOVDQU R0, 0(base); \
	VMOVDQU R1, 32(base); \
	VMOVDQU R2, 64(base); \
	VMOVDQU R3, 96(base); \
	VMOVDQU R4, 128(base); \
	VMOVDQU R5, 160(base); \
	VMOVDQU R6, 192(base); \
	VMOVDQU R7, 224(base)

// func aegisAbsorb256(s *aegisState, dst, src *byte, dstInc uintptr, nblocks int)
// absorbs nblocks 64-byte blocks at src into s, both lanes in one 256-bit
// register a word (VAES), and copies each to dst, which advances by
// dstInc a block (0: a scratch block written over).
TEXT ·aegisAbsorb256(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ dstInc+24(FP), DX
	MOVQ nblocks+32(FP), CX
	LOAD8(AX, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)

loop256:
	VMOVDQU 0(SI), Y8
	VMOVDQU 32(SI), Y9
	VMOVDQU Y8, 0(DI)
	VMOVDQU Y9, 32(DI)
	UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10)
	ADDQ $64, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  loop256

	STORE8(AX, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	VZEROUPPER
	RET

// func aegisAbsorb128(s, dst, src *byte, dstInc uintptr, nblocks int)
// is aegisAbsorb256 of one lane on 128-bit registers (AES-NI with AVX):
// s, dst and src point at the lane's first 16 bytes (16·lane into the
// state and the blocks); each block gives it the 16 bytes there and 32
// bytes on, and its words lie 32 bytes apart.
TEXT ·aegisAbsorb128(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), AX
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ dstInc+24(FP), DX
	MOVQ nblocks+32(FP), CX
	LOAD8(AX, X0, X1, X2, X3, X4, X5, X6, X7)

loop128:
	VMOVDQU 0(SI), X8
	VMOVDQU 32(SI), X9
	VMOVDQU X8, 0(DI)
	VMOVDQU X9, 32(DI)
	UPDATE(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10)
	ADDQ $64, SI
	ADDQ DX, DI
	DECQ CX
	JNZ  loop128

	STORE8(AX, X0, X1, X2, X3, X4, X5, X6, X7)
	RET

// The context separators of AEGIS-128X2's lanes: each lane's index, then
// the degree less one.
DATA aegisCtx<>+0x00(SB)/8, $0x0000000000000100
DATA aegisCtx<>+0x08(SB)/8, $0
DATA aegisCtx<>+0x10(SB)/8, $0x0000000000000101
DATA aegisCtx<>+0x18(SB)/8, $0
GLOBL aegisCtx<>(SB), (NOPTR+RODATA), $32

// INIT8 sets R0..R7 to AEGIS's state before its ten initial updates,
// from the key K, the nonce N and the constants C0 and C1.
#define INIT8(K, N, C0, C1, R0, R1, R2, R3, R4, R5, R6, R7) \
	VPXOR K, N, R0; \
	VMOVDQU C1, R1; \
	VMOVDQU C0, R2; \
	VMOVDQU C1, R3; \
	VMOVDQU R0, R4; \
	VPXOR K, C0, R5; \
	VPXOR K, C1, R6; \
	VMOVDQU R5, R7

// func aegisInit256(s *aegisState, key, nonce, c0, c1 *[16]byte)
// sets s to AEGIS-128X2's state of key and nonce (Init), with the
// constants C0 and C1, on 256-bit registers.
TEXT ·aegisInit256(SB), NOSPLIT, $0-40
	MOVQ s+0(FP), AX
	MOVQ key+8(FP), BX
	MOVQ nonce+16(FP), CX
	MOVQ c0+24(FP), DX
	MOVQ c1+32(FP), SI
	VBROADCASTI128 (BX), Y11
	VBROADCASTI128 (CX), Y12
	VBROADCASTI128 (DX), Y13
	VBROADCASTI128 (SI), Y14
	VMOVDQU aegisCtx<>(SB), Y15
	INIT8(Y11, Y12, Y13, Y14, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	MOVQ $10, CX

init256:
	VPXOR Y15, Y3, Y3
	VPXOR Y15, Y7, Y7
	VMOVDQU Y12, Y8
	VMOVDQU Y11, Y9
	UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10)
	DECQ CX
	JNZ  init256

	STORE8(AX, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	VZEROUPPER
	RET


// TAGS sets Y13 to both lanes' tags: the sum of words 0..6.
#define TAGS \
	VPXOR Y0, Y1, Y13; \
	VPXOR Y2, Y13, Y13; \
	VPXOR Y3, Y13, Y13; \
	VPXOR Y4, Y13, Y13; \
	VPXOR Y5, Y13, Y13; \
	VPXOR Y6, Y13, Y13

// func aegisFinal256(s *aegisState, out *[16]byte, lens *[2][16]byte)
// writes the 128-bit tag of s (FinalizeMac of AEGIS-128X2), lens holding
// the lengths blocks of its two finalizations: the data's length in bits
// and the tag's, then the degree and the tag's.
TEXT ·aegisFinal256(SB), NOSPLIT, $0-24
	MOVQ s+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ lens+16(FP), SI
	LOAD8(AX, Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7)
	VBROADCASTI128 0(SI), Y12
	VPXOR Y12, Y2, Y13
	MOVQ $7, CX

final1:
	VMOVDQU Y13, Y8
	VMOVDQU Y13, Y9
	UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10)
	DECQ CX
	JNZ  final1

	// Lane 0's tag to lane 0's first block, lane 1's to its second; lane
	// 1 takes zeros (a VEX 128-bit write clears the upper half).
	TAGS
	VMOVDQA X13, X8
	VEXTRACTI128 $1, Y13, X9
	UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10)
	VMOVDQU 16(SI), X12
	VPXOR X12, X2, X13
	MOVQ $7, CX

final2:
	VMOVDQU Y13, Y8
	VMOVDQU Y13, Y9
	UPDATE(Y0, Y1, Y2, Y3, Y4, Y5, Y6, Y7, Y8, Y9, Y10)
	DECQ CX
	JNZ  final2

	TAGS
	VMOVDQU X13, (DI)
	VZEROUPPER
	RET

// func cpuid7ECX() uint32 returns ECX of CPUID leaf 7, subleaf 0, whose
// bit 9 is VAES.
TEXT ·cpuid7ECX(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET

// func aegisInit128(s *byte, key, nonce, c0, c1, ctx *[16]byte) is
// aegisInit256 of one lane on 128-bit registers (AES-NI with AVX): s
// points at the lane's first 16 bytes, its words 32 bytes apart, and ctx
// is the lane's context separator.
TEXT ·aegisInit128(SB), NOSPLIT, $0-48
	MOVQ s+0(FP), AX
	MOVQ key+8(FP), BX
	MOVQ nonce+16(FP), CX
	MOVQ c0+24(FP), DX
	MOVQ c1+32(FP), SI
	MOVQ ctx+40(FP), DI
	VMOVDQU (BX), X11
	VMOVDQU (CX), X12
	VMOVDQU (DX), X13
	VMOVDQU (SI), X14
	VMOVDQU (DI), X15
	INIT8(X11, X12, X13, X14, X0, X1, X2, X3, X4, X5, X6, X7)
	MOVQ $10, CX

init128:
	VPXOR X15, X3, X3
	VPXOR X15, X7, X7
	VMOVDQU X12, X8
	VMOVDQU X11, X9
	UPDATE(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10)
	DECQ CX
	JNZ  init128

	STORE8(AX, X0, X1, X2, X3, X4, X5, X6, X7)
	RET

// TAG128(T) sets T to one lane's tag: the sum of words 0..6.
#define TAG128(T) \
	VPXOR X0, X1, T; \
	VPXOR X2, T, T; \
	VPXOR X3, T, T; \
	VPXOR X4, T, T; \
	VPXOR X5, T, T; \
	VPXOR X6, T, T

// func aegisFinal128(s *aegisState, out *[16]byte, lens *[2][16]byte) is
// aegisFinal256 on 128-bit registers, a lane at a time: lane 1 is
// finalized, then lane 0, which absorbs both tags and is finalized
// again (lane 1's state after that is never used).
TEXT ·aegisFinal128(SB), NOSPLIT, $0-24
	MOVQ s+0(FP), AX
	MOVQ out+8(FP), DI
	MOVQ lens+16(FP), SI
	VMOVDQU 0(SI), X12
	LEAQ 16(AX), BX
	LOAD8(BX, X0, X1, X2, X3, X4, X5, X6, X7)
	VPXOR X12, X2, X13
	MOVQ $7, CX

final128lane1:
	VMOVDQU X13, X8
	VMOVDQU X13, X9
	UPDATE(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10)
	DECQ CX
	JNZ  final128lane1

	TAG128(X11)
	LOAD8(AX, X0, X1, X2, X3, X4, X5, X6, X7)
	VPXOR X12, X2, X13
	MOVQ $7, CX

final128lane0:
	VMOVDQU X13, X8
	VMOVDQU X13, X9
	UPDATE(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10)
	DECQ CX
	JNZ  final128lane0

	// Lane 0's tag as the first block, lane 1's as the second.
	TAG128(X8)
	VMOVDQU X11, X9
	UPDATE(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10)
	VMOVDQU 16(SI), X12
	VPXOR X12, X2, X13
	MOVQ $7, CX

final128again:
	VMOVDQU X13, X8
	VMOVDQU X13, X9
	UPDATE(X0, X1, X2, X3, X4, X5, X6, X7, X8, X9, X10)
	DECQ CX
	JNZ  final128again

	TAG128(X13)
	VMOVDQU X13, (DI)
	RET
