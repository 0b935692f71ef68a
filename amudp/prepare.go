package amudp

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// ErrNotPrepared: Commit or Release of a Prepared request or reply that
// was already committed or released (or, a reply, whose handler
// returned), or that no Prepare returned.
var ErrNotPrepared = errors.New("amudp: request not prepared, or already committed")

// Prepared is a request (or a handler's reply: Token.PrepareReply) whose
// payload the caller writes into the buffer the endpoint gives (Payload)
// before it sends it (Commit): GASNet-EX's negotiated-payload messages
// with a GASNet-provided buffer. Over the
// network the buffer is the datagram the endpoint keeps for
// retransmission, so the payload is written once, by the caller, instead
// of copied from the caller's buffer; a Long one to a peer whose segment
// this process maps is its destination itself. Elsewhere (a peer through
// shared memory, this rank) it is a buffer of the endpoint's, sent at
// Commit as RequestMedium or RequestLong send theirs.
//
// Over the network Prepare takes one of the destination's credits and a
// slot, held until Commit or Release (the request counts as outstanding
// meanwhile); elsewhere Commit waits for credit as a request does. A
// Long staged at its destination is in the peer's segment as soon as it
// is written: released, or committed shorter, the bytes stay there. A
// Prepared, and every copy of it, is committed or released once, by one
// goroutine.
type Prepared struct {
	e       *Endpoint
	p       *peerState // over the network; nil for the other kinds
	scratch *scratchBuf
	payload []byte
	dest    int
	cat     Category
	off     uint64
	nargs   int
	slot    uint16
	gen     uint32
	head    int // bytes of the header and arguments before payload in the slot's buffer
	// A reply's (Token.PrepareReply): its token, its id and where the
	// token holds it (Token.open, copied so that a stale copy of pr reads
	// no field of a token the poller reuses), and whether it is staged in
	// the buffer of the request's stored reply.
	tok     *Token
	id      uint64
	open    *atomic.Uint64
	inReply bool
}

// scratchBuf is the buffer of a Prepared request that is not staged in a
// datagram; live while its request is prepared.
type scratchBuf struct {
	b    [MaxMedium]byte
	live bool
	gen  uint32 // counts the requests prepared in it
}

var scratchPool = sync.Pool{New: func() any { return new(scratchBuf) }}

// PrepareRequest prepares a Medium or Long request (cat) of up to n
// payload bytes and nargs arguments to rank dest, a Long one written at
// offset of dest's segment (ignored for a Medium), waiting for credit as
// a request does. The caller writes the payload into Payload and sends
// it with Commit.
func (e *Endpoint) PrepareRequest(dest int, cat Category, n, nargs int, offset uint64) (Prepared, error) {
	if err := checkPrepare("request", cat, n, nargs); err != nil {
		return Prepared{}, err
	}
	if e.inHandler() {
		return Prepared{}, ErrRequestInHandler
	}
	if cat == Medium {
		offset = 0
	}
	pr := Prepared{e: e, dest: dest, cat: cat, off: offset, nargs: nargs}
	if cat == Long {
		if v := e.peerView(dest, offset, n); v != nil {
			pr.useScratch(0) // its generation tells a stale copy
			pr.payload = v
			return pr, nil
		}
	}
	if dest == e.rank || e.laneTo(dest) != nil {
		pr.useScratch(n)
		return pr, nil
	}
	now, err := e.pollBeforeRequest()
	if err != nil {
		return Prepared{}, err
	}
	size := wire.HeaderLen + 4*nargs + n + e.key.TagsLen(wire.RequestKind(cat), false, n)
	p, _, err := e.creditFor(dest, size, now)
	if err != nil {
		return Prepared{}, err
	}
	slot, s := e.takeSlotLocked(p, size)
	s.prepared = true
	s.prepGen++
	pr.p, pr.slot, pr.gen = p, slot, s.prepGen
	pr.head = wire.HeaderLen + 4*nargs
	// Sealing asks for a tag's room more than the tags take.
	s.buf = slices.Grow(s.buf[:0], size+wire.TagLen)[:pr.head+n]
	pr.payload = s.buf[pr.head:]
	e.mu.Unlock()
	return pr, nil
}

// checkPrepare checks the category, payload size and number of arguments
// of a prepared request or reply (what).
func checkPrepare(what string, cat Category, n, nargs int) error {
	switch {
	case cat != Medium && cat != Long:
		return fmt.Errorf("amudp: prepared %s of category %v; accepted: Medium, Long", what, cat)
	case n < 0 || n > MaxMedium:
		return fmt.Errorf("%w (got %d)", ErrPayloadTooBig, n)
	case nargs < 0 || nargs > MaxArgs:
		return fmt.Errorf("%w (got %d)", ErrTooManyArgs, nargs)
	}
	return nil
}

// Payload returns the buffer the payload is written into: n bytes,
// PrepareRequest's or PrepareReply's. It is the endpoint's after Commit
// or Release.
func (pr *Prepared) Payload() []byte { return pr.payload }

// Commit sends the prepared request or reply to handler with the first n
// bytes of Payload (n at most its length) and args (as many as prepared).
// An error of the arguments leaves it released, nothing sent; one of the
// transport's comes after the message was stored for retransmission.
func (pr *Prepared) Commit(handler, n int, args ...uint32) error {
	e := pr.e
	if e == nil {
		return ErrNotPrepared
	}
	if pr.tok != nil {
		return pr.commitReply(handler, n, args)
	}
	if err := pr.checkCommit(checkMessage(pr.cat, handler, nil, args), n, args); err != nil {
		if rerr := pr.Release(); rerr != nil {
			return rerr
		}
		return err
	}
	if pr.p == nil {
		payload, sc := pr.payload[:n], pr.scratch
		if !pr.claimScratch() {
			return ErrNotPrepared
		}
		pr.e = nil
		err := e.request(pr.dest, pr.cat, handler, payload, pr.off, args)
		putScratch(sc)
		return err
	}
	e.mu.Lock()
	s, err := pr.claimLocked()
	if err != nil {
		e.mu.Unlock()
		return err
	}
	// The credit taken at Prepare counted n bytes of payload at most.
	size := pr.head + n + e.key.TagsLen(wire.RequestKind(pr.cat), false, n)
	pr.p.bytes.give(s.size - size)
	s.size = size
	m := wire.Message{Header: wire.Header{Kind: wire.RequestKind(pr.cat), Handler: uint8(handler), NArgs: uint8(len(args)),
		Src: uint32(e.rank), Slot: pr.slot, Offset: pr.off, Len: uint32(n)}}
	if e.closed {
		e.releaseLocked(pr.p, pr.slot)
		e.mu.Unlock()
		e.Wake()
		return net.ErrClosed
	}
	return e.launchLocked(pr.p, pr.dest, pr.slot, s, &m, args, n, e.now())
}

// Release gives back a prepared request's credit and buffer without
// sending it.
func (pr *Prepared) Release() error {
	e := pr.e
	if e == nil {
		return ErrNotPrepared
	}
	pr.e = nil
	if pr.tok != nil {
		return pr.releaseReply()
	}
	if pr.p == nil {
		sc := pr.scratch
		if !pr.claimScratch() {
			return ErrNotPrepared
		}
		putScratch(sc)
		return nil
	}
	e.mu.Lock()
	if _, err := pr.claimLocked(); err != nil {
		e.mu.Unlock()
		return err
	}
	e.releaseLocked(pr.p, pr.slot)
	e.mu.Unlock()
	e.Wake() // a request waiting for the credit goes on
	return nil
}

// checkCommit returns err, a check of the handler and arguments, or else
// the error of committing n payload bytes and args where pr was prepared
// with its payload's length and nargs.
func (pr *Prepared) checkCommit(err error, n int, args []uint32) error {
	switch {
	case err != nil:
		return err
	case n < 0 || n > len(pr.payload):
		return fmt.Errorf("amudp: commit of %d payload bytes; prepared %d", n, len(pr.payload))
	case len(args) != pr.nargs:
		return fmt.Errorf("%w: commit with %d arguments; prepared %d", ErrTooManyArgs, len(args), pr.nargs)
	}
	return nil
}

// useScratch makes n bytes of a buffer from the pool pr's payload.
func (pr *Prepared) useScratch(n int) {
	pr.scratch = scratchPool.Get().(*scratchBuf)
	pr.scratch.live = true
	pr.scratch.gen++
	pr.gen = pr.scratch.gen
	pr.payload = pr.scratch.b[:n]
}

// claimScratch ends pr's hold on its scratch buffer, if it has one, and
// reports false when the buffer is no longer pr's (a copy of pr was
// committed or released).
func (pr *Prepared) claimScratch() bool {
	sc := pr.scratch
	if sc == nil {
		return true
	}
	if !sc.live || sc.gen != pr.gen {
		return false
	}
	sc.live = false
	pr.scratch = nil
	return true
}

// putScratch returns a claimed scratch buffer, if any, to the pool.
func putScratch(sc *scratchBuf) {
	if sc != nil {
		scratchPool.Put(sc)
	}
}

// claimLocked ends the prepared state of pr's slot, which must still be
// pr's. e.mu held.
func (pr *Prepared) claimLocked() (*reqSlot, error) {
	s := pr.p.req(pr.slot)
	if !s.prepared || s.prepGen != pr.gen {
		return nil, ErrNotPrepared
	}
	s.prepared = false
	pr.e = nil
	return s, nil
}

// peerView returns n bytes of rank's segment at off where this process
// maps it, else nil.
func (e *Endpoint) peerView(rank int, off uint64, n int) []byte {
	f := e.views.Load()
	if f == nil || n == 0 {
		return nil
	}
	v := (*f)(rank)
	if v == nil || off > uint64(len(v)) || uint64(n) > uint64(len(v))-off {
		return nil
	}
	return v[off : off+uint64(n) : off+uint64(n)]
}
