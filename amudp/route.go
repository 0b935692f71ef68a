package amudp

import (
	"net/netip"
	"time"

	"github.com/udpconduit/udpconduit/retransmit"
)

// A Router tells an endpoint more about where its peers are than the one
// address each that SetPeers gives (DESIGN.md §7.2): on hosts with several
// networks, every address a peer publishes, and the order in which to try
// them. The endpoint asks it for a peer's route once, at its first request
// to the peer after a datagram of the peer showed that the peer has a
// Router too (wire.FlagRouted), without its locks held; and whether an
// address is a peer's when a datagram comes from one that its table does
// not give, with them held: Knows must be cheap and must not call the
// endpoint.
type Router interface {
	// Route returns the addresses to send to rank at, best first; none
	// keeps the table's address.
	Route(rank int) []netip.AddrPort
	// Knows reports whether addr is one of rank's addresses. A datagram
	// from one, whose tag the job's key opens, is rank's.
	Knows(rank int, addr netip.AddrPort) bool
}

// SetRouter makes r the endpoint's Router. Call it before traffic, or with
// the address table, after SetPeers.
func (e *Endpoint) SetRouter(r Router) {
	e.mu.Lock()
	e.router = r
	e.routing.Store(r != nil)
	e.mu.Unlock()
}

// PeerAddr returns where datagrams to rank go now (the table's address
// until a route moves them), and whether a reply has come back from there.
func (e *Endpoint) PeerAddr(rank int) (addr netip.AddrPort, confirmed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rank < 0 || rank >= len(e.peers) {
		return netip.AddrPort{}, false
	}
	if p := e.peers[rank]; p != nil {
		return p.to(), p.confirmed
	}
	return e.addrs[rank], false
}

// to returns where datagrams to p go.
func (p *peerState) to() netip.AddrPort { return *p.dst.Load() }

// setDst points p's datagrams at a, in a new epoch if it moves them. mu
// held.
func (p *peerState) setDst(a netip.AddrPort) {
	if *p.dst.Load() != a {
		p.dst.Store(&a)
		p.epoch++
	}
}

// routeLocked asks the router for p's route once, at the first request to
// p after p has shown that it has a router too (its datagrams are flagged
// wire.FlagRouted: it takes datagrams from any of this rank's addresses);
// until then p's datagrams go to the table's address, which p knows. It
// starts them on the route's first address, unconfirmed unless they were
// there already. It releases mu while the router works (a route lookup is
// a system call) and holds it again when it returns.
func (e *Endpoint) routeLocked(p *peerState) {
	r := e.router
	if r == nil || p.routed || !p.hasRouter {
		return
	}
	p.routed = true
	e.mu.Unlock()
	route := r.Route(p.rank)
	e.mu.Lock()
	p.route = route
	if len(route) == 0 || p.to() == route[0] {
		return
	}
	p.try, p.movedAt, p.confirmed = 0, e.clock, false
	p.setDst(route[0])
}

// moveLocked moves p's datagrams to the next address of its route, when no
// reply has come from p yet and a request to it is due again: the
// retransmission is the probe of the next address, authenticated like any
// request, and the peer runs it once whichever address brings it. One move
// per round-trip timeout, however many requests are due, and none before
// GASNET_REQUESTTIMEOUT_INITIAL has passed on an address (since the route
// began, or the walk last moved or restarted): a round-trip timeout
// learned on a quiet host is a millisecond, and a peer busy for longer on
// a loaded one must not send the pair off its best address. A peer that only
// did not poll for a while looks the same as a dead address, so a walk
// that ends with a reply to a request sent to several addresses starts
// again at the first (restartLocked). mu held.
func (e *Endpoint) moveLocked(p *peerState, now retransmit.Time, rto time.Duration) {
	if p.confirmed || len(p.route) < 2 || p.movedAt != 0 && now.Sub(p.movedAt) < max(rto, e.rcfg.Initial) {
		return
	}
	p.movedAt = now
	p.try++
	p.setDst(p.route[p.try%len(p.route)])
	e.stats.routeMoves.Add(1)
}

// maxRestarts bounds restartLocked's restarts of a peer's walk: a first
// address that is dead costs a round-trip timeout at each.
const maxRestarts = 2

// restartLocked takes p's datagrams back to its route's first address
// when a reply came to a request whose copies went to several of them
// (which one carried it is unknown) and none is confirmed yet: what looked
// like a dead address may have been a peer busy for a moment, and the
// next request, all of whose copies go to one address, confirms it. At
// most maxRestarts times a peer, so that a first address that is dead
// does not cost every request a timeout. mu held.
func (e *Endpoint) restartLocked(p *peerState) {
	if p.confirmed || len(p.route) < 2 || p.restarts >= maxRestarts || p.to() == p.route[0] {
		return
	}
	p.restarts++
	p.try, p.movedAt = 0, e.clock
	p.setDst(p.route[0])
}

// tried returns the addresses a request to p may have gone to while no
// reply came from p: its route, when it has several (a walk that lasts
// until the give-up goes round it); else nil. mu held.
func (p *peerState) tried() []netip.AddrPort {
	if p.confirmed || len(p.route) < 2 {
		return nil
	}
	return p.route
}

// knownLocked reports whether from is one of src's addresses other than
// the table's, by the router. mu held.
func (e *Endpoint) knownLocked(src int, from netip.AddrPort) bool {
	if p := e.peers[src]; p != nil && p.from == from && from.IsValid() {
		return true
	}
	if e.router == nil || !e.router.Knows(src, from) {
		return false
	}
	e.peerLocked(src).from = from
	return true
}

// adoptLocked sends p's datagrams to from, where a fresh request of src
// came from (the caller checks its nonce), while p is not routed yet and no
// reply has confirmed an address: a peer that reached this one from an
// address is reached back there (and the replies to its requests go
// there). Once routed, the route decides, mirrored on both sides: adopting
// each other's source there made crossing requests swap both sides'
// addresses every round, no request confirming any. mu held.
func (e *Endpoint) adoptLocked(p *peerState, from netip.AddrPort) {
	if p.routed || p.confirmed || !from.IsValid() || p.to() == from {
		return
	}
	p.setDst(from)
}
