package amudp

import (
	"net/netip"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/release"
	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// handlerView returns the payload a handler sees for a received request or
// reply (nil for Short, the segment slice for Long, written there first), or
// why the message cannot run here.
func (e *Endpoint) handlerView(h Handler, m *wire.Message, seg []byte) ([]byte, Reason) {
	if h == nil {
		return nil, ReasonBadHandler
	}
	switch m.Kind.Category() {
	case Short:
		return nil, ReasonNone
	case Long:
		if m.Flags&wire.FlagInPlace != 0 { // the sender wrote it there
			view, reason := inSegment(seg, uint64(m.Len), m.Offset)
			if reason == ReasonNone {
				release.Inc(&e.stats.inPlace)
			}
			return view, reason
		}
		return intoSegment(seg, m.Payload, m.Offset)
	}
	return m.Payload, ReasonNone
}

// openView is handlerView of a datagram whose payload may be yet to check
// (pend): it checks it, and copies a Long's into the segment on the way,
// in one pass. ok is false when the check fails, and nothing of the
// message may then be believed.
func (e *Endpoint) openView(h Handler, m *wire.Message, seg []byte, pend unchecked) (view []byte, reason Reason, ok bool) {
	if pend.tag == nil {
		view, reason = e.handlerView(h, m, seg)
		return view, reason, true
	}
	// Only a Long datagram whose payload is not in place is split
	// (wire.Key.OpenHead).
	reason = ReasonBadHandler
	if h != nil {
		view, reason = inSegment(seg, uint64(len(m.Payload)), m.Offset)
	}
	if !e.key.OpenPayload(pend.body, pend.tag, view) {
		return nil, ReasonNone, false
	}
	return view, reason, true
}

// unchecked is a received datagram whose header is checked and whose
// payload is not (wire.Key.OpenHead): its body and the tag over it; tag
// nil when there is nothing left to check.
type unchecked struct{ body, tag []byte }

// intoSegment copies a Long payload into seg at off and returns the
// handler's view of it, or why it cannot go there.
func intoSegment(seg, payload []byte, off uint64) ([]byte, Reason) {
	dst, reason := inSegment(seg, uint64(len(payload)), off)
	copy(dst, payload)
	return dst, reason
}

// inSegment returns the n bytes of seg at off, or why they are not there.
func inSegment(seg []byte, n, off uint64) ([]byte, Reason) {
	if seg == nil {
		return nil, ReasonNoSegment
	}
	if off > uint64(len(seg)) || n > uint64(len(seg))-off {
		return nil, ReasonBadOffset
	}
	return seg[off : off+n], ReasonNone
}

// handleDatagram handles one datagram, or a direct message when it came
// from this rank's inbox (shm).
func (e *Endpoint) handleDatagram(b []byte, from netip.AddrPort, shm bool) {
	// Only an inbox carries direct messages, in records of their own kind,
	// which have no source address.
	if shm && e.shared != nil && !from.IsValid() {
		e.handleDirect(b)
		return
	}
	e.stats.received.Add(1)
	m := &e.msg
	if len(b) > MaxDatagram || len(b) < wire.HeaderLen+wire.TagLen {
		e.stats.badDatagrams.Add(1)
		return
	}
	// Another version's datagram is dropped unread (its tags may lie
	// elsewhere); Decode checks the version again, as believed.
	if b[0] != wire.Version || b[1]>>4&wire.FlagDirect != 0 {
		e.stats.badDatagrams.Add(1)
		return
	}
	// Nothing in a datagram is believed before it opens; a Long payload
	// before openView has checked it.
	b, tag, ok := e.key.OpenHead(b, uint32(e.rank))
	if !ok {
		e.stats.badMAC.Add(1)
		return
	}
	if wire.Decode(b, m) != nil {
		e.stats.badDatagrams.Add(1)
		return
	}
	if int(m.Slot) >= e.depth {
		e.stats.badSlot.Add(1)
		return
	}
	e.mu.Lock()
	src := int(m.Src)
	if src >= len(e.addrs) || src == e.rank || e.addrs[src] != from && !e.learnLocked(src, from) && !e.knownLocked(src, from) {
		e.mu.Unlock()
		e.stats.badSource.Add(1)
		return
	}
	if m.Flags&wire.FlagRouted != 0 {
		e.peerLocked(src).hasRouter = true
	}
	// A datagram sealed after any the peer sent before shows it alive
	// (see fireTimers), as does a reply that completes a request
	// (ackLocked); a copy of an old one, which anyone who saw it can send
	// again, does not, and moves nothing (adoptLocked).
	if p := e.peerLocked(src); m.Nonce > p.maxNonce {
		p.maxNonce, p.heard = m.Nonce, e.clock
		if m.Kind.IsRequest() {
			e.adoptLocked(p, from)
		}
	}
	pend := unchecked{b, tag}
	if m.Kind.IsRequest() {
		e.handleRequest(m, src, pend)
	} else {
		e.handleReply(m, src, pend)
	}
}

// resendGap is the least time between two sends again of one stored
// reply: half the requester's shortest retransmission timeout.
func (e *Endpoint) resendGap() time.Duration { return max(e.rcfg.MinRTO/2, 100*time.Microsecond) }

// handleRequest runs a request exactly once; called with mu held, returns
// with it released. A request whose payload fails its check (pend) is
// dropped as a forgery before its slot's state takes its number: its
// genuine copy still runs.
func (e *Endpoint) handleRequest(m *wire.Message, src int, pend unchecked) {
	p := e.peerLocked(src)
	r := p.rxAt(m.Slot)
	// Sequence numbers compare in serial-number arithmetic (RFC 1982): the
	// sender may have given up on requests of this slot that never arrived,
	// so a new request can be more than one ahead. A slot has one request
	// in flight at a time, so old copies are never half the space behind.
	// The nonce tells a replay from a new request whose sequence number
	// wrapped around to an old one's: a new request is sealed after the
	// slot's last, a retransmission is the same datagram again.
	switch d := int16(m.Seq - r.seq); {
	case d > 0 && m.Nonce > r.nonce: // new
	case d > 0 || d == 0 && m.Nonce != r.nonce:
		e.mu.Unlock()
		e.stats.replays.Add(1)
		return
	case d == 0: // a retransmission of the last accepted request
		e.mu.Unlock()
		e.stats.dupRequests.Add(1)
		// At most once per resendGap: a retransmission comes after the
		// requester's timeout (at least MinRTO), while copies of the
		// request that anyone may send would otherwise make this rank
		// send its reply, up to 65 KB, once for each.
		if r.replied && (r.resentAt == 0 || e.clock.Sub(r.resentAt) >= e.resendGap()) {
			r.resentAt = max(e.clock, 1)
			e.stats.replyResends.Add(1)
			e.stats.sent.Add(1)
			_ = e.tr.Send(r.reply, p.to())
		}
		return
	default:
		e.mu.Unlock()
		e.stats.stale.Add(1)
		return
	}
	tab := e.table.Load()
	h, seg := tab.handlers[m.Handler], tab.segment
	e.mu.Unlock()

	payload, reason, ok := e.openView(h, m, seg, pend)
	if !ok {
		e.stats.badMAC.Add(1)
		return
	}
	// The receiver's state of a slot is the poller's alone.
	r.seq, r.nonce, r.replied, r.resentAt = m.Seq, m.Nonce, false, 0
	if reason != ReasonNone {
		ret := wire.Message{Header: wire.Header{Kind: KindReturned, Handler: m.Handler, NArgs: 1,
			Src: uint32(e.rank), Slot: m.Slot, Seq: m.Seq}}
		ret.Args[0] = uint32(reason)
		_ = e.sendReply(p, m.Slot, &ret)
		return
	}
	t := &e.tok
	*t = Token{ep: e, peer: p, src: src, slot: m.Slot, seq: m.Seq, isReq: true, active: true, client: int(m.Handler) >= e.reserved}
	e.runHandler(h, t, m.Args[:m.NArgs], payload)
	t.active = false
	t.closeReply()
	if !t.replied {
		// Store the automatic reply for a retransmitted request, but send
		// it with the others of this pass (DESIGN.md §5: still the reply).
		auto := wire.Message{Header: wire.Header{Kind: KindAutoReply, Src: uint32(e.rank), Slot: m.Slot, Seq: m.Seq}}
		_ = e.storeReply(p, m.Slot, &auto)
		e.queueAck(p, m.Slot, m.Seq, m.Flags&wire.FlagAckNow != 0)
	}
}

// handleReply completes a request; called with mu held, returns with it
// released. A reply whose payload fails its check (pend) is dropped as a
// forgery before it completes the request: its genuine copy still does.
func (e *Endpoint) handleReply(m *wire.Message, src int, pend unchecked) {
	p := e.peers[src]
	if p == nil {
		e.mu.Unlock()
		e.stats.dupReplies.Add(1)
		return
	}
	if m.Kind == KindAutoReply {
		e.ackLocked(p, m.Slot, m.Seq, m.Nonce, e.clock)
		for i := range m.AckPairs() {
			slot, seq := m.AckPair(i)
			if int(slot) >= e.depth {
				e.stats.badSlot.Add(1)
				continue
			}
			e.ackLocked(p, slot, seq, m.Nonce, e.clock)
		}
		e.syncDeadlineLocked()
		e.mu.Unlock()
		return
	}
	// The handler and segment that the reply runs with, loaded once.
	tab := e.table.Load()
	h, seg := tab.handlers[m.Handler], tab.segment
	var payload []byte
	var bad Reason
	viewed := pend.tag != nil
	if viewed {
		if !p.awaits(m.Slot, m.Seq, m.Nonce) {
			e.ackLocked(p, m.Slot, m.Seq, m.Nonce, e.clock) // counts it
			e.mu.Unlock()
			return
		}
		// The slot stays in flight while this poller checks the
		// payload: only the poller completes requests (ackLocked,
		// fireTimers).
		e.mu.Unlock()
		var ok bool
		if payload, bad, ok = e.openView(h, m, seg, pend); !ok {
			e.stats.badMAC.Add(1)
			return
		}
		e.mu.Lock()
	}
	if !e.ackLocked(p, m.Slot, m.Seq, m.Nonce, e.clock) {
		e.mu.Unlock()
		return
	}
	// The slot was in flight, and is not reused while mu is held.
	s := p.req(m.Slot)
	kind, handler := s.kind, s.handler
	e.syncDeadlineLocked()
	e.mu.Unlock()

	if m.Kind == KindReturned {
		e.returned(Returned{Reason: Reason(m.Args[0]), Dest: src, Addr: p.to(), Kind: kind, Handler: handler})
		return
	}
	if !viewed {
		payload, bad = e.handlerView(h, m, seg)
	}
	e.runReply(h, m, payload, bad, src, p.to(), p)
}

// runReply runs h, the handler of reply m from rank src at addr (p: its
// peer state on the datagram path, nil on the direct one), with the
// payload that handlerView or openView gave, or the reason it gave.
// Poller only.
func (e *Endpoint) runReply(h Handler, m *wire.Message, payload []byte, bad Reason, src int, addr netip.AddrPort, p *peerState) {
	if bad != ReasonNone {
		// The reply cannot run here: hand it to handler 0, refused here.
		e.returned(Returned{Reason: bad, Dest: src, Addr: addr, Kind: m.Kind, Handler: m.Handler, Incoming: true})
		return
	}
	t := &e.tok
	*t = Token{ep: e, peer: p, src: src, active: true}
	e.runHandler(h, t, m.Args[:m.NArgs], payload)
	t.active = false
}
