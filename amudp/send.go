package amudp

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/retransmit"
)

// Handler runs an active message. args are the message's arguments. For a
// Medium message payload is a temporary buffer valid only during the call;
// for a Long one it is the slice of the receiver's segment the payload was
// written to; for a Short one it is nil. A request handler may reply once
// through t; when it returns without replying, an automatic reply frees the
// requester's credit. Handlers must not block and must not send requests:
// a request from inside a handler (on the goroutine that runs it) returns
// ErrRequestInHandler, as it could wait forever for credit that only that
// goroutine's polling returns.
type Handler func(t *Token, args []uint32, payload []byte)

// Errors of the sending calls.
var (
	ErrTooManyArgs    = errors.New("amudp: more than 16 arguments")
	ErrPayloadTooBig  = errors.New("amudp: payload longer than 65000 bytes")
	ErrBadHandler     = errors.New("amudp: handler index must be 1..255")
	ErrBadRank        = errors.New("amudp: destination rank outside the job")
	ErrNotInHandler   = errors.New("amudp: reply outside a request handler")
	ErrAlreadyReplied = errors.New("amudp: second reply to one request")
	ErrNoSegment      = errors.New("amudp: no segment attached")
	ErrOutOfSegment   = errors.New("amudp: long payload outside the segment")
	ErrNoPeers        = errors.New("amudp: peer table not set")
	ErrNoAddress      = errors.New("amudp: address of the destination not known yet")
	// ErrRequestInHandler: a request sent from inside a handler, which may
	// only reply (see Handler).
	ErrRequestInHandler = errors.New("amudp: request sent from inside a handler (handlers may only reply)")
	// ErrInterrupted: a wait for credit, or Drain, gave up because the
	// interrupt function said so (SetInterrupt).
	ErrInterrupted = errors.New("amudp: wait interrupted")
)

func checkMessage(cat Category, handler int, payload []byte, args []uint32) error {
	if handler < 1 || handler >= NumHandlers {
		return fmt.Errorf("%w (got %d)", ErrBadHandler, handler)
	}
	if len(args) > MaxArgs {
		return fmt.Errorf("%w (got %d)", ErrTooManyArgs, len(args))
	}
	if cat != Short && len(payload) > MaxMedium {
		return fmt.Errorf("%w (got %d)", ErrPayloadTooBig, len(payload))
	}
	return nil
}

// RequestShort sends a Short request to dest's handler.
func (e *Endpoint) RequestShort(dest, handler int, args ...uint32) error {
	return e.request(dest, Short, handler, nil, 0, args)
}

// RequestMedium sends a Medium request; payload is copied before return.
func (e *Endpoint) RequestMedium(dest, handler int, payload []byte, args ...uint32) error {
	return e.request(dest, Medium, handler, payload, 0, args)
}

// RequestLong sends a Long request that writes payload into dest's segment
// at offset before its handler runs; payload is copied before return.
func (e *Endpoint) RequestLong(dest, handler int, payload []byte, offset uint64, args ...uint32) error {
	return e.request(dest, Long, handler, payload, offset, args)
}

// request sends a request, waiting for credit.
func (e *Endpoint) request(dest int, cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if err := checkMessage(cat, handler, payload, args); err != nil {
		return err
	}
	if e.inHandler() {
		return ErrRequestInHandler
	}
	if dest == e.rank {
		return e.selfRequest(cat, handler, payload, off, args)
	}
	if l := e.laneTo(dest); l != nil {
		return e.requestDirect(l, cat, handler, payload, off, args)
	}
	now, err := e.pollBeforeRequest()
	if err != nil {
		return err
	}
	// A Long payload to a peer whose segment this process maps goes
	// straight there, outside the lock (a first use maps it).
	n := len(payload)
	inPlace := cat == Long && e.placeInPeer(dest, payload, off)
	if inPlace {
		payload = nil
	}
	size := wire.HeaderLen + 4*len(args) + len(payload) + e.key.TagsLen(wire.RequestKind(cat), inPlace, len(payload))
	p, now, err := e.creditFor(dest, size, now)
	if err != nil {
		return err
	}
	return e.sendLocked(p, dest, cat, handler, payload, off, args, n, inPlace, size, now)
}

// pollBeforeRequest polls once before a request over the network, as
// every request does (DESIGN.md §3), unless a poll pass ended within the
// last pollFirstGap: that pass was this request's poll, and a syscall
// that would find the socket empty is most of a round trip's overhead on
// a virtual machine. It returns the time, which also starts the
// request's retransmission timer (a read is not free on a virtual
// machine) unless a wait for credit comes between.
func (e *Endpoint) pollBeforeRequest() (retransmit.Time, error) {
	now := e.now()
	if time.Duration(int64(now)-e.lastPass.Load()) >= pollFirstGap && e.pollMu.TryLock() {
		err := e.pollLocked(nil)
		e.pollMu.Unlock()
		e.notify()
		if err != nil {
			return now, err
		}
		now = e.now()
	}
	return now, nil
}

// creditFor waits until a request of size bytes may go to rank dest over
// the network and returns with e.mu held, dest's peer state and the time
// (now, or a later reading after a wait). On an error e.mu is not held.
func (e *Endpoint) creditFor(dest, size int, now retransmit.Time) (*peerState, retransmit.Time, error) {
	e.mu.Lock()
	if e.addrs == nil {
		e.mu.Unlock()
		return nil, now, ErrNoPeers
	}
	if dest < 0 || dest >= len(e.addrs) {
		n := len(e.addrs)
		e.mu.Unlock()
		return nil, now, fmt.Errorf("%w: rank %d, job of %d", ErrBadRank, dest, n)
	}
	if !e.addrs[dest].IsValid() {
		e.mu.Unlock()
		return nil, now, fmt.Errorf("%w: rank %d", ErrNoAddress, dest)
	}
	p := e.peerLocked(dest)
	e.routeLocked(p)
	for !e.creditLocked(p, size) {
		e.mu.Unlock()
		if e.interrupted() {
			return nil, now, ErrInterrupted
		}
		e.fg.Add(1)
		err := e.waitOnce(func() bool { return e.hasCredit(p, size) || e.interrupted() })
		e.leaveWait()
		if err != nil {
			return nil, now, err
		}
		now = e.now()
		e.mu.Lock()
	}
	if e.closed {
		e.mu.Unlock()
		return nil, now, net.ErrClosed
	}
	return p, now, nil
}

// sendLocked sends a request to p (rank dest) for which it has credit, of
// size bytes on the wire (n of them the payload's, sent in place when
// inPlace), its retransmission timer started at now. e.mu held; it
// releases it.
func (e *Endpoint) sendLocked(p *peerState, dest int, cat Category, handler int, payload []byte, off uint64, args []uint32, n int, inPlace bool, size int, now retransmit.Time) error {
	slot, s := e.takeSlotLocked(p, size)
	m := wire.Message{Header: wire.Header{Kind: wire.RequestKind(cat), Handler: uint8(handler), NArgs: uint8(len(args)),
		Src: uint32(e.rank), Slot: slot, Offset: off, Len: uint32(len(payload))}, Payload: payload}
	if inPlace {
		m.Flags, m.Len = wire.FlagInPlace, uint32(n)
	}
	return e.launchLocked(p, dest, slot, s, &m, args, 0, now)
}

// takeSlotLocked takes a slot of p and the credits of a request of size
// bytes, which creditLocked said p has. e.mu held.
func (e *Endpoint) takeSlotLocked(p *peerState, size int) (uint16, *reqSlot) {
	slot, ok := p.pool.acquire()
	if !ok {
		// creditLocked held under e.mu, which is still held: p has a
		// slot free. Not input: a broken invariant of the endpoint.
		e.mu.Unlock()
		panic("amudp: no slot free although the peer had credit")
	}
	e.send.take()
	p.bytes.take(size)
	s := p.newReq(slot)
	s.size = size
	return slot, s
}

// launchLocked encodes m (its Len set) and args into slot s of p (rank
// dest), followed by m.Payload or, where staged > 0, by the staged bytes
// a Prepared request wrote after the header in s.buf; seals it, starts
// its retransmission timer at now and sends it. e.mu held; it releases it.
func (e *Endpoint) launchLocked(p *peerState, dest int, slot uint16, s *reqSlot, m *wire.Message, args []uint32, staged int, now retransmit.Time) error {
	s.seq++
	m.Seq = s.seq
	// Ask for the automatic reply at once when this is the only request in
	// flight to p (a lone request, as in a ping-pong) or when it uses up p's
	// credit (this sender is about to wait for replies). Otherwise the
	// receiver batches replies (see ackBatch).
	if e.depth-p.pool.available() == 1 || !e.creditLocked(p, s.size) {
		m.Flags |= wire.FlagAckNow
	}
	var err error
	if s.buf, err = m.Header.AppendTo(s.buf[:0], args); err != nil {
		e.releaseLocked(p, slot)
		e.mu.Unlock()
		return err
	}
	s.buf = e.seal(s.buf[:len(s.buf)+staged], p.rank, m.Payload)
	s.inflight, s.freeLater, s.sending = true, false, 1
	s.kind, s.handler, s.epoch = m.Kind, m.Handler, p.epoch
	s.h = e.tracker.Add(now, p.rtt.Timeout(e.rcfg))
	e.syncDeadlineLocked()
	for len(e.owner) <= s.h {
		e.owner = append(e.owner, slotRef{})
	}
	e.owner[s.h] = slotRef{peer: int32(dest), slot: slot}
	buf, addr := s.buf, p.to()
	e.mu.Unlock()

	err = e.tr.Send(buf, addr)
	e.stats.sent.Add(1)

	e.mu.Lock()
	freed := e.sendDoneLocked(p, slot)
	e.mu.Unlock()
	if freed {
		e.Wake() // credit came back here, not in a poll pass
	} else if e.blocked.Load() {
		e.tr.Wake() // the sleeping poller must see the new retransmit deadline
	}
	return err
}
