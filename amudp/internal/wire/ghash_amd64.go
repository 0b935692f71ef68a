//go:build !purego

package wire

import "golang.org/x/sys/cpu"

// fastGHASH says whether this CPU runs ghash_amd64.s: AES-NI, and
// carry-less multiplication with AVX's encoding.
var fastGHASH = cpu.X86.HasAES && cpu.X86.HasAVX && cpu.X86.HasPCLMULQDQ

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
