package amudp

import (
	"math/bits"
	"net/netip"
)

// shmPeers finds a co-located peer by its UDP address: an open-addressed
// table of indexes into one slice of peers, built in one pass over the
// job's table. A host of 1024 ranks builds one in every rank at start-up,
// where a Go map of 1024 entries cost each rank a large share of its
// start (BENCHMARKS.md, "Scale"); a lookup hashes the port alone.
type shmPeers struct {
	all   []shmPeer
	slots []int32 // index+1 in all; 0 is empty
	shift uint8   // 64 - log2(len(slots))
}

// newShmPeers returns the table of inboxes, leaving out an entry with an
// empty path or the address self; of two entries for one address the
// later counts.
func newShmPeers(inboxes []Inbox, self netip.AddrPort) *shmPeers {
	n := 0
	for _, in := range inboxes {
		if in.Path != "" && in.Addr != self {
			n++
		}
	}
	// At most half full: a probe ends within a few slots.
	size := 1 << bits.Len(uint(2*n))
	t := &shmPeers{all: make([]shmPeer, 0, n), slots: make([]int32, size), shift: uint8(64 - bits.Len(uint(size-1)))}
	for _, in := range inboxes {
		if in.Path == "" || in.Addr == self {
			continue
		}
		i := t.slot(in.Addr)
		if k := t.slots[i]; k != 0 {
			t.all[k-1].path = in.Path // the later entry for the address
			continue
		}
		t.all = append(t.all, shmPeer{addr: in.Addr, path: in.Path})
		t.slots[i] = int32(len(t.all))
	}
	return t
}

// slot returns the slot of addr in t: the one that holds it, or the empty
// one where it would go.
func (t *shmPeers) slot(addr netip.AddrPort) int {
	mask := len(t.slots) - 1
	for i := int(hashAddr(addr) >> t.shift); ; i = (i + 1) & mask {
		k := t.slots[i]
		if k == 0 || t.all[k-1].addr == addr {
			return i
		}
	}
}

// get returns the peer at addr, or nil.
func (t *shmPeers) get(addr netip.AddrPort) *shmPeer {
	if len(t.all) == 0 {
		return nil
	}
	if k := t.slots[t.slot(addr)]; k != 0 {
		return &t.all[k-1]
	}
	return nil
}

// hashAddr hashes addr's port (Fibonacci hashing: the high bits are the
// slot): the ranks of a host bind one address, or a few, and each its own
// port, so the port alone spreads them; two with one port and different
// addresses take neighbouring slots.
func hashAddr(addr netip.AddrPort) uint64 {
	return (uint64(addr.Port()) + 1) * 0x9e3779b97f4a7c15
}
