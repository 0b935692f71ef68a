package conduit

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// allocSegment maps size bytes of anonymous memory for the segment. Unlike
// make, which ends the process with an out-of-memory trace when the memory
// cannot be had, mmap fails with an error the caller can return. The
// mapping lives as long as the process.
func allocSegment(size int) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	if size < 0 || size > MaxSegment {
		return nil, fmt.Errorf("conduit: segment of %d bytes: accepted 0..%d", size, int64(MaxSegment))
	}
	b, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil, fmt.Errorf("conduit: cannot allocate a segment of %d bytes: %w", size, err)
	}
	return b, nil
}

// freeSegment unmaps a segment that allocSegment returned.
func freeSegment(b []byte) {
	if len(b) > 0 {
		unix.Munmap(b)
	}
}
