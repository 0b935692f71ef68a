package amudp

import (
	"slices"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// PrepareReply prepares the reply of the request t's handler runs for: a
// Medium or Long one (cat) of up to n payload bytes and nargs arguments,
// a Long one written at offset of the requester's segment (ignored for a
// Medium), as GASNet-EX's gex_AM_PrepareReplyMedium and
// gex_AM_PrepareReplyLong. Over the network its payload buffer is that of
// the reply the endpoint keeps for a retransmitted request, so a payload
// the handler builds there is not copied again; a Long one to a
// requester whose segment this process maps is its destination. The
// handler commits or releases it before it returns, on its own
// goroutine; one it leaves prepared is not sent, and the automatic reply
// goes instead. While it is prepared the token sends no other reply.
func (t *Token) PrepareReply(cat Category, n, nargs int, offset uint64) (Prepared, error) {
	switch {
	case t == nil || !t.active || !t.isReq:
		return Prepared{}, ErrNotInHandler
	case t.replied || t.prepared():
		return Prepared{}, ErrAlreadyReplied
	}
	if err := checkPrepare("reply", cat, n, nargs); err != nil {
		return Prepared{}, err
	}
	if cat == Medium {
		offset = 0
	}
	e := t.ep
	if t.open == nil {
		if t.self {
			t.open = new(atomic.Uint64)
		} else {
			t.open = &e.tokOpen
		}
	}
	id := e.prepIDs.Add(1)
	t.open.Store(id)
	pr := Prepared{e: e, tok: t, id: id, open: t.open, dest: t.src, cat: cat, off: offset, nargs: nargs}
	if cat == Long {
		if v := e.peerView(t.src, offset, n); v != nil {
			pr.payload = v
			return pr, nil
		}
	}
	if t.self || t.lane != nil {
		pr.useScratch(n)
		return pr, nil
	}
	// The stored reply of t's slot is the poller's, which runs this
	// handler: nothing else writes it before the handler returns.
	r := t.peer.rxAt(t.slot)
	pr.head = wire.HeaderLen + 4*nargs
	size := pr.head + n + e.key.TagsLen(wire.ReplyKind(cat), false, n)
	r.reply = slices.Grow(r.reply[:0], size+wire.TagLen)[:pr.head+n] // as PrepareRequest
	pr.payload = r.reply[pr.head:]
	pr.inReply = true
	return pr, nil
}

// claimReply ends pr's prepared state and reports whether it was the
// reply its token has prepared now, in the handler that prepared it: ids
// are never reused, the token forgets its own at the handler's return,
// and of two copies of pr only one claims it. The handler commits or
// releases it: a copy committed on another goroutine while the handler
// returns races with the poller.
func (pr *Prepared) claimReply() bool {
	return pr.open.CompareAndSwap(pr.id, 0)
}

// commitReply is Commit of a prepared reply.
func (pr *Prepared) commitReply(handler, n int, args []uint32) error {
	t, e, sc := pr.tok, pr.e, pr.scratch
	pr.e = nil
	if !pr.claimReply() || !pr.claimScratch() {
		return ErrNotPrepared
	}
	defer putScratch(sc)
	if err := pr.checkCommit(t.checkReply(pr.cat, handler, nil, args), n, args); err != nil {
		return err
	}
	if !pr.inReply {
		return t.reply(pr.cat, handler, pr.payload[:n], pr.off, args)
	}
	p := t.peer
	r := p.rxAt(t.slot)
	m := wire.Header{Kind: wire.ReplyKind(pr.cat), Handler: uint8(handler), NArgs: uint8(len(args)),
		Src: uint32(e.rank), Slot: t.slot, Seq: t.seq, Offset: pr.off, Len: uint32(n)}
	var err error
	if r.reply, err = m.AppendTo(r.reply[:0], args); err != nil {
		return err
	}
	r.reply = e.seal(r.reply[:pr.head+n], p.rank, nil)
	r.replied, t.replied = true, true
	e.stats.sent.Add(1)
	return e.tr.Send(r.reply, p.to())
}

// releaseReply is Release of a prepared reply: the handler may reply
// otherwise, or leave the automatic reply to go.
func (pr *Prepared) releaseReply() error {
	sc := pr.scratch
	if !pr.claimReply() || !pr.claimScratch() {
		return ErrNotPrepared
	}
	putScratch(sc)
	return nil
}
