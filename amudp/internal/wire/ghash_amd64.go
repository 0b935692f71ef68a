//go:build !purego

package wire

import "golang.org/x/sys/cpu"

// fastGHASH says whether this CPU runs ghash_amd64.s: carry-less
// multiplication on 512-bit registers (AVX-512 VPCLMULQDQ).
var fastGHASH = cpu.X86.HasAES && cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasAVX512F &&
	cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// gfmul sets out to x·y, in the representation of ghash_amd64.s.
//
//go:noescape
func gfmul(x, y, out *[16]byte)

// ghashBlocks folds nblocks 16-byte blocks at data into acc: acc =
// (acc ⊕ X₁)·H ... , with tbl[k] = H^(32−k) and, in tbl[32+k]'s low
// half, the sum of its halves (ghash_amd64.s).
//
//go:noescape
func ghashBlocks(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)

// aesEncrypt encrypts one block with the AES-128 round keys rk (AES-NI).
//
//go:noescape
func aesEncrypt(rk *[11][16]byte, dst, src *[16]byte)

// ghashCopy is ghashBlocks over src that also copies src's nblocks
// blocks to dst.
//
//go:noescape
func ghashCopy(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int)

// gmacShort writes to out the GMAC tag of the nfull blocks at data
// followed by the ntail blocks at tail, the last of them the lengths block
// (1..16 blocks in all), with j0 the nonce's first counter block
// (ghash_amd64.s).
//
//go:noescape
func gmacShort(out *[16]byte, rk *[11][16]byte, tbl *[16][16]byte, data *byte, nfull int, tail *byte, ntail int, j0 *[16]byte)
