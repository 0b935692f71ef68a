//go:build !amd64 || purego

package wire

// fastGHASH is false where ghash_amd64.s is not built: GMAC goes through
// crypto/cipher's AES-GCM.
const fastGHASH = false

func gfmul(x, y, out *[16]byte) { panic("wire: no fast GHASH") }

func aesEncrypt(rk *[11][16]byte, dst, src *[16]byte) { panic("wire: no fast GHASH") }

func gmacShort(out *[16]byte, rk *[11][16]byte, tbl *[16][16]byte, data *byte, nfull int, tail *byte, ntail int, j0 *[16]byte) {
	panic("wire: no fast GHASH")
}
