package shmem

// Copy copies min(len(dst), len(src)) bytes from src to dst and returns
// how many; dst and src must not overlap. It is for large payloads going
// into memory that another process reads next (a message into a peer's
// inbox, a Long payload or a Put into a peer's segment), or coming out
// of it.
func Copy(dst, src []byte) int {
	n := min(len(dst), len(src))
	if n >= minStrings && fastStrings {
		movsb(&dst[0], &src[0], uintptr(n))
		return n
	}
	return copy(dst, src)
}
