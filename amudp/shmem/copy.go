package shmem

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// how many; dst and src must not overlap. It is for large payloads going
// into memory that another process reads next (a message into a peer's
// inbox, a Long payload or a Put into a peer's segment), or coming out
// of it.
func Copy(dst, src []byte) int {
	if fastStrings && len(src) >= minStrings && len(dst) >= minStrings {
		return copyStrings(dst, src)
	}
	return copy(dst, src)
}

// copyStrings is Copy of at least minStrings bytes by REP MOVSB; not
// inlined, so that Copy is.
//
//go:noinline
func copyStrings(dst, src []byte) int {
	n := min(len(dst), len(src))
	movsb(&dst[0], &src[0], uintptr(n))
	return n
}
