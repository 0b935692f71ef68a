package conduit

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/ifmatch"
	"github.com/udpconduit/udpconduit/spawn"
)

// workerNets decides, for a worker whose control connection to the console
// left from local (or whose GASNET_WORKERIP names local), which address
// its UDP socket binds and which addresses it publishes (DESIGN.md §7.2):
// with loopback, or one usable address (ifmatch.Usable among ifaces, kept
// by keep when not nil), it binds local and publishes nothing more;
// otherwise it binds every address of its host (IPv6's unspecified
// address, which takes IPv4 too, when one of them is IPv6) and publishes
// them all, local first.
func workerNets(local netip.Addr, ifaces []ifmatch.Iface, keep func(netip.Addr) bool) (bind netip.Addr, nets []spawn.Net) {
	if local.IsLoopback() {
		return local, nil
	}
	usable := ifmatch.Usable(ifaces, false, keep)
	i := slices.IndexFunc(usable, func(n ifmatch.Net) bool { return n.Prefix.Addr() == local })
	if i < 0 {
		usable = append([]ifmatch.Net{{Prefix: netip.PrefixFrom(local, local.BitLen())}}, usable...)
	} else {
		usable[0], usable[i] = usable[i], usable[0]
	}
	if len(usable) < 2 {
		return local, nil
	}
	bind = netip.IPv4Unspecified()
	for _, n := range usable {
		nets = append(nets, spawn.Net{Prefix: n.Prefix, MTU: n.MTU})
		if n.Prefix.Addr().Is6() {
			bind = netip.IPv6Unspecified()
		}
	}
	return bind, nets[:min(len(nets), spawn.MaxNets)]
}

// router is amudp's Router over the address table: each rank's published
// addresses (spawn.Net; none for a rank with its table address alone),
// matched with this rank's by ifmatch.Candidates and checked against this
// host's routes (ifmatch.Routable) for the pairs that share no subnet.
type router struct {
	rank     int
	addrs    []netip.AddrPort // the table's
	nets     [][]spawn.Net
	routable func(local, remote netip.Addr) bool

	mu     sync.Mutex
	routed map[int][]netip.AddrPort // for GASNET_VERBOSE_ROUTES
	record bool
}

func newRouter(rank int, addrs []netip.AddrPort, nets [][]spawn.Net, record bool) *router {
	return &router{rank: rank, addrs: addrs, nets: nets, routable: ifmatch.Routable, record: record, routed: map[int][]netip.AddrPort{}}
}

// toIfmatch converts published addresses for ifmatch.
func toIfmatch(ns []spawn.Net) []ifmatch.Net {
	out := make([]ifmatch.Net, len(ns))
	for i, n := range ns {
		out[i] = ifmatch.Net{Prefix: n.Prefix, MTU: n.MTU}
	}
	return out
}

// Route returns the addresses of rank's candidates, best first, those this
// host cannot route to left out, then the table's address if it is not
// among them; none (the table's address alone) when either rank published
// nothing or both publish the same addresses (ranks of one host).
func (r *router) Route(rank int) []netip.AddrPort {
	if rank < 0 || rank >= len(r.nets) || r.rank >= len(r.nets) {
		return nil
	}
	mine, theirs := r.nets[r.rank], r.nets[rank]
	if len(mine) == 0 || len(theirs) == 0 || slices.Equal(mine, theirs) {
		return nil
	}
	port := r.addrs[rank].Port()
	var out []netip.AddrPort
	for _, p := range ifmatch.Candidates(toIfmatch(mine), toIfmatch(theirs), r.rank, rank) {
		local, remote := mine[p.Local].Prefix.Addr(), theirs[p.Remote].Prefix.Addr()
		a := netip.AddrPortFrom(remote, port)
		if slices.Contains(out, a) || p.Weight != ifmatch.Subnet && !r.routable(local, remote) {
			continue
		}
		out = append(out, a)
	}
	if !slices.Contains(out, r.addrs[rank]) {
		out = append(out, r.addrs[rank])
	}
	if r.record {
		r.mu.Lock()
		r.routed[rank] = out
		r.mu.Unlock()
	}
	return out
}

// Knows reports whether a is one of rank's published addresses, on its
// table address's port.
func (r *router) Knows(rank int, a netip.AddrPort) bool {
	if rank < 0 || rank >= len(r.nets) || a.Port() != r.addrs[rank].Port() {
		return false
	}
	ip := a.Addr().Unmap()
	for _, n := range r.nets[rank] {
		if n.Prefix.Addr() == ip {
			return true
		}
	}
	return false
}

// report is GASNET_VERBOSE_ROUTES's line for the peers this rank routed:
// where their datagrams went, whether a reply came back from there, and the
// candidates in order.
func (r *router) report(ep *amudp.Endpoint) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d routes:", r.rank)
	if len(r.routed) == 0 {
		b.WriteString(" none (every peer at its table address)")
	}
	for _, peer := range slices.Sorted(maps.Keys(r.routed)) {
		a, ok := ep.PeerAddr(peer)
		state := "unconfirmed"
		if ok {
			state = "confirmed"
		}
		fmt.Fprintf(&b, " rank %d at %v (%s; candidates %s);", peer, a, state, joinAddrs(r.routed[peer]))
	}
	return strings.TrimSuffix(b.String(), ";")
}

func joinAddrs(as []netip.AddrPort) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, " ")
}

// describeNets is GASNET_VERBOSE_ROUTES's line for what a rank publishes.
func describeNets(rank int, bind netip.Addr, nets []spawn.Net) string {
	if len(nets) == 0 {
		return fmt.Sprintf("rank %d publishes its table address alone (bound to %v)", rank, bind)
	}
	s := make([]string, len(nets))
	for i, n := range nets {
		s[i] = fmt.Sprintf("%v (MTU %d)", n.Prefix, n.MTU)
	}
	return fmt.Sprintf("rank %d publishes %s (bound to %v)", rank, strings.Join(s, ", "), bind)
}
