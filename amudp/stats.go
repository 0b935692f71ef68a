package amudp

import (
	"fmt"
	"sync/atomic"
)

// Stats counts what an endpoint sent, received, dropped or repeated. Sent
// and Received count datagrams; the direct messages between ranks that
// share memory are counted by the Shared transport (ShmStats). Drops by reason:
// BadDatagrams could not be decoded (too short, malformed, another
// protocol version's), BadMAC failed
// authentication (forged, corrupted, another job's, meant for another
// rank), BadSource came from an address that is not the claimed rank's, or
// an unknown rank; BadSlot named a credit slot beyond the network depth;
// Replays opened but were sealed before a datagram already accepted in
// their slot (an attacker's copy, or a duplicate older than the last
// request or reply).
type Stats struct {
	Sent, Received, Retransmits, ReplyResends uint64
	DupRequests, DupReplies, Stale            uint64
	BadDatagrams, BadMAC, BadSource, BadSlot  uint64
	Returned, Replays                         uint64
	// HeldBack counts retransmissions not sent because another request
	// was already probing a silent peer.
	HeldBack uint64
	// InPlace counts the Long requests and replies that came written
	// straight into this endpoint's segment by a peer that maps it
	// (SetPeerSegments).
	InPlace uint64
	// RouteMoves counts the moves of a peer's datagrams to the next
	// address of its route while no reply had come (Router).
	RouteMoves uint64
}

type statCounters struct {
	sent, received, retransmits, replyResends atomic.Uint64
	dupRequests, dupReplies, stale            atomic.Uint64
	badDatagrams, badMAC, badSource, badSlot  atomic.Uint64
	returned, replays                         atomic.Uint64
	heldBack, inPlace, routeMoves             atomic.Uint64
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	s := &e.stats
	return Stats{
		Sent: s.sent.Load(), Received: s.received.Load(), Retransmits: s.retransmits.Load(),
		ReplyResends: s.replyResends.Load(), DupRequests: s.dupRequests.Load(),
		DupReplies: s.dupReplies.Load(), Stale: s.stale.Load(), BadDatagrams: s.badDatagrams.Load(),
		BadMAC: s.badMAC.Load(), BadSource: s.badSource.Load(), BadSlot: s.badSlot.Load(),
		Returned: s.returned.Load(), Replays: s.replays.Load(), HeldBack: s.heldBack.Load(), InPlace: s.inPlace.Load(),
		RouteMoves: s.routeMoves.Load(),
	}
}

// String is one line of the counters, as GASNET_STATS prints it.
func (s Stats) String() string {
	return fmt.Sprintf("sent %d received %d retransmits %d held-back %d reply-resends %d dup-requests %d dup-replies %d stale %d returned %d long-in-place %d route-moves %d; dropped: malformed %d bad-mac %d bad-source %d bad-slot %d replays %d",
		s.Sent, s.Received, s.Retransmits, s.HeldBack, s.ReplyResends, s.DupRequests, s.DupReplies, s.Stale, s.Returned, s.InPlace, s.RouteMoves,
		s.BadDatagrams, s.BadMAC, s.BadSource, s.BadSlot, s.Replays)
}
