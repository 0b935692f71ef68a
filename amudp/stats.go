package amudp

import (
	"sync/atomic"
)

// Stats counts what an endpoint dropped or repeated.
type Stats struct {
	Sent, Received, Retransmits, ReplyResends uint64
	DupRequests, DupReplies, Stale            uint64
	BadDatagrams, BadTag, BadSource, BadSlot  uint64
	Returned                                  uint64
}

type statCounters struct {
	sent, received, retransmits, replyResends atomic.Uint64
	dupRequests, dupReplies, stale            atomic.Uint64
	badDatagrams, badTag, badSource, badSlot  atomic.Uint64
	returned                                  atomic.Uint64
}

// Stats returns the endpoint's counters.
func (e *Endpoint) Stats() Stats {
	s := &e.stats
	return Stats{
		Sent: s.sent.Load(), Received: s.received.Load(), Retransmits: s.retransmits.Load(),
		ReplyResends: s.replyResends.Load(), DupRequests: s.dupRequests.Load(),
		DupReplies: s.dupReplies.Load(), Stale: s.stale.Load(), BadDatagrams: s.badDatagrams.Load(),
		BadTag: s.badTag.Load(), BadSource: s.badSource.Load(), BadSlot: s.badSlot.Load(),
		Returned: s.returned.Load(),
	}
}
