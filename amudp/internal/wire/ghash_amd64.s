//go:build !purego

#include "textflag.h"

// GHASH with carry-less multiplication (ghash_amd64.go). Blocks are
// byte-reversed on load (bswapMask) and multiplied by powers of H·x, so
// that the products of the bit-reflected field elements reduce by the
// constant polyConst in two folds: the representation Go's own AES-GCM
// uses. The 32- and 16-block loops multiply four blocks per instruction on
// 512-bit registers (VPCLMULQDQ, AVX-512) and reduce once per loop; on a
// CPU with VPCLMULQDQ but not AVX-512, the 16-block loop of ghashBlocks256
// and ghashCopy256 multiplies two blocks per instruction on 256-bit
// registers (AVX2).

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

// GHASH_SETUP loads the accumulator (X15), polyConst (X9) and the byte
// swap for four blocks (Z14).
#define GHASH_SETUP(acc) \
	VMOVDQU (acc), X15; \
	VMOVDQU polyConst<>(SB), X9; \
	VBROADCASTI32X4 bswapMask<>(SB), Z14

// LOAD_TABLE loads H^32..H^17 into Z16..Z19 and H^16..H^1 into
// Z10..Z13, four to a register.
#define LOAD_TABLE(tbl) \
	VMOVDQU64 0(tbl), Z16; \
	VMOVDQU64 64(tbl), Z17; \
	VMOVDQU64 128(tbl), Z18; \
	VMOVDQU64 192(tbl), Z19; \
	VMOVDQU64 256(tbl), Z10; \
	VMOVDQU64 320(tbl), Z11; \
	VMOVDQU64 384(tbl), Z12; \
	VMOVDQU64 448(tbl), Z13

// SWAP4 byte-reverses the four blocks of Z0..Z3 and folds the accumulator
// into the first.
#define SWAP4 \
	VPSHUFB Z14, Z0, Z0; \
	VPXORQ  Z15, Z0, Z0; \
	VPSHUFB Z14, Z1, Z1; \
	VPSHUFB Z14, Z2, Z2; \
	VPSHUFB Z14, Z3, Z3

// MULADD adds the products of the blocks of x by the powers of H in h
// (four of each in Z registers, one in X) to the low (lo), high (hi) and
// middle (mid) sums; t is clobbered.
#define MULADD(h, x, t, lo, hi, mid) \
	VPCLMULQDQ $0x00, h, x, t; \
	VPXORQ     t, lo, lo; \
	VPCLMULQDQ $0x11, h, x, t; \
	VPXORQ     t, hi, hi; \
	VPCLMULQDQ $0x01, h, x, t; \
	VPXORQ     t, mid, mid; \
	VPCLMULQDQ $0x10, h, x, t; \
	VPXORQ     t, mid, mid

// MULADDX is MULADD on 128-bit registers, without AVX-512 (VEX-encoded).
#define MULADDX(h, x, t, lo, hi, mid) \
	VPCLMULQDQ $0x00, h, x, t; \
	VPXOR      t, lo, lo; \
	VPCLMULQDQ $0x11, h, x, t; \
	VPXOR      t, hi, hi; \
	VPCLMULQDQ $0x01, h, x, t; \
	VPXOR      t, mid, mid; \
	VPCLMULQDQ $0x10, h, x, t; \
	VPXOR      t, mid, mid

// LANES sums the four lanes of z (whose low halves are y and x) into x;
// Y5 is clobbered.
#define LANES(z, y, x) \
	VEXTRACTI64X4 $1, z, Y5; \
	VPXOR         Y5, y, y; \
	VEXTRACTI128  $1, y, X5; \
	VPXOR         X5, x, x

// MUL16 folds the 16 blocks of Z0..Z3 (swapped) into the accumulator X15.
#define MUL16 \
	VPCLMULQDQ $0x00, Z10, Z0, Z4; \
	VPCLMULQDQ $0x11, Z10, Z0, Z6; \
	VPCLMULQDQ $0x01, Z10, Z0, Z7; \
	VPCLMULQDQ $0x10, Z10, Z0, Z5; \
	VPXORQ     Z5, Z7, Z7; \
	MULADD(Z11, Z1, Z5, Z4, Z6, Z7); \
	MULADD(Z12, Z2, Z5, Z4, Z6, Z7); \
	MULADD(Z13, Z3, Z5, Z4, Z6, Z7); \
	LANES(Z4, Y4, X4); \
	LANES(Z6, Y6, X6); \
	LANES(Z7, Y7, X7); \
	REDUCE(X15)

// MULK2 adds the products of two registers of blocks, x1 and x2, by the
// powers of H in h1 and h2 (four of each) to the low (lo), high (hi) and
// middle (mid) sums, the middle ones by Karatsuba: (x₀⊕x₁)·(h₀⊕h₁), with
// h₀⊕h₁ at hk1(SI) and hk2(SI) (the table's second half), which leaves
// lo ⊕ hi to add to mid once at the end. op puts each pair of products
// into its sum: ADD3 adds them in one three-way exclusive or, SET3 sets
// the sum to them. Z5, Z8, Z24 and Z25 are clobbered.
#define MULK2(op, h1, hk1, x1, h2, hk2, x2, lo, hi, mid) \
	VPCLMULQDQ $0x00, h1, x1, Z5; \
	VPCLMULQDQ $0x00, h2, x2, Z8; \
	op(Z5, Z8, lo); \
	VPCLMULQDQ $0x11, h1, x1, Z5; \
	VPCLMULQDQ $0x11, h2, x2, Z8; \
	op(Z5, Z8, hi); \
	VPSHUFD    $78, x1, Z24; \
	VPSHUFD    $78, x2, Z25; \
	VPXORQ     x1, Z24, Z24; \
	VPXORQ     x2, Z25, Z25; \
	VPCLMULQDQ $0x00, hk1(SI), Z24, Z5; \
	VPCLMULQDQ $0x00, hk2(SI), Z25, Z8; \
	op(Z5, Z8, mid)

#define ADD3(a, b, sum) VPTERNLOGQ $0x96, a, b, sum
#define SET3(a, b, sum) VPXORQ a, b, sum

// MUL32 folds the 32 blocks of Z0..Z3 and Z20..Z23 (swapped, the
// accumulator in Z0) into the accumulator X15, three products a block
// (MULK2). The products that do not depend on the accumulator come first,
// so that the next iteration waits for it only through the last pair's
// products and sums, the lanes' sum and the reduction.
#define MUL32 \
	MULK2(SET3, Z13, 960, Z23, Z12, 896, Z22, Z4, Z6, Z7); \
	MULK2(ADD3, Z11, 832, Z21, Z10, 768, Z20, Z4, Z6, Z7); \
	MULK2(ADD3, Z19, 704, Z3, Z18, 640, Z2, Z4, Z6, Z7); \
	MULK2(ADD3, Z17, 576, Z1, Z16, 512, Z0, Z4, Z6, Z7); \
	VPTERNLOGQ $0x96, Z4, Z6, Z7; \
	LANES(Z4, Y4, X4); \
	LANES(Z6, Y6, X6); \
	LANES(Z7, Y7, X7); \
	REDUCE(X15)

// LOAD32 loads the 32 blocks at DX into Z0..Z3 and Z20..Z23.
#define LOAD32 \
	VMOVDQU64 0(DX), Z0; \
	VMOVDQU64 64(DX), Z1; \
	VMOVDQU64 128(DX), Z2; \
	VMOVDQU64 192(DX), Z3; \
	VMOVDQU64 256(DX), Z20; \
	VMOVDQU64 320(DX), Z21; \
	VMOVDQU64 384(DX), Z22; \
	VMOVDQU64 448(DX), Z23

// STORE32 stores LOAD32's blocks, as loaded, at R8.
#define STORE32 \
	VMOVDQU64 Z0, 0(R8); \
	VMOVDQU64 Z1, 64(R8); \
	VMOVDQU64 Z2, 128(R8); \
	VMOVDQU64 Z3, 192(R8); \
	VMOVDQU64 Z20, 256(R8); \
	VMOVDQU64 Z21, 320(R8); \
	VMOVDQU64 Z22, 384(R8); \
	VMOVDQU64 Z23, 448(R8)

// FOLD32 byte-reverses LOAD32's blocks and folds them into X15.
#define FOLD32 \
	SWAP4; \
	VPSHUFB Z14, Z20, Z20; \
	VPSHUFB Z14, Z21, Z21; \
	VPSHUFB Z14, Z22, Z22; \
	VPSHUFB Z14, Z23, Z23; \
	MUL32

// SHORTMUL adds the products of the block in X0 (loaded, not swapped) by
// the power of H at SI to the low (X4), high (X6) and middle (X7) sums,
// and moves SI to the next power; X5 and X8 are clobbered.
#define SHORTMUL \
	VPSHUFB X14, X0, X0; \
	VMOVDQU (SI), X8; \
	MULADDX(X8, X0, X5, X4, X6, X7); \
	ADDQ    $16, SI

// TAIL_START points SI at H^CX in the table (CX = 1..15 blocks left),
// clears the sums and adds the product of the first block, the
// accumulator folded in, by it: the last blocks are multiplied by
// H^CX .. H^1 and reduced once.
#define TAIL_START \
	MOVQ       $32, AX; \
	SUBQ       CX, AX; \
	SHLQ       $4, AX; \
	ADDQ       AX, SI; \
	VPXOR      X4, X4, X4; \
	VPXOR      X6, X6, X6; \
	VPXOR      X7, X7, X7; \
	VPSHUFB    X14, X0, X0; \
	VPXOR      X15, X0, X0; \
	VMOVDQU    (SI), X8; \
	MULADDX(X8, X0, X5, X4, X6, X7); \
	ADDQ       $16, SI

// func ghashBlocks512(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)
// folds a multiple of 16 blocks (ghashTail takes the rest).
TEXT ·ghashBlocks512(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ tbl+8(FP), SI
	MOVQ data+16(FP), DX
	MOVQ nblocks+24(FP), CX
	GHASH_SETUP(DI)
	LOAD_TABLE(SI)
	CMPQ CX, $32
	JB   loop16

loop32:
	LOAD32
	FOLD32
	ADDQ $512, DX
	SUBQ $32, CX
	CMPQ CX, $32
	JAE  loop32
	TESTQ CX, CX
	JZ   done

loop16:
	VMOVDQU64 0(DX), Z0
	VMOVDQU64 64(DX), Z1
	VMOVDQU64 128(DX), Z2
	VMOVDQU64 192(DX), Z3
	SWAP4
	MUL16
	ADDQ $256, DX
	SUBQ $16, CX
	JNZ  loop16

done:
	VMOVDQU X15, (DI)
	VZEROUPPER
	RET

// func ghashCopy512(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int)
// is ghashBlocks512 over src that also copies src to dst.
TEXT ·ghashCopy512(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ tbl+8(FP), SI
	MOVQ dst+16(FP), R8
	MOVQ src+24(FP), DX
	MOVQ nblocks+32(FP), CX
	GHASH_SETUP(DI)
	LOAD_TABLE(SI)
	CMPQ CX, $32
	JB   loop16c

loop32c:
	LOAD32
	STORE32
	FOLD32
	ADDQ $512, DX
	ADDQ $512, R8
	SUBQ $32, CX
	CMPQ CX, $32
	JAE  loop32c
	TESTQ CX, CX
	JZ   donec

loop16c:
	VMOVDQU64 0(DX), Z0
	VMOVDQU64 64(DX), Z1
	VMOVDQU64 128(DX), Z2
	VMOVDQU64 192(DX), Z3
	VMOVDQU64 Z0, 0(R8)
	VMOVDQU64 Z1, 64(R8)
	VMOVDQU64 Z2, 128(R8)
	VMOVDQU64 Z3, 192(R8)
	SWAP4
	MUL16
	ADDQ $256, DX
	ADDQ $256, R8
	SUBQ $16, CX
	JNZ  loop16c

donec:
	VMOVDQU X15, (DI)
	VZEROUPPER
	RET

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

// GHASH_SETUP256 loads the accumulator (X15), polyConst (X9) and the byte
// swap for two blocks (Y14).
#define GHASH_SETUP256(acc) \
	VMOVDQU (acc), X15; \
	VMOVDQU polyConst<>(SB), X9; \
	VBROADCASTI128 bswapMask<>(SB), Y14

// LD2 loads the two blocks at off(DX) into Y0, byte-reversed.
#define LD2(off) \
	VMOVDQU off(DX), Y0; \
	VPSHUFB Y14, Y0, Y0

// LDC2 is LD2 that also stores the blocks, as loaded, at off(R8).
#define LDC2(off) \
	VMOVDQU off(DX), Y0; \
	VMOVDQU Y0, off(R8); \
	VPSHUFB Y14, Y0, Y0

// MUL2SET sets the low (Y4), high (Y6) and middle (Y7) sums to the
// products of the two blocks of Y0 by the two powers of H at h(SI), the
// middle ones by Karatsuba, (x₀⊕x₁)·(h₀⊕h₁) with h₀⊕h₁ at h+512(SI) (the
// table's second half), which leaves lo ⊕ hi to add to mid at the end;
// Y5 and Y8 are clobbered.
#define MUL2SET(h, hk) \
	VPCLMULQDQ $0x00, h(SI), Y0, Y4; \
	VPCLMULQDQ $0x11, h(SI), Y0, Y6; \
	VPSHUFD    $78, Y0, Y8; \
	VPXOR      Y0, Y8, Y8; \
	VPCLMULQDQ $0x00, hk(SI), Y8, Y7

// MUL2ADD adds those products to the sums.
#define MUL2ADD(h, hk) \
	VPCLMULQDQ $0x00, h(SI), Y0, Y5; \
	VPXOR      Y5, Y4, Y4; \
	VPCLMULQDQ $0x11, h(SI), Y0, Y5; \
	VPXOR      Y5, Y6, Y6; \
	VPSHUFD    $78, Y0, Y8; \
	VPXOR      Y0, Y8, Y8; \
	VPCLMULQDQ $0x00, hk(SI), Y8, Y5; \
	VPXOR      Y5, Y7, Y7

// FOLD16Y folds the 16 blocks at DX (loaded by ld) into X15: block i by
// H^(16-i), the powers H^16 .. H^1 at 256(SI), two to a register. The
// pairs that do not depend on the accumulator come first, the first pair,
// into which it is folded, last; then the lanes' sums and one reduction.
#define FOLD16Y(ld) \
	ld(224); \
	MUL2SET(480, 992); \
	ld(192); \
	MUL2ADD(448, 960); \
	ld(160); \
	MUL2ADD(416, 928); \
	ld(128); \
	MUL2ADD(384, 896); \
	ld(96); \
	MUL2ADD(352, 864); \
	ld(64); \
	MUL2ADD(320, 832); \
	ld(32); \
	MUL2ADD(288, 800); \
	ld(0); \
	VPXOR Y15, Y0, Y0; \
	MUL2ADD(256, 768); \
	VPXOR        Y4, Y7, Y7; \
	VPXOR        Y6, Y7, Y7; \
	VEXTRACTI128 $1, Y4, X5; \
	VPXOR        X5, X4, X4; \
	VEXTRACTI128 $1, Y6, X5; \
	VPXOR        X5, X6, X6; \
	VEXTRACTI128 $1, Y7, X5; \
	VPXOR        X5, X7, X7; \
	REDUCE(X15)

// func ghashBlocks256(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)
// is ghashBlocks512 on 256-bit registers, for a multiple of 16 blocks.
TEXT ·ghashBlocks256(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DI
	MOVQ tbl+8(FP), SI
	MOVQ data+16(FP), DX
	MOVQ nblocks+24(FP), CX
	GHASH_SETUP256(DI)

loop16:
	FOLD16Y(LD2)
	ADDQ $256, DX
	SUBQ $16, CX
	JNZ  loop16
	VMOVDQU X15, (DI)
	VZEROUPPER
	RET

// func ghashCopy256(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int)
// is ghashBlocks256 over src that also copies src to dst.
TEXT ·ghashCopy256(SB), NOSPLIT, $0-40
	MOVQ acc+0(FP), DI
	MOVQ tbl+8(FP), SI
	MOVQ dst+16(FP), R8
	MOVQ src+24(FP), DX
	MOVQ nblocks+32(FP), CX
	GHASH_SETUP256(DI)

loop16c:
	FOLD16Y(LDC2)
	ADDQ $256, DX
	ADDQ $256, R8
	SUBQ $16, CX
	JNZ  loop16c
	VMOVDQU X15, (DI)
	VZEROUPPER
	RET

// func ghashTail(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)
// folds 1..15 blocks into acc on 128-bit registers: by H^nblocks .. H^1,
// one reduction.
TEXT ·ghashTail(SB), NOSPLIT, $0-32
	MOVQ    acc+0(FP), DI
	MOVQ    tbl+8(FP), SI
	MOVQ    data+16(FP), DX
	MOVQ    nblocks+24(FP), CX
	VMOVDQU (DI), X15
	VMOVDQU polyConst<>(SB), X9
	VMOVDQU bswapMask<>(SB), X14
	VMOVDQU (DX), X0
	TAIL_START
	ADDQ    $16, DX
	DECQ    CX
	JZ      tailred

loop1:
	VMOVDQU (DX), X0
	SHORTMUL
	ADDQ    $16, DX
	DECQ    CX
	JNZ     loop1

tailred:
	REDUCE(X15)
	VMOVDQU X15, (DI)
	RET

// func cpuid7ECX() uint32 returns ECX of CPUID leaf 7, subleaf 0, whose
// bit 10 is VPCLMULQDQ.
TEXT ·cpuid7ECX(SB), NOSPLIT, $0-4
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	MOVL CX, ret+0(FP)
	RET
