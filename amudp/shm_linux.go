package amudp

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
)

// shmInbox is this rank's queue, in a memfd that stays open so that peers
// can open it through /proc.
type shmInbox struct {
	fd   int
	mem  []byte
	path string
	ring *shmring.Ring
}

func newShmInbox(size int) (*shmInbox, error) {
	if size < shmring.MinCapacity || size > MaxInbox || size&(size-1) != 0 {
		return nil, fmt.Errorf("shared-memory inbox of %d bytes: accepted: a power of two from %d to %d", size, shmring.MinCapacity, MaxInbox)
	}
	fd, err := unix.MemfdCreate("udpconduit-inbox", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox: memfd_create: %w", err)
	}
	fail := func(what string, err error) (*shmInbox, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("shared-memory inbox: %s: %w", what, err)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail("fchmod", err)
	}
	total := shmring.Size(size)
	if err := unix.Ftruncate(fd, int64(total)); err != nil {
		return fail("ftruncate", err)
	}
	mem, err := unix.Mmap(fd, 0, total, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	r, err := shmring.Format(mem)
	if err != nil {
		unix.Munmap(mem)
		return fail("format", err)
	}
	return &shmInbox{fd: fd, mem: mem, path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd), ring: r}, nil
}

// close closes the descriptor, so that no peer maps the inbox from now
// on; the mapping stays (a racing Send may still write to a peer's).
func (in *shmInbox) close() {
	if in.fd >= 0 {
		unix.Close(in.fd)
		in.fd = -1
	}
}

// release closes the descriptor and unmaps the inbox, which nobody uses.
func (in *shmInbox) release() {
	in.close()
	if in.mem != nil {
		unix.Munmap(in.mem)
		in.mem, in.ring = nil, nil
	}
}

// mapShmPeer maps the inbox at path, a co-located rank's /proc/PID/fd/N.
func mapShmPeer(path string) (*shmring.Ring, error) {
	if !strings.HasPrefix(path, "/proc/") {
		return nil, fmt.Errorf("shared-memory inbox %q: not a /proc path", path)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shared-memory inbox %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < int64(shmring.Size(shmring.MinCapacity)) || st.Size > int64(shmring.Size(MaxInbox)) {
		return nil, fmt.Errorf("shared-memory inbox %s: not an inbox (%d bytes)", path, st.Size)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox %s: mmap: %w", path, err)
	}
	r, err := shmring.Open(mem)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("shared-memory inbox %s: %w", path, err)
	}
	return r, nil
}
