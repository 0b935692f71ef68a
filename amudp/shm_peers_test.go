package amudp

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
)

// TestShmPeers checks the table of co-located peers against a Go map of
// the same entries: every address named is found with its last path,
// self, empty paths and addresses never named are not.
func TestShmPeers(t *testing.T) {
	self := netip.MustParseAddrPort("127.0.0.1:40000")
	rng := rand.New(rand.NewPCG(1, 2))
	addr := func() netip.AddrPort {
		switch rng.IntN(4) {
		case 0: // one host's ranks: one address, many ports
			return netip.AddrPortFrom(self.Addr(), uint16(40000+rng.IntN(64)))
		case 1:
			return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(rng.IntN(4)), byte(rng.IntN(4))}), uint16(5000+rng.IntN(4)))
		case 2:
			return netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("fd00::%x", rng.IntN(8))), uint16(5000+rng.IntN(4)))
		default: // the same but for a zone
			return netip.AddrPortFrom(netip.MustParseAddr(fmt.Sprintf("fe80::%x%%eth%d", rng.IntN(4), rng.IntN(2))), 5000)
		}
	}
	for _, n := range []int{0, 1, 2, 3, 7, 64, 100, 1024} {
		for trial := range 20 {
			inboxes := make([]Inbox, n)
			want := map[netip.AddrPort]string{}
			for i := range inboxes {
				inboxes[i] = Inbox{Addr: addr(), Path: fmt.Sprintf("/proc/%d/fd/%d", i, trial)}
				if rng.IntN(10) == 0 {
					inboxes[i].Path = ""
				}
				if rng.IntN(20) == 0 {
					inboxes[i].Addr = self
				}
				if in := inboxes[i]; in.Path != "" && in.Addr != self {
					want[in.Addr] = in.Path
				}
			}
			p := newShmPeers(inboxes, self)
			if len(p.all) != len(want) {
				t.Fatalf("n=%d trial %d: %d peers, want %d", n, trial, len(p.all), len(want))
			}
			for a, path := range want {
				got := p.get(a)
				if got == nil || got.addr != a || got.path != path {
					t.Fatalf("n=%d trial %d: get(%v) = %+v, want path %q", n, trial, a, got, path)
				}
			}
			for range 200 {
				a := addr()
				if _, ok := want[a]; !ok && p.get(a) != nil {
					t.Fatalf("n=%d trial %d: get(%v) found a peer that was not named", n, trial, a)
				}
			}
			if p.get(self) != nil {
				t.Fatalf("n=%d trial %d: this rank's own address is a peer", n, trial)
			}
		}
	}
}

// BenchmarkShmPeers is a host of 1024 ranks' table built, and every peer
// looked up once, as each rank does at start-up (SetInboxes, newWords).
func BenchmarkShmPeers(b *testing.B) {
	inboxes := make([]Inbox, 1024)
	for i := range inboxes {
		inboxes[i] = Inbox{Addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(30000+i*7)), Path: "/proc/1/fd/3"}
	}
	self := inboxes[5].Addr
	b.ReportAllocs()
	for b.Loop() {
		p := newShmPeers(inboxes, self)
		for _, in := range inboxes {
			_ = p.get(in.Addr)
		}
	}
}
