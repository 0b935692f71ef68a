package amudp

import (
	"fmt"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/amudp/shmem"
)

// shmInbox is this rank's queue, in a shmem.Region whose descriptor stays
// open so that peers can map it.
type shmInbox struct {
	reg  *shmem.Region
	ring *shmring.Ring
}

func newShmInbox(size int) (*shmInbox, error) {
	if size < shmring.MinCapacity || size > MaxInbox || size&(size-1) != 0 {
		return nil, fmt.Errorf("shared-memory inbox of %d bytes: accepted: a power of two from %d to %d", size, shmring.MinCapacity, MaxInbox)
	}
	reg, err := shmem.Create("udpconduit-inbox", shmring.Size(size))
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox: %w", err)
	}
	r, err := shmring.Format(reg.Bytes())
	if err != nil {
		reg.Release()
		return nil, fmt.Errorf("shared-memory inbox: %w", err)
	}
	return &shmInbox{reg: reg, ring: r}, nil
}

// close closes the descriptor, so that no peer maps the inbox from now
// on; the mapping stays (a racing Send may still write to a peer's).
func (in *shmInbox) close() { in.reg.CloseFD() }

// release closes the descriptor and unmaps the inbox, which nobody uses.
func (in *shmInbox) release() {
	in.reg.Release()
	in.ring = nil
}

// mapShmPeer maps the inbox at path, a co-located rank's /proc/PID/fd/N.
func mapShmPeer(path string) (*shmring.Ring, error) {
	mem, err := shmem.Map(path, shmring.Size(shmring.MinCapacity), shmring.Size(MaxInbox))
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox: %w", err)
	}
	r, err := shmring.Open(mem)
	if err != nil {
		shmem.Unmap(mem)
		return nil, fmt.Errorf("shared-memory inbox %s: %w", path, err)
	}
	return r, nil
}
