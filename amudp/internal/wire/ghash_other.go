//go:build !amd64 || purego

package wire

// fastGHASH is false where ghash_amd64.s is not built: GMAC goes through
// crypto/cipher's AES-GCM.
const fastGHASH = false

// wide512 is ghash_amd64.go's, for the tests.
var wide512 = false

func gfmul(x, y, out *[16]byte) { panic("wire: no fast GHASH") }

func ghashBlocks(acc *[16]byte, tbl *[64][16]byte, data *byte, nblocks int) {
	panic("wire: no fast GHASH")
}

func aesEncrypt(rk *[11][16]byte, dst, src *[16]byte) { panic("wire: no fast GHASH") }

func ghashCopy(acc *[16]byte, tbl *[64][16]byte, dst, src *byte, nblocks int) {
	panic("wire: no fast GHASH")
}

func gmacShort(out *[16]byte, rk *[11][16]byte, tbl *[16][16]byte, data *byte, nfull int, tail *byte, ntail int, j0 *[16]byte) {
	panic("wire: no fast GHASH")
}
