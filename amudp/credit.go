package amudp

import "sync/atomic"

// slotPool hands out a peer's credit instances (slots 0..depth-1): a request
// holds one from transmission until its reply arrives, so at most depth
// requests are outstanding to the peer (GASNET_NETWORKDEPTH, DESIGN.md §6).
// A released slot is the next one handed out again, and a slot never used
// before only when none is free, so the slots in use stay as few as the
// requests that were ever outstanding at once (and the peer's per-slot
// state with them: see peerState). It is pure bookkeeping; the endpoint
// guards it with its mutex.
type slotPool struct {
	free  []uint16 // a stack of released slots
	next  int      // slots handed out at least once: 0..next-1
	depth int
}

func newSlotPool(depth int) slotPool { return slotPool{depth: depth} }

func (p *slotPool) acquire() (uint16, bool) {
	if n := len(p.free); n > 0 {
		s := p.free[n-1]
		p.free = p.free[:n-1]
		return s, true
	}
	if p.next == p.depth {
		return 0, false
	}
	p.next++
	return uint16(p.next - 1), true
}

func (p *slotPool) release(s uint16) {
	if len(p.free) >= p.next || int(s) >= p.next {
		panic("amudp: slot released twice or never acquired") // an invariant of the endpoint, not input
	}
	p.free = append(p.free, s)
}

func (p *slotPool) available() int { return len(p.free) + p.depth - p.next }

// sendCredits bounds the requests outstanding over all peers
// (GASNET_SENDDEPTH); limit < 0 means unlimited.
type sendCredits struct {
	limit int
	// out changes under the endpoint's lock; Outstanding reads it
	// without.
	out atomic.Int64
}

func (c *sendCredits) canSend() bool { return c.limit < 0 || c.out.Load() < int64(c.limit) }
func (c *sendCredits) take()         { c.out.Add(1) }
func (c *sendCredits) give() {
	if c.out.Load() == 0 {
		panic("amudp: send credit returned twice")
	}
	c.out.Add(-1)
}

// byteWindow bounds the bytes of a peer's outstanding requests, so that a
// flood of large messages stays within what the peer's kernel receive
// buffer holds instead of overrunning it and waiting for retransmission.
// The endpoint sizes the window from its own granted buffer, since every
// endpoint of a job is configured alike. A request always fits when none
// is outstanding; limit <= 0 means unlimited.
type byteWindow struct {
	out int
}

func (w *byteWindow) fits(n, limit int) bool { return limit <= 0 || w.out == 0 || w.out+n <= limit }
func (w *byteWindow) take(n int)             { w.out += n }
func (w *byteWindow) give(n int) {
	if n > w.out {
		panic("amudp: byte window returned twice")
	}
	w.out -= n
}

// Outstanding returns the number of requests awaiting their reply: of
// this goroutine's, exactly; of other goroutines' sending meanwhile, some.
func (e *Endpoint) Outstanding() int {
	return int(e.send.out.Load()) + e.directOutstanding()
}

// mayRequest is the credit rule: a request of size bytes to a peer may go
// when a send credit is left (GASNET_SENDDEPTH, over all peers), the peer
// has a slot free (GASNET_NETWORKDEPTH, per peer) and the request fits in
// the peer's byte window of window bytes.
func mayRequest(send *sendCredits, pool *slotPool, bytes *byteWindow, size, window int) bool {
	return send.canSend() && pool.available() > 0 && bytes.fits(size, window)
}

// creditLocked reports whether a request of size bytes to p may go now
// (see mayRequest).
func (e *Endpoint) creditLocked(p *peerState, size int) bool {
	return mayRequest(&e.send, &p.pool, &p.bytes, size, e.window)
}

func (e *Endpoint) hasCredit(p *peerState, size int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed || e.creditLocked(p, size)
}

// releaseLocked returns a finished request's credits.
func (e *Endpoint) releaseLocked(p *peerState, slot uint16) {
	p.pool.release(slot)
	e.send.give()
	p.bytes.give(p.req(slot).size)
}

// sendDoneLocked ends one send of a slot's buffer, freeing the slot when its
// reply already came. It reports whether it freed the slot: credit that
// returns outside a poll pass, which the caller must announce with Wake
// after unlocking, or goroutines waiting for credit sleep past it.
func (e *Endpoint) sendDoneLocked(p *peerState, slot uint16) bool {
	s := p.req(slot)
	s.sending--
	if s.sending == 0 && s.freeLater {
		s.freeLater = false
		e.releaseLocked(p, slot)
		return true
	}
	return false
}

// completeLocked ends a request: acknowledged, refused or given up.
func (e *Endpoint) completeLocked(p *peerState, slot uint16) {
	s := p.req(slot)
	s.inflight = false
	if s.sending > 0 {
		s.freeLater = true
		return
	}
	e.releaseLocked(p, slot)
}
