package amudp

import (
	"math"
	"time"

	"github.com/udpconduit/udpconduit/retransmit"
)

// RTT returns the smoothed round-trip estimate to rank, if any.
func (e *Endpoint) RTT(rank int) (time.Duration, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if rank < 0 || rank >= len(e.peers) || e.peers[rank] == nil {
		return 0, false
	}
	return e.peers[rank].rtt.Smoothed()
}

func (e *Endpoint) now() retransmit.Time { return retransmit.Time(time.Since(e.origin)) }

// fireTimers retransmits due requests and gives up on expired ones, at the
// poller's clock. Poller only; sends happen without the lock.
func (e *Endpoint) fireTimers() {
	now := e.clock
	if retransmit.Time(e.deadline.Load()) > now {
		return
	}
	e.mu.Lock()
	e.resends, e.gaveUp = e.resends[:0], e.gaveUp[:0]
	for {
		h, ok := e.tracker.Due(now)
		if !ok {
			break
		}
		ref := e.owner[h]
		p := e.peers[ref.peer]
		s := p.req(ref.slot)
		// Waits stay near the RTT while the peer is heard from, and a
		// request is given up only after the peer's silence
		// (retransmit.Config.NextWait, GiveUpAfter).
		rto := p.rtt.Timeout(e.rcfg)
		if e.tracker.Expire(h, now, p.heard, rto) {
			// A peer silent for longer than loss alone explains
			// (silentAfter: stopped, cut off) that has sent nothing
			// since the last retransmission to it is probed with one
			// request at a time, as TCP retransmits only the oldest
			// segment: the others' timers run on unsent, and they go
			// again once the peer is heard. Without this, a peer
			// stopped for a second drew every outstanding request's
			// retransmissions (network depth × senders, tens of
			// thousands a second). A peer that is only losing
			// datagrams is heard within a few round trips, and its
			// requests are retransmitted as they fall due.
			if now.Sub(p.heard) > silentAfter(rto) && p.heard < p.probedAt && p.probe != h {
				e.stats.heldBack.Add(1)
				continue
			}
			p.probedAt, p.probe = now, h
			e.moveLocked(p, now, rto)
			if s.epoch != p.epoch {
				s.epoch = 0 // copies to two addresses: its reply confirms neither
			}
			s.sending++
			e.resends = append(e.resends, ref)
			continue
		}
		e.completeLocked(p, ref.slot)
		e.gaveUp = append(e.gaveUp, Returned{Reason: ReasonTimeout, Dest: p.rank, Addr: p.to(), Kind: s.kind, Handler: s.handler, Tried: p.tried()})
	}
	e.syncDeadlineLocked()
	e.mu.Unlock()
	for _, ref := range e.resends {
		p := e.peers[ref.peer] // peers entries never change once set
		_ = e.tr.Send(p.req(ref.slot).buf, p.to())
		e.stats.retransmits.Add(1)
		e.stats.sent.Add(1)
	}
	if len(e.resends) > 0 {
		e.mu.Lock()
		for _, ref := range e.resends {
			e.sendDoneLocked(e.peers[ref.peer], ref.slot)
		}
		e.mu.Unlock()
	}
	for _, r := range e.gaveUp {
		e.returned(r)
	}
}

// silentAfter is how long a peer must have sent nothing before only one
// request at a time is retransmitted to it: many round-trip timeouts, so
// that random loss (after which the peer is heard within a few round
// trips) never triggers it.
func silentAfter(rto time.Duration) time.Duration { return max(8*rto, 20*time.Millisecond) }

// syncDeadlineLocked publishes the tracker's next deadline for the spin loop.
func (e *Endpoint) syncDeadlineLocked() {
	dl, ok := e.tracker.NextDeadline()
	if !ok {
		dl = math.MaxInt64
	}
	e.deadline.Store(int64(dl))
}
