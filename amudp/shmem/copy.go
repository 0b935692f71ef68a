package shmem

import (
	"encoding/binary"
	"unsafe"
)

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// how many; dst and src may overlap, as with copy. It is for large
// payloads going into memory that another process reads next (a message
// into a peer's inbox, a Long payload or a Put into a peer's segment),
// or coming out of it.
func Copy(dst, src []byte) int {
	if fastStrings && len(src) >= minStrings && len(dst) >= minStrings {
		return copyLarge(dst, src)
	}
	if len(src) > chunk && len(dst) > chunk {
		return copyChunks(dst, src)
	}
	return copy(dst, src)
}

// chunk and cachedMax bound the copies of copyChunks: Go's copy moves 1
// MiB or more with non-temporal stores, around the caches, on amd64, and
// memory Copy writes is read next by another process (a Put into its
// segment, a Get out of it), which then reads it from DRAM. Copy moves up
// to cachedMax bytes in pieces of chunk, which stay in the caches
// (BENCHMARKS.md, Next to GASNet-EX, the thirtieth whole run: a Put of 1
// MiB at about twice the rate);
// above cachedMax, more than a host's last-level cache holds, copy's
// non-temporal stores spare the caches.
const (
	chunk     = 512 << 10
	cachedMax = 8 << 20
)

// copyChunks is Copy by Go's copy: in pieces of chunk, up to cachedMax
// bytes, where dst and src do not overlap.
//
//go:noinline
func copyChunks(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n > cachedMax || !apart(dst, src) {
		return copy(dst, src)
	}
	for off := 0; off < n; off += chunk {
		end := min(off+chunk, n)
		copy(dst[off:end], src[off:end])
	}
	return n
}

// useStrings reports whether Copy moves src into dst with REP MOVSB: where
// the processor has fast string moves, for at least minStrings bytes, and
// only when both begin at the same offset in a cache line (sameLine) and
// do not overlap (a forward move would copy bytes it already wrote).
// Elsewhere the vector copy is faster: a REP MOVSB between other offsets
// was up to a third slower on an AMD EPYC host, and some 20 times slower
// when the destination lay 1 to 31 bytes past the source modulo 4096
// (BenchmarkCopyOffsets).
func useStrings(dst, src []byte) bool {
	return fastStrings && len(src) >= minStrings && len(dst) >= minStrings && sameLine(dst, src) && apart(dst, src)
}

// apart reports whether the bytes Copy moves from src and into dst do
// not overlap.
func apart(dst, src []byte) bool {
	n := uintptr(min(len(dst), len(src)))
	d, s := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	return d+n <= s || s+n <= d
}

// sameLine reports whether dst and src begin at the same offset in a
// cache line.
func sameLine(dst, src []byte) bool {
	return (uintptr(unsafe.Pointer(unsafe.SliceData(dst)))-uintptr(unsafe.Pointer(unsafe.SliceData(src))))%64 == 0
}

// copyLarge is Copy of at least minStrings bytes, by REP MOVSB where
// useStrings says so; not inlined, so that Copy is.
//
//go:noinline
func copyLarge(dst, src []byte) int {
	if !useStrings(dst, src) {
		return copyChunks(dst, src)
	}
	n := min(len(dst), len(src))
	movsb(&dst[0], &src[0], uintptr(n))
	return n
}

// CopySmall copies src into dst, at least as long, where src holds 8 to
// 16 bytes: as two 8-byte words, overlapping where src is shorter than
// 16, without a call. It reports whether it copied; for any other length
// it copies nothing.
func CopySmall(dst, src []byte) bool {
	n := len(src)
	if n < 8 || n > 16 || len(dst) < n {
		return false
	}
	a, b := binary.LittleEndian.Uint64(src), binary.LittleEndian.Uint64(src[n-8:])
	binary.LittleEndian.PutUint64(dst, a)
	binary.LittleEndian.PutUint64(dst[n-8:], b)
	return true
}
