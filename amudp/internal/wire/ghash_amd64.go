//go:build !purego

package wire

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// wide512 says whether GHASH runs on 512-bit registers (AVX-512
// VPCLMULQDQ); else, where fastGHASH, on 256-bit ones (VPCLMULQDQ with
// AVX2, as AMD's Zen 3 has). A variable for tests.
var wide512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// fastGHASH says whether this CPU runs ghash_amd64.s: carry-less
// multiplication of several blocks an instruction (VPCLMULQDQ, which
// package cpu reports only with AVX-512: CPUID leaf 7's ECX bit 10).
var fastGHASH = cpu.X86.HasAES && cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ &&
	(wide512 || cpuid7ECX()&(1<<10) != 0)

// cpuid7ECX returns ECX of CPUID leaf 7, subleaf 0.
//
//go:noescape
func cpuid7ECX() uint32

// ghashBlocks folds nblocks 16-byte blocks at data into acc: acc =
// (acc ⊕ X₁)·H ... , with tbl[k] = H^(32−k) and, in tbl[32+k]'s low
// half, the sum of its halves (ghash_amd64.s).
func ghashBlocks(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int) {
	n := nblocks &^ 15
	switch {
	case n > 0 && wide512:
		ghashBlocks512(acc, tbl, data, n)
	case n > 0:
		ghashBlocks256(acc, tbl, data, n)
	}
	// Past the loops' blocks only where blocks remain: a pointer one
	// past the data's end is invalid (checkptr).
	if r := nblocks - n; r > 0 {
		ghashTail(acc, tbl, (*byte)(unsafe.Add(unsafe.Pointer(data), 16*n)), r)
	}
}

// ghashCopy is ghashBlocks over src that also copies src's nblocks
// blocks to dst.
func ghashCopy(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int) {
	n := nblocks &^ 15
	switch {
	case n > 0 && wide512:
		ghashCopy512(acc, tbl, dst, src, n)
	case n > 0:
		ghashCopy256(acc, tbl, dst, src, n)
	}
	if r := nblocks - n; r > 0 {
		d, s := (*byte)(unsafe.Add(unsafe.Pointer(dst), 16*n)), (*byte)(unsafe.Add(unsafe.Pointer(src), 16*n))
		copy(unsafe.Slice(d, 16*r), unsafe.Slice(s, 16*r))
		ghashTail(acc, tbl, d, r) // what was copied, as the loops hash it
	}
}

//go:noescape
func ghashBlocks512(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)

//go:noescape
func ghashCopy512(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int)

// ghashBlocks512, ghashCopy512, ghashBlocks256 and ghashCopy256 take a
// multiple of 16 blocks.
//
//go:noescape
func ghashBlocks256(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)

//go:noescape
func ghashCopy256(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int)

// ghashTail takes 1..15 blocks, on 128-bit registers.
//
//go:noescape
func ghashTail(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int)

// gfmul sets out to x·y, in the representation of ghash_amd64.s.
//
//go:noescape
func gfmul(x, y, out *[16]byte)

// aesEncrypt encrypts one block with the AES-128 round keys rk (AES-NI).
//
//go:noescape
func aesEncrypt(rk *[11][16]byte, dst, src *[16]byte)

// gmacShort writes to out the GMAC tag of the nfull blocks at data
// followed by the ntail blocks at tail, the last of them the lengths block
// (1..16 blocks in all), with j0 the nonce's first counter block
// (ghash_amd64.s).
//
//go:noescape
func gmacShort(out *[16]byte, rk *[11][16]byte, tbl *[16][16]byte, data *byte, nfull int, tail *byte, ntail int, j0 *[16]byte)
