package amudp

import (
	"fmt"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// Token identifies the message a handler is running for, and replies to it.
// It is valid only during the handler.
type Token struct {
	ep      *Endpoint
	peer    *peerState
	src     int
	slot    uint16
	seq     uint16
	isReq   bool
	active  bool
	replied bool
	self    bool
	lane    *lane // a direct request's sender (direct.go)
	client  bool  // runs a handler at or above Config.Reserved
	// open holds the id of the reply prepared (PrepareReply) and not
	// yet committed or released, else 0, until the handler returns
	// (closeReply); atomic, so that a copy of the Prepared committed
	// after that finds it gone. nil until the handler prepares one.
	open *atomic.Uint64
}

// prepared reports whether t's handler has a reply prepared now.
func (t *Token) prepared() bool { return t.open != nil && t.open.Load() != 0 }

// closeReply ends, when its handler returns, the reply t left prepared.
func (t *Token) closeReply() {
	if t.open != nil {
		t.open.Store(0)
	}
}

// Source returns the rank of the message's sender.
func (t *Token) Source() int { return t.src }

// IsRequest reports whether the handler runs for a request.
func (t *Token) IsRequest() bool { return t.isReq }

// ReplyShort replies with a Short message.
func (t *Token) ReplyShort(handler int, args ...uint32) error {
	return t.reply(Short, handler, nil, 0, args)
}

// ReplyMedium replies with a Medium message.
func (t *Token) ReplyMedium(handler int, payload []byte, args ...uint32) error {
	return t.reply(Medium, handler, payload, 0, args)
}

// ReplyLong replies with a Long message into the requester's segment.
func (t *Token) ReplyLong(handler int, payload []byte, offset uint64, args ...uint32) error {
	return t.reply(Long, handler, payload, offset, args)
}

func (t *Token) reply(cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if t == nil || !t.active || !t.isReq {
		return ErrNotInHandler
	}
	if t.replied {
		return ErrAlreadyReplied
	}
	if t.prepared() {
		return fmt.Errorf("%w: a reply is prepared; commit or release it", ErrAlreadyReplied)
	}
	if err := t.checkReply(cat, handler, payload, args); err != nil {
		return err
	}
	e := t.ep
	if t.self {
		t.replied = true
		return e.runLocal(false, cat, handler, payload, off, args)
	}
	if t.lane != nil {
		var h directHead
		head, rec, err := e.directUser(&h, t.src, uint32(t.slot)<<16|uint32(t.seq), wire.ReplyKind(cat), 0, handler, payload, off, args)
		t.replied = true
		if err != nil {
			return err
		}
		return e.replyRecord(t.lane, head, rec)
	}
	m := wire.Message{Header: wire.Header{Kind: wire.ReplyKind(cat), Handler: uint8(handler), NArgs: uint8(len(args)),
		Src: uint32(e.rank), Slot: t.slot, Seq: t.seq, Offset: off}, Payload: payload}
	if cat == Long && e.placeInPeer(t.peer.rank, payload, off) {
		m.Flags, m.Len, m.Payload = wire.FlagInPlace, uint32(len(payload)), nil
	}
	copy(m.Args[:], args)
	t.replied = true
	return e.sendReply(t.peer, t.slot, &m)
}

// checkReply checks a reply's handler, payload and arguments.
func (t *Token) checkReply(cat Category, handler int, payload []byte, args []uint32) error {
	if err := checkMessage(cat, handler, payload, args); err != nil {
		return err
	}
	if e := t.ep; t.client && handler < e.reserved {
		return fmt.Errorf("%w: a client handler may reply only to client handlers %d..%d (got %d)", e.reservedErr, e.reserved, NumHandlers-1, handler)
	}
	return nil
}

// sendReply stores m as the slot's reply and sends it. Poller only.
func (e *Endpoint) sendReply(p *peerState, slot uint16, m *wire.Message) error {
	if err := e.storeReply(p, slot, m); err != nil {
		return err
	}
	e.stats.sent.Add(1)
	return e.tr.Send(p.rxAt(slot).reply, p.to())
}

// storeReply encodes and seals m as the reply of p's request in slot,
// re-sent for a retransmitted request.
func (e *Endpoint) storeReply(p *peerState, slot uint16, m *wire.Message) error {
	r := p.rxAt(slot)
	var err error
	if r.reply, err = m.AppendHead(r.reply[:0]); err != nil {
		return err
	}
	r.reply = e.seal(r.reply, p.rank, m.Payload)
	r.replied = true
	return nil
}
