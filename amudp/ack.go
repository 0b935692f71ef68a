package amudp

import (
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/retransmit"
)

// ackBatch is the most automatic replies to one peer that share a datagram.
// A batch waits at most ackDelay, unless its sender asked for the reply at
// once (wire.FlagAckNow) or the poller is about to sleep. While at least ackBatch
// requests are in flight the receiver's batch fills by itself, so a flood
// gets one reply datagram per ackBatch requests instead of one each.
const (
	ackBatch = 16
	ackDelay = 50 * time.Microsecond
)

// queueAck adds an automatic reply to p's batch, sending the batch once it
// holds ackBatch. Poller only.
func (e *Endpoint) queueAck(p *peerState, slot, seq uint16, now bool) {
	if !p.ackQueued {
		p.ackQueued = true
		e.ackq = append(e.ackq, p)
	}
	if len(p.acks) == 0 {
		p.ackSince = e.clock
	}
	p.acks = append(p.acks, uint32(slot)<<16|uint32(seq))
	p.ackNow = p.ackNow || now
	if len(p.acks) >= ackBatch {
		e.sendAcks(p)
	}
}

// flushAcks sends the waiting batches of automatic replies that are due: a
// batch whose sender asked for it at once, or whose oldest reply has waited
// ackDelay; all of them when all is set (before the poller sleeps). Poller
// only.
func (e *Endpoint) flushAcks(all bool) {
	if len(e.ackq) == 0 {
		return
	}
	now := e.clock
	q := e.ackq[:0]
	for _, p := range e.ackq {
		if all || p.ackNow || time.Duration(now-p.ackSince) >= ackDelay {
			e.sendAcks(p)
		}
		if len(p.acks) > 0 {
			q = append(q, p)
		} else {
			p.ackQueued = false
		}
	}
	e.ackq = q
}

// sendAcks sends p's waiting automatic replies as one datagram: the first
// in the header, the others as (slot, seq) pairs in the payload.
func (e *Endpoint) sendAcks(p *peerState) {
	if len(p.acks) == 0 {
		return
	}
	pay := e.apay[:0]
	for _, a := range p.acks[1:] {
		pay = wire.AppendAckPair(pay, uint16(a>>16), uint16(a))
	}
	e.apay = pay
	m := wire.Message{Header: wire.Header{Kind: KindAutoReply, Src: uint32(e.rank),
		Slot: uint16(p.acks[0] >> 16), Seq: uint16(p.acks[0])}, Payload: pay}
	e.abuf, _ = m.AppendHead(e.abuf[:0])
	e.abuf = e.seal(e.abuf, p.rank, pay)
	p.acks, p.ackNow = p.acks[:0], false
	e.stats.sent.Add(1)
	_ = e.tr.Send(e.abuf, p.to())
}

// awaits reports whether a reply of nonce to request seq of slot would
// complete it (ackLocked): the request is in flight, and no reply sealed
// since came. mu held.
func (p *peerState) awaits(slot, seq uint16, nonce uint64) bool {
	s := p.req(slot)
	return s != nil && s.inflight && s.seq == seq && nonce > s.replyNonce
}

// ackLocked completes p's request (slot, seq) if it is in flight, and
// reports whether it was; anything else is a duplicate reply. nonce is
// the reply's: a reply sealed before the last one accepted in the slot is
// a replay (every reply to a request is sealed after the requester sent
// it, so after the reply to the slot's previous request was accepted).
func (e *Endpoint) ackLocked(p *peerState, slot, seq uint16, nonce uint64, now retransmit.Time) bool {
	s := p.req(slot)
	if s == nil || !s.inflight || s.seq != seq {
		e.stats.dupReplies.Add(1)
		// A second reply: a copy went out though the first arrived
		// (or the reply was replayed, which can back the timer off up
		// to GASNET_REQUESTTIMEOUT_INITIAL, no further).
		p.rtt.Backoff(now, e.rcfg)
		return false
	}
	if nonce <= s.replyNonce {
		e.stats.replays.Add(1)
		return false
	}
	// A reply that completes a request in flight shows the peer alive,
	// even one sealed before others it sent (a stored reply sent again).
	s.replyNonce, p.heard = nonce, now
	if s.epoch == p.epoch {
		p.confirmed = true // every copy of the request went to dst
	} else if s.epoch == 0 {
		e.restartLocked(p) // copies went to several addresses
	}
	if d, ok := e.tracker.Ack(s.h, now); ok {
		p.rtt.Sample(d, now)
	}
	e.completeLocked(p, slot)
	return true
}

// seal appends payload to b, a datagram encoded without it
// (wire.Message.AppendHead), and seals it for rank dest under the next
// nonce (wire.Key.SealPayload: copied and authenticated in one pass),
// flagged wire.FlagRouted once the endpoint has a Router.
func (e *Endpoint) seal(b []byte, dest int, payload []byte) []byte {
	if e.routing.Load() {
		b[1] |= wire.FlagRouted << 4
	}
	return e.key.SealPayload(b, uint32(dest), e.nonces.Add(1), payload)
}
