//go:build !purego

#include "textflag.h"

// GHASH with carry-less multiplication for the GMAC tags of short
// datagrams (gmac.go), on 128-bit registers. Blocks are byte-reversed on
// load (bswapMask) and multiplied by powers of H·x, so that the products
// of the bit-reflected field elements reduce by the constant polyConst in
// two folds: the representation Go's own AES-GCM uses.

DATA bswapMask<>+0x00(SB)/8, $0x08090a0b0c0d0e0f
DATA bswapMask<>+0x08(SB)/8, $0x0001020304050607
GLOBL bswapMask<>(SB), (NOPTR+RODATA), $16

DATA polyConst<>+0x00(SB)/8, $0x0000000000000001
DATA polyConst<>+0x08(SB)/8, $0xc200000000000000
GLOBL polyConst<>(SB), (NOPTR+RODATA), $16

// fold: lo (X4), hi (X6) and the middle terms (X7) of a 256-bit product,
// reduced into dst; X5 is clobbered, X9 holds polyConst.
#define REDUCE(dst) \
	VPSRLDQ $8, X7, X5; \
	VPXOR X5, X6, X6; \
	VPSLLDQ $8, X7, X5; \
	VPXOR X5, X4, X4; \
	VPCLMULQDQ $0x01, X4, X9, X5; \
	VPSHUFD $78, X4, X4; \
	VPXOR X5, X4, X4; \
	VPCLMULQDQ $0x01, X4, X9, X5; \
	VPSHUFD $78, X4, X4; \
	VPXOR X5, X4, X4; \
	VPXOR X6, X4, dst

// func gfmul(x, y, out *[16]byte)
TEXT ·gfmul(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), AX
	MOVQ y+8(FP), BX
	MOVQ out+16(FP), CX
	VMOVDQU (AX), X0
	VMOVDQU (BX), X8
	VMOVDQU polyConst<>(SB), X9
	VPCLMULQDQ $0x00, X8, X0, X4
	VPCLMULQDQ $0x11, X8, X0, X6
	VPCLMULQDQ $0x01, X8, X0, X7
	VPCLMULQDQ $0x10, X8, X0, X5
	VPXOR X5, X7, X7
	REDUCE(X0)
	VMOVDQU X0, (CX)
	VZEROUPPER
	RET

// MULADDX adds the products of the block x by the power of H in h to the
// low (lo), high (hi) and middle (mid) sums; t is clobbered.
#define MULADDX(h, x, t, lo, hi, mid) \
	VPCLMULQDQ $0x00, h, x, t; \
	VPXOR      t, lo, lo; \
	VPCLMULQDQ $0x11, h, x, t; \
	VPXOR      t, hi, hi; \
	VPCLMULQDQ $0x01, h, x, t; \
	VPXOR      t, mid, mid; \
	VPCLMULQDQ $0x10, h, x, t; \
	VPXOR      t, mid, mid

// SHORTMUL adds the products of the block in X0 (loaded, not swapped) by
// the power of H at SI to the low (X4), high (X6) and middle (X7) sums,
// and moves SI to the next power; X5 and X8 are clobbered.
#define SHORTMUL \
	VPSHUFB X14, X0, X0; \
	VMOVDQU (SI), X8; \
	MULADDX(X8, X0, X5, X4, X6, X7); \
	ADDQ    $16, SI

// func aesEncrypt(rk *[11][16]byte, dst, src *[16]byte)
TEXT ·aesEncrypt(SB), NOSPLIT, $0-24
	MOVQ   rk+0(FP), AX
	MOVQ   dst+8(FP), BX
	MOVQ   src+16(FP), CX
	MOVOU  (CX), X0
	MOVOU  0(AX), X1
	PXOR   X1, X0
	MOVOU  16(AX), X1
	AESENC X1, X0
	MOVOU  32(AX), X1
	AESENC X1, X0
	MOVOU  48(AX), X1
	AESENC X1, X0
	MOVOU  64(AX), X1
	AESENC X1, X0
	MOVOU  80(AX), X1
	AESENC X1, X0
	MOVOU  96(AX), X1
	AESENC X1, X0
	MOVOU  112(AX), X1
	AESENC X1, X0
	MOVOU  128(AX), X1
	AESENC X1, X0
	MOVOU  144(AX), X1
	AESENC X1, X0
	MOVOU  160(AX), X1
	AESENCLAST X1, X0
	MOVOU  X0, (BX)
	RET

// func gmacShort(out *[16]byte, rk *[11][16]byte, tbl *[16][16]byte, data *byte, nfull int, tail *byte, ntail int, j0 *[16]byte)
// writes the GMAC tag of the nfull blocks at data followed by the ntail
// blocks at tail, the last of them the lengths block (1..16 blocks in
// all): GHASH by H^n .. H^1 from tbl's end, one reduction, byte-reversed,
// XOR the encryption of j0 under rk, which the processor overlaps with
// the products.
TEXT ·gmacShort(SB), NOSPLIT, $0-64
	MOVQ out+0(FP), DI
	MOVQ rk+8(FP), R8
	MOVQ tbl+16(FP), SI
	MOVQ data+24(FP), DX
	MOVQ nfull+32(FP), CX
	MOVQ tail+40(FP), R10
	MOVQ ntail+48(FP), R11
	MOVQ j0+56(FP), R9
	VMOVDQU (R9), X10
	VPXOR   0(R8), X10, X10
	VAESENC 16(R8), X10, X10
	VAESENC 32(R8), X10, X10
	VAESENC 48(R8), X10, X10
	VAESENC 64(R8), X10, X10
	VAESENC 80(R8), X10, X10
	VAESENC 96(R8), X10, X10
	VAESENC 112(R8), X10, X10
	VAESENC 128(R8), X10, X10
	VAESENC 144(R8), X10, X10
	VAESENCLAST 160(R8), X10, X10
	VMOVDQU bswapMask<>(SB), X14
	VMOVDQU polyConst<>(SB), X9
	MOVQ    $16, AX
	SUBQ    CX, AX
	SUBQ    R11, AX
	SHLQ    $4, AX
	ADDQ    AX, SI
	VPXOR   X4, X4, X4
	VPXOR   X6, X6, X6
	VPXOR   X7, X7, X7
	TESTQ   CX, CX
	JZ      tailshort

fullshort:
	VMOVDQU (DX), X0
	SHORTMUL
	ADDQ    $16, DX
	DECQ    CX
	JNZ     fullshort

tailshort:
	VMOVDQU (R10), X0
	SHORTMUL
	ADDQ    $16, R10
	DECQ    R11
	JNZ     tailshort
	REDUCE(X0)
	VPSHUFB X14, X0, X0
	VPXOR   X10, X0, X0
	VMOVDQU X0, (DI)
	RET
