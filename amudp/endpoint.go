package amudp

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"udpconduit/retransmit"
)

// Handler runs an active message. args are the message's arguments. For a
// Medium message payload is a temporary buffer valid only during the call;
// for a Long one it is the slice of the receiver's segment the payload was
// written to; for a Short one it is nil. A request handler may reply once
// through t; when it returns without replying, an automatic reply frees the
// requester's credit. Handlers must not block and must not send requests.
type Handler func(t *Token, args []uint32, payload []byte)

// Returned describes a message that could not run: a request of this
// endpoint refused by its receiver or given up after the retransmission time
// (DESIGN.md §5), or a reply that reached this endpoint and was refused here
// (Incoming).
type Returned struct {
	Reason Reason
	// Dest is the other side: the rank the request was sent to, or for an
	// Incoming reply the rank that sent it.
	Dest    int
	Addr    netip.AddrPort
	Kind    Kind  // the kind of the message
	Handler uint8 // the handler index it named
	// Incoming is true for a reply from Dest that this endpoint refused.
	Incoming bool
}

// String says who did what, e.g. "short-request to rank 1 at
// 127.0.0.1:4000 (handler 130) was refused by rank 1: no handler registered
// at that index".
func (r Returned) String() string {
	switch {
	case r.Incoming:
		return fmt.Sprintf("%s from rank %d at %v (handler %d) was refused here: %s", r.Kind, r.Dest, r.Addr, r.Handler, r.Reason)
	case r.Reason == ReasonTimeout || r.Reason == ReasonClosed:
		return fmt.Sprintf("%s to rank %d at %v (handler %d) is undeliverable: %s", r.Kind, r.Dest, r.Addr, r.Handler, r.Reason)
	}
	return fmt.Sprintf("%s to rank %d at %v (handler %d) was refused by rank %d: %s", r.Kind, r.Dest, r.Addr, r.Handler, r.Dest, r.Reason)
}

// ReturnedHandler is handler 0: it receives requests that could not be
// delivered. It runs on the polling goroutine.
type ReturnedHandler func(r Returned)

// ReturnedError is what Poll and the waiting calls return when a request was
// returned and no ReturnedHandler is set.
type ReturnedError struct{ Returned }

func (e *ReturnedError) Error() string { return "amudp: " + e.Returned.String() }

// Timeout reports whether the request was undeliverable within the request
// timeout (net.Error).
func (e *ReturnedError) Timeout() bool { return e.Reason == ReasonTimeout }

// Temporary is false: net.Error.
func (e *ReturnedError) Temporary() bool { return false }

// Unwrap makes a closed-endpoint return match net.ErrClosed.
func (e *ReturnedError) Unwrap() error {
	if e.Reason == ReasonClosed {
		return net.ErrClosed
	}
	return nil
}

var _ net.Error = (*ReturnedError)(nil)

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
)

// Config configures an Endpoint. A zero field means its default.
type Config struct {
	// Rank is this endpoint's rank.
	Rank int
	// Secret is the job secret; the tag of every datagram is derived from it
	// and the destination rank, and other datagrams are dropped.
	Secret []byte
	// NetworkDepth is the number of outstanding requests per peer
	// (GASNET_NETWORKDEPTH, default 128, 1..1024).
	NetworkDepth int
	// SendDepth bounds outstanding requests over all peers (GASNET_SENDDEPTH);
	// default depth × min(max(1, N−1), 4); -1 = unlimited.
	SendDepth int
	// RecvDepth bounds the messages handled per poll (GASNET_RECVDEPTH);
	// default 2 × depth × min(max(1, N−1), 4), at most 65534.
	RecvDepth int
	// Retransmit holds the request timeouts; zero means the defaults.
	Retransmit retransmit.Config
	// SocketBufferMax bounds the growth of the kernel socket buffers
	// (GASNET_SOCKETBUFFER_MAX, default 4 MiB).
	SocketBufferMax int
	// Spin is how long a blocking wait polls before it sleeps in the kernel.
	// Negative: spin forever (lowest latency, burns a core).
	Spin time.Duration
	// Reserved is the number of handler indexes that belong to the library
	// above the endpoint (conduit reserves 1..127, DESIGN.md §3): a handler
	// at index Reserved or above may reply only to a handler at Reserved or
	// above, so client code never reaches a library handler. 0: none.
	Reserved int
	// Polite makes blocking waits sleep in the kernel as soon as a poll
	// finds nothing, without spinning: for hosts with more workers than
	// cores, and for tests on virtual time (testing/synctest).
	Polite bool
}

// DefaultSpin is the default busy-poll time of a blocking wait.
const DefaultSpin = 100 * time.Microsecond

// pollFirstGap: a request skips its poll-first when a poll pass ended more
// recently than this. Replies come batched at most ackDelay apart, so a
// sender that only sends polls about as often as they can arrive; a request
// from another peer waits at most this long for a busy sender to run it.
const pollFirstGap = ackDelay

// ackBatch is the most automatic replies to one peer that share a datagram.
// A batch waits at most ackDelay, unless its sender asked for the reply at
// once (FlagAckNow) or the poller is about to sleep. While at least ackBatch
// requests are in flight the receiver's batch fills by itself, so a flood
// gets one reply datagram per ackBatch requests instead of one each.
const (
	ackBatch = 16
	ackDelay = 50 * time.Microsecond
)

// maxBlock caps one sleep in the kernel, so progress never depends on a
// missed wakeup.
const maxBlock = 20 * time.Millisecond

// Tag returns the 64-bit tag that datagrams to rank carry in a job with the
// given secret.
func Tag(secret []byte, rank int) uint64 {
	h := sha256.New()
	h.Write(secret)
	var r [4]byte
	binary.LittleEndian.PutUint32(r[:], uint32(rank))
	h.Write(r[:])
	var sum [sha256.Size]byte
	return binary.LittleEndian.Uint64(h.Sum(sum[:0]))
}

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

// reqSlot is one credit instance at the requester.
type reqSlot struct {
	seq       uint16
	inflight  bool
	freeLater bool  // reply came while a send was in progress
	sending   int32 // sends of buf in progress
	h         int   // tracker handle
	size      int   // bytes of the encoded request, in the peer's byte window
	kind      Kind
	handler   uint8
	buf       []byte // the encoded request, kept for retransmission
}

// rxSlot is one credit instance of a peer, at the receiver.
type rxSlot struct {
	seq        uint16
	replied    bool
	resentPass uint64
	reply      []byte // the encoded reply, re-sent for a retransmitted request
}

// peerState is allocated on first contact (DESIGN.md §6).
type peerState struct {
	rank  int
	addr  netip.AddrPort
	tag   uint64 // tag of datagrams to this peer
	rtt   retransmit.RTT
	heard retransmit.Time // when a datagram from the peer last arrived (0: never)
	pool  slotPool
	bytes byteWindow
	slots []reqSlot
	rx    []rxSlot // owned by the poller

	// Automatic replies waiting to go out together; owned by the poller.
	acks      []uint32 // slot<<16 | seq
	ackQueued bool
	ackNow    bool            // a request of the batch asked for its reply at once
	ackSince  retransmit.Time // when the oldest waiting reply was queued
}

type slotRef struct {
	peer int32
	slot uint16
}

// Endpoint sends and receives active messages over one Transport. It is safe
// for concurrent use by many goroutines. Handlers run on whichever goroutine
// polls; one goroutine polls at a time.
type Endpoint struct {
	tr       Transport
	rank     int
	myTag    uint64
	secret   []byte
	depth    int
	spin     time.Duration
	polite   bool
	reserved int
	rcfg     retransmit.Config
	origin   time.Time
	bufMax   int

	mu       sync.Mutex // guards the fields below, up to pollMu
	handlers [NumHandlers]Handler
	onRet    ReturnedHandler
	retErr   error
	addrs    []netip.AddrPort
	peers    []*peerState
	tracker  *retransmit.Tracker
	owner    []slotRef // tracker handle -> slot
	send     sendCredits
	recvMax  int
	window   int // byte window per peer (0: unlimited)
	segment  []byte
	closed   bool

	pollMu  sync.Mutex // held by the poller; guards the fields below
	rbuf    []byte
	msg     Message
	tok     Token
	pass    uint64
	resends []slotRef
	gaveUp  []Returned
	drained int
	bufSize int
	ackq    []*peerState // peers with automatic replies waiting
	abuf    []byte       // encoded batch of automatic replies
	apay    []byte

	waitMu  sync.Mutex
	waitCv  *sync.Cond
	gen     uint64
	waiters atomic.Int32
	blocked atomic.Bool
	// Lock-free views for the spin loop: closed, a pending returned error,
	// and the earliest retransmission deadline (math.MaxInt64: none).
	closedFlag atomic.Bool
	retPending atomic.Bool
	deadline   atomic.Int64
	lastPass   atomic.Int64 // when the last poll pass ended (e.now)
	// passSeq is odd while a poll pass runs and even between passes; its
	// atomic updates give Fence a happens-before edge over every handler
	// run in a pass that ended.
	passSeq atomic.Uint64
	stats   statCounters
}

// NewEndpoint returns an endpoint on tr. The peer table is set later with
// SetPeers; handlers are registered with Register.
func NewEndpoint(tr Transport, cfg Config) (*Endpoint, error) {
	if cfg.NetworkDepth == 0 {
		cfg.NetworkDepth = DefaultNetworkDepth
	}
	if cfg.NetworkDepth < 1 || cfg.NetworkDepth > MaxNetworkDepth {
		return nil, fmt.Errorf("amudp: network depth %d: accepted 1..%d", cfg.NetworkDepth, MaxNetworkDepth)
	}
	if cfg.Retransmit == (retransmit.Config{}) {
		cfg.Retransmit = retransmit.DefaultConfig()
	}
	if err := cfg.Retransmit.Validate(); err != nil {
		return nil, err
	}
	if cfg.RecvDepth < 0 || cfg.RecvDepth > MaxRecvDepth {
		return nil, fmt.Errorf("amudp: receive depth %d: accepted 1..%d", cfg.RecvDepth, MaxRecvDepth)
	}
	if cfg.SendDepth < -1 {
		return nil, fmt.Errorf("amudp: send depth %d: accepted -1 (unlimited) or more", cfg.SendDepth)
	}
	if cfg.Rank < 0 || cfg.Rank >= MaxPeers {
		return nil, fmt.Errorf("amudp: rank %d outside 0..%d", cfg.Rank, MaxPeers-1)
	}
	if cfg.Reserved < 0 || cfg.Reserved >= NumHandlers {
		return nil, fmt.Errorf("amudp: %d reserved handlers: accepted 0..%d", cfg.Reserved, NumHandlers-1)
	}
	if cfg.Spin == 0 {
		cfg.Spin = DefaultSpin
	}
	if cfg.SocketBufferMax == 0 {
		cfg.SocketBufferMax = DefaultSocketBufferMax
	}
	e := &Endpoint{
		tr: tr, rank: cfg.Rank, secret: append([]byte(nil), cfg.Secret...),
		depth: cfg.NetworkDepth, spin: cfg.Spin, polite: cfg.Polite, reserved: cfg.Reserved, rcfg: cfg.Retransmit, origin: time.Now(),
		bufMax:  cfg.SocketBufferMax,
		tracker: retransmit.NewTracker(cfg.Retransmit),
		rbuf:    make([]byte, MaxDatagram+1),
	}
	e.myTag = Tag(e.secret, e.rank)
	if rcv, _, err := tr.SetBuffers(0); err == nil {
		e.window = windowFor(rcv)
	}
	e.send.limit = cfg.SendDepth
	e.recvMax = cfg.RecvDepth
	e.waitCv = sync.NewCond(&e.waitMu)
	e.deadline.Store(math.MaxInt64)
	return e, nil
}

// Rank returns this endpoint's rank.
func (e *Endpoint) Rank() int { return e.rank }

// LocalAddr returns the address peers send to.
func (e *Endpoint) LocalAddr() netip.AddrPort { return e.tr.LocalAddr() }

// SetPeers sets the address of every rank in the job; addrs[Rank()] is this
// endpoint. It fills in the depth defaults that depend on the job size.
func (e *Endpoint) SetPeers(addrs []netip.AddrPort) error {
	if len(addrs) <= e.rank || len(addrs) > MaxPeers {
		return fmt.Errorf("amudp: peer table of %d entries for rank %d: accepted %d..%d", len(addrs), e.rank, e.rank+1, MaxPeers)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.addrs = append([]netip.AddrPort(nil), addrs...)
	e.peers = make([]*peerState, len(addrs))
	f := min(max(1, len(addrs)-1), 4)
	if e.send.limit == 0 {
		e.send.limit = e.depth * f
	}
	if e.recvMax == 0 {
		e.recvMax = min(2*e.depth*f, MaxRecvDepth)
	}
	return nil
}

// FillPeers completes a peer table that SetPeers left partly unknown (zero
// entries, as while the table is relayed at startup): unknown entries take
// addrs' values, and known ones must agree. Datagrams from a rank whose
// address is unknown are dropped, and requests to it refused.
func (e *Endpoint) FillPeers(addrs []netip.AddrPort) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(addrs) != len(e.addrs) {
		return fmt.Errorf("amudp: peer table of %d entries to complete one of %d", len(addrs), len(e.addrs))
	}
	for i, a := range addrs {
		switch {
		case !e.addrs[i].IsValid():
			e.addrs[i] = a
		case e.addrs[i] != a:
			return fmt.Errorf("amudp: rank %d is at %v, not %v", i, e.addrs[i], a)
		}
	}
	return nil
}

// Size returns the number of ranks in the peer table.
func (e *Endpoint) Size() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.addrs)
}

// Register installs h at index 1..255 (index 0 is the returned-message
// handler: see SetReturnedHandler). A nil h unregisters.
func (e *Endpoint) Register(index int, h Handler) error {
	if index < 1 || index >= NumHandlers {
		return fmt.Errorf("%w (got %d)", ErrBadHandler, index)
	}
	e.mu.Lock()
	e.handlers[index] = h
	e.mu.Unlock()
	return nil
}

// SetReturnedHandler installs handler 0. Without one, the first returned
// request is reported as a *ReturnedError by Poll and the waiting calls.
func (e *Endpoint) SetReturnedHandler(h ReturnedHandler) {
	e.mu.Lock()
	e.onRet = h
	e.mu.Unlock()
}

// SetSegment attaches the memory that Long messages write into.
func (e *Endpoint) SetSegment(seg []byte) {
	e.mu.Lock()
	e.segment = seg
	e.mu.Unlock()
}

// Segment returns the attached segment.
func (e *Endpoint) Segment() []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.segment
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

// Outstanding returns the number of requests awaiting their reply.
func (e *Endpoint) Outstanding() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.send.out
}

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

// peerLocked returns rank's state, allocating it on first contact.
func (e *Endpoint) peerLocked(rank int) *peerState {
	p := e.peers[rank]
	if p == nil {
		p = &peerState{rank: rank, addr: e.addrs[rank], tag: Tag(e.secret, rank),
			pool: newSlotPool(e.depth), slots: make([]reqSlot, e.depth), rx: make([]rxSlot, e.depth)}
		e.peers[rank] = p
	}
	return p
}

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

func (e *Endpoint) request(dest int, cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if err := checkMessage(cat, handler, payload, args); err != nil {
		return err
	}
	if dest == e.rank {
		return e.selfRequest(cat, handler, payload, off, args)
	}
	// Every request polls first (DESIGN.md §3), unless a poll pass ended
	// within the last pollFirstGap: that pass was this request's poll, and
	// a syscall that would find the socket empty is most of a round trip's
	// overhead on a VM (about 1.2 µs here).
	if time.Duration(int64(e.now())-e.lastPass.Load()) >= pollFirstGap && e.pollMu.TryLock() {
		err := e.pollLocked(nil)
		e.pollMu.Unlock()
		e.notify()
		if err != nil {
			return err
		}
	}
	e.mu.Lock()
	if e.addrs == nil {
		e.mu.Unlock()
		return ErrNoPeers
	}
	if dest < 0 || dest >= len(e.addrs) {
		n := len(e.addrs)
		e.mu.Unlock()
		return fmt.Errorf("%w: rank %d, job of %d", ErrBadRank, dest, n)
	}
	if !e.addrs[dest].IsValid() {
		e.mu.Unlock()
		return fmt.Errorf("%w: rank %d", ErrNoAddress, dest)
	}
	p := e.peerLocked(dest)
	size := HeaderLen + 4*len(args) + len(payload)
	for !e.creditLocked(p, size) {
		e.mu.Unlock()
		if err := e.waitOnce(func() bool { return e.hasCredit(p, size) }); err != nil {
			return err
		}
		e.mu.Lock()
	}
	if e.closed {
		e.mu.Unlock()
		return net.ErrClosed
	}
	slot, _ := p.pool.acquire()
	e.send.take()
	p.bytes.take(size)
	s := &p.slots[slot]
	s.size = size
	s.seq++
	m := Message{Header: Header{Kind: requestKind(cat), Handler: uint8(handler), NArgs: uint8(len(args)),
		Tag: p.tag, Src: uint32(e.rank), Slot: slot, Seq: s.seq, Offset: off}, Payload: payload}
	// Ask for the automatic reply at once when this is the only request in
	// flight to p (a lone request, as in a ping-pong) or when it uses up p's
	// credit (this sender is about to wait for replies). Otherwise the
	// receiver batches replies (see ackBatch).
	if e.depth-p.pool.available() == 1 || !e.creditLocked(p, size) {
		m.Flags = FlagAckNow
	}
	copy(m.Args[:], args)
	var err error
	if s.buf, err = m.Append(s.buf[:0]); err != nil {
		e.releaseLocked(p, slot)
		e.mu.Unlock()
		return err
	}
	s.inflight, s.freeLater, s.sending = true, false, 1
	s.kind, s.handler = m.Kind, m.Handler
	s.h = e.tracker.Add(e.now(), p.rtt.Timeout(e.rcfg))
	e.syncDeadlineLocked()
	for len(e.owner) <= s.h {
		e.owner = append(e.owner, slotRef{})
	}
	e.owner[s.h] = slotRef{peer: int32(dest), slot: slot}
	buf, addr := s.buf, p.addr
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

// creditLocked reports whether a request of size bytes to p may go now:
// a slot of p, a send credit, and room in p's byte window.
func (e *Endpoint) creditLocked(p *peerState, size int) bool {
	return e.send.canSend() && p.pool.available() > 0 && p.bytes.fits(size, e.window)
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
	p.bytes.give(p.slots[slot].size)
}

// sendDoneLocked ends one send of a slot's buffer, freeing the slot when its
// reply already came. It reports whether it freed the slot: credit that
// returns outside a poll pass, which the caller must announce with Wake
// after unlocking, or goroutines waiting for credit sleep past it.
func (e *Endpoint) sendDoneLocked(p *peerState, slot uint16) bool {
	s := &p.slots[slot]
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
	s := &p.slots[slot]
	s.inflight = false
	if s.sending > 0 {
		s.freeLater = true
		return
	}
	e.releaseLocked(p, slot)
}

// selfRequest runs a request to this endpoint at once, without the network.
func (e *Endpoint) selfRequest(cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if err := e.runLocal(true, cat, handler, payload, off, args); err != nil {
		return err
	}
	if e.blocked.Load() {
		e.tr.Wake()
	}
	return nil
}

// runLocal runs a message to this endpoint at once, on the caller's
// goroutine: a self request, or the reply to one. Copies keep the caller's
// slices from escaping through the handler call, so the network path does
// not allocate; self-sends may.
func (e *Endpoint) runLocal(isReq bool, cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	e.mu.Lock()
	h, seg := e.handlers[handler], e.segment
	e.mu.Unlock()
	if h == nil {
		return fmt.Errorf("%w: no handler registered at %d", ErrBadHandler, handler)
	}
	view, err := placeLocal(cat, seg, payload, off)
	if err != nil {
		return err
	}
	t := &Token{ep: e, src: e.rank, isReq: isReq, active: true, self: true, client: handler >= e.reserved}
	h(t, append([]uint32(nil), args...), view)
	t.active = false
	return nil
}

// placeLocal writes a Long payload into seg and returns the handler's view;
// a Medium payload is copied, as the network path would.
func placeLocal(cat Category, seg, payload []byte, off uint64) ([]byte, error) {
	switch cat {
	case Short:
		return nil, nil
	case Medium:
		return append([]byte{}, payload...), nil
	case Long:
		dst, reason := intoSegment(seg, payload, off)
		switch reason {
		case ReasonNoSegment:
			return nil, ErrNoSegment
		case ReasonBadOffset:
			return nil, fmt.Errorf("%w: %d bytes at offset %d, segment of %d", ErrOutOfSegment, len(payload), off, len(seg))
		}
		return dst, nil
	}
	return nil, nil
}

// handlerView returns the payload a handler sees for a received request or
// reply (nil for Short, the segment slice for Long, written there first), or
// why the message cannot run here.
func (e *Endpoint) handlerView(h Handler, m *Message, seg []byte) ([]byte, Reason) {
	if h == nil {
		return nil, ReasonBadHandler
	}
	switch m.Kind.Category() {
	case Short:
		return nil, ReasonNone
	case Long:
		return intoSegment(seg, m.Payload, m.Offset)
	}
	return m.Payload, ReasonNone
}

// intoSegment copies a Long payload into seg at off and returns the
// handler's view of it, or why it cannot go there.
func intoSegment(seg, payload []byte, off uint64) ([]byte, Reason) {
	if seg == nil {
		return nil, ReasonNoSegment
	}
	if off > uint64(len(seg)) || uint64(len(payload)) > uint64(len(seg))-off {
		return nil, ReasonBadOffset
	}
	dst := seg[off : off+uint64(len(payload))]
	copy(dst, payload)
	return dst, ReasonNone
}

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
	client  bool // runs a handler at or above Config.Reserved
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
	if err := checkMessage(cat, handler, payload, args); err != nil {
		return err
	}
	e := t.ep
	if t.client && handler < e.reserved {
		return fmt.Errorf("%w: a client handler may reply only to client handlers %d..%d (got %d)", ErrBadHandler, e.reserved, NumHandlers-1, handler)
	}
	if t.self {
		t.replied = true
		return e.runLocal(false, cat, handler, payload, off, args)
	}
	m := Message{Header: Header{Kind: replyKind(cat), Handler: uint8(handler), NArgs: uint8(len(args)),
		Tag: t.peer.tag, Src: uint32(e.rank), Slot: t.slot, Seq: t.seq, Offset: off}, Payload: payload}
	copy(m.Args[:], args)
	t.replied = true
	return e.sendReply(t.peer, t.slot, &m)
}

// sendReply stores m as the slot's reply and sends it. Poller only.
func (e *Endpoint) sendReply(p *peerState, slot uint16, m *Message) error {
	if err := storeReply(&p.rx[slot], m); err != nil {
		return err
	}
	e.stats.sent.Add(1)
	return e.tr.Send(p.rx[slot].reply, p.addr)
}

// storeReply encodes m as the reply re-sent for a retransmitted request.
func storeReply(r *rxSlot, m *Message) error {
	var err error
	if r.reply, err = m.Append(r.reply[:0]); err != nil {
		return err
	}
	r.replied = true
	return nil
}

// Poll handles pending messages (at most the receive depth) and due
// retransmissions. It returns at once when another goroutine is polling.
func (e *Endpoint) Poll() error {
	if !e.pollMu.TryLock() {
		return nil
	}
	err := e.pollLocked(nil)
	e.pollMu.Unlock()
	e.notify()
	return err
}

// pollLocked is one poll pass; the caller holds pollMu. A pass ends when
// the socket is empty, after the receive depth, or, for a waiting caller,
// as soon as its condition stop holds: the rest stays in the socket for the
// next pass, and the waiter saves a syscall that would find nothing.
func (e *Endpoint) pollLocked(stop func() bool) error {
	e.passSeq.Add(1)
	defer e.passSeq.Add(1)
	e.pass++
	e.drained = 0
	if err := e.takeRetErr(); err != nil {
		return err
	}
	limit := max(e.recvMax, 1) // set once by SetPeers, before traffic
	bytes := 0
	for i := 0; i < limit; i++ {
		n, from, err := e.tr.Recv(e.rbuf)
		if err == ErrNoData {
			break
		}
		if err != nil {
			return err
		}
		e.drained++
		bytes += n
		e.stats.received.Add(1)
		e.handleDatagram(e.rbuf[:n], from)
		if stop != nil && stop() {
			break
		}
	}
	e.flushAcks(false)
	e.growBuffers(bytes)
	e.fireTimers()
	e.lastPass.Store(int64(e.now()))
	return e.takeRetErr()
}

// takeRetErr returns and clears the pending returned-request error.
func (e *Endpoint) takeRetErr() error {
	if !e.retPending.Load() {
		return nil
	}
	e.mu.Lock()
	err := e.retErr
	e.retErr = nil
	e.retPending.Store(false)
	e.mu.Unlock()
	return err
}

// growBuffers doubles the socket buffers, up to the maximum, when one drain
// took more than half of them (DESIGN.md §6).
func (e *Endpoint) growBuffers(drained int) {
	if e.bufSize == 0 && drained > 0 {
		if rcv, _, err := e.tr.SetBuffers(0); err == nil {
			e.bufSize = max(rcv/2, 1)
		}
	}
	if drained < e.bufSize/2 || e.bufSize >= e.bufMax {
		return
	}
	if rcv, _, err := e.tr.SetBuffers(min(2*e.bufSize, e.bufMax)); err == nil {
		e.bufSize = max(rcv/2, e.bufSize+1)
		e.mu.Lock()
		e.window = windowFor(rcv)
		e.mu.Unlock()
	}
}

// windowFor returns the byte window per peer for a kernel receive buffer of
// rcv bytes as read back (Linux reports twice the size asked for and
// charges each datagram its buffer's true size, a little over its length).
func windowFor(rcv int) int { return rcv * 3 / 4 }

// BufferSize returns the kernel receive buffer size in force, as read back.
func (e *Endpoint) BufferSize() int {
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	rcv, _, _ := e.tr.SetBuffers(0)
	return rcv
}

func (e *Endpoint) handleDatagram(b []byte, from netip.AddrPort) {
	m := &e.msg
	if len(b) > MaxDatagram || Decode(b, m) != nil {
		e.stats.badDatagrams.Add(1)
		return
	}
	if m.Tag != e.myTag {
		e.stats.badTag.Add(1)
		return
	}
	if int(m.Slot) >= e.depth {
		e.stats.badSlot.Add(1)
		return
	}
	e.mu.Lock()
	src := int(m.Src)
	if src >= len(e.addrs) || src == e.rank || e.addrs[src] != from {
		e.mu.Unlock()
		e.stats.badSource.Add(1)
		return
	}
	// Any datagram from the peer shows it alive (see fireTimers).
	e.peerLocked(src).heard = e.now()
	if m.Kind.IsRequest() {
		e.handleRequest(m, src)
	} else {
		e.handleReply(m, src)
	}
}

// handleRequest runs a request exactly once; called with mu held, returns
// with it released.
func (e *Endpoint) handleRequest(m *Message, src int) {
	p := e.peerLocked(src)
	r := &p.rx[m.Slot]
	// Sequence numbers compare in serial-number arithmetic (RFC 1982): the
	// sender may have given up on requests of this slot that never arrived,
	// so a new request can be more than one ahead. A slot has one request
	// in flight at a time, so old copies are never half the space behind.
	switch d := int16(m.Seq - r.seq); {
	case d > 0: // new
	case d == 0: // a retransmission of the last accepted request
		e.mu.Unlock()
		e.stats.dupRequests.Add(1)
		if r.replied && r.resentPass != e.pass {
			r.resentPass = e.pass
			e.stats.replyResends.Add(1)
			e.stats.sent.Add(1)
			_ = e.tr.Send(r.reply, p.addr)
		}
		return
	default:
		e.mu.Unlock()
		e.stats.stale.Add(1)
		return
	}
	r.seq, r.replied = m.Seq, false
	h, seg := e.handlers[m.Handler], e.segment
	e.mu.Unlock()

	payload, reason := e.handlerView(h, m, seg)
	if reason != ReasonNone {
		ret := Message{Header: Header{Kind: KindReturned, Handler: m.Handler, NArgs: 1, Tag: p.tag,
			Src: uint32(e.rank), Slot: m.Slot, Seq: m.Seq}}
		ret.Args[0] = uint32(reason)
		_ = e.sendReply(p, m.Slot, &ret)
		return
	}
	t := &e.tok
	*t = Token{ep: e, peer: p, src: src, slot: m.Slot, seq: m.Seq, isReq: true, active: true, client: int(m.Handler) >= e.reserved}
	h(t, m.Args[:m.NArgs], payload)
	t.active = false
	if !t.replied {
		// Store the automatic reply for a retransmitted request, but send
		// it with the others of this pass (DESIGN.md §5: still the reply).
		auto := Message{Header: Header{Kind: KindAutoReply, Tag: p.tag, Src: uint32(e.rank), Slot: m.Slot, Seq: m.Seq}}
		_ = storeReply(r, &auto)
		e.queueAck(p, m.Slot, m.Seq, m.Flags&FlagAckNow != 0)
	}
}

// queueAck adds an automatic reply to p's batch, sending the batch once it
// holds ackBatch. Poller only.
func (e *Endpoint) queueAck(p *peerState, slot, seq uint16, now bool) {
	if !p.ackQueued {
		p.ackQueued = true
		e.ackq = append(e.ackq, p)
	}
	if len(p.acks) == 0 {
		p.ackSince = e.now()
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
	now := e.now()
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
		pay = binary.LittleEndian.AppendUint16(pay, uint16(a>>16))
		pay = binary.LittleEndian.AppendUint16(pay, uint16(a))
	}
	e.apay = pay
	m := Message{Header: Header{Kind: KindAutoReply, Tag: p.tag, Src: uint32(e.rank),
		Slot: uint16(p.acks[0] >> 16), Seq: uint16(p.acks[0])}, Payload: pay}
	e.abuf, _ = m.Append(e.abuf[:0])
	p.acks, p.ackNow = p.acks[:0], false
	e.stats.sent.Add(1)
	_ = e.tr.Send(e.abuf, p.addr)
}

// handleReply completes a request; called with mu held, returns with it
// released.
func (e *Endpoint) handleReply(m *Message, src int) {
	p := e.peers[src]
	if p == nil {
		e.mu.Unlock()
		e.stats.dupReplies.Add(1)
		return
	}
	now := e.now()
	if m.Kind == KindAutoReply {
		e.ackLocked(p, m.Slot, m.Seq, now)
		for i := range len(m.Payload) / AckPairLen {
			slot, seq := m.AckPair(i)
			if int(slot) >= e.depth {
				e.stats.badSlot.Add(1)
				continue
			}
			e.ackLocked(p, slot, seq, now)
		}
		e.syncDeadlineLocked()
		e.mu.Unlock()
		return
	}
	s := &p.slots[m.Slot]
	kind, handler := s.kind, s.handler
	if !e.ackLocked(p, m.Slot, m.Seq, now) {
		e.mu.Unlock()
		return
	}
	e.syncDeadlineLocked()
	h, seg := e.handlers[m.Handler], e.segment
	e.mu.Unlock()

	switch m.Kind {
	case KindReturned:
		e.returned(Returned{Reason: Reason(m.Args[0]), Dest: src, Addr: p.addr, Kind: kind, Handler: handler})
		return
	}
	payload, bad := e.handlerView(h, m, seg)
	if bad != ReasonNone {
		// The reply cannot run here: hand it to handler 0, refused here.
		e.returned(Returned{Reason: bad, Dest: src, Addr: p.addr, Kind: m.Kind, Handler: m.Handler, Incoming: true})
		return
	}
	t := &e.tok
	*t = Token{ep: e, peer: p, src: src, active: true}
	h(t, m.Args[:m.NArgs], payload)
	t.active = false
}

// ackLocked completes p's request (slot, seq) if it is in flight, and
// reports whether it was; anything else is a duplicate reply.
func (e *Endpoint) ackLocked(p *peerState, slot, seq uint16, now retransmit.Time) bool {
	s := &p.slots[slot]
	if !s.inflight || s.seq != seq {
		e.stats.dupReplies.Add(1)
		return false
	}
	if d, ok := e.tracker.Ack(s.h, now); ok {
		p.rtt.Sample(d)
	}
	e.completeLocked(p, slot)
	return true
}

// returned hands a returned request to handler 0, or keeps it as the error
// of the next poll.
func (e *Endpoint) returned(r Returned) {
	e.stats.returned.Add(1)
	e.mu.Lock()
	h := e.onRet
	if h == nil && e.retErr == nil {
		e.retErr = &ReturnedError{r}
		e.retPending.Store(true)
	}
	e.mu.Unlock()
	if h != nil {
		h(r)
	}
}

// fireTimers retransmits due requests and gives up on expired ones. Poller
// only; sends happen without the lock.
func (e *Endpoint) fireTimers() {
	now := e.now()
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
		s := &p.slots[ref.slot]
		// Waits stay near the RTT while the peer is heard from, and a
		// request is given up only after the peer's silence
		// (retransmit.Config.NextWait, GiveUpAfter).
		if e.tracker.Expire(h, now, p.heard, p.rtt.Timeout(e.rcfg)) {
			s.sending++
			e.resends = append(e.resends, ref)
			continue
		}
		e.completeLocked(p, ref.slot)
		e.gaveUp = append(e.gaveUp, Returned{Reason: ReasonTimeout, Dest: p.rank, Addr: p.addr, Kind: s.kind, Handler: s.handler})
	}
	e.syncDeadlineLocked()
	e.mu.Unlock()
	for _, ref := range e.resends {
		p := e.peers[ref.peer] // peers entries never change once set
		_ = e.tr.Send(p.slots[ref.slot].buf, p.addr)
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

// syncDeadlineLocked publishes the tracker's next deadline for the spin loop.
func (e *Endpoint) syncDeadlineLocked() {
	dl, ok := e.tracker.NextDeadline()
	if !ok {
		dl = math.MaxInt64
	}
	e.deadline.Store(int64(dl))
}

// notify tells goroutines waiting for a poll pass that one ended.
func (e *Endpoint) notify() {
	if e.waiters.Load() == 0 {
		return
	}
	e.waitMu.Lock()
	e.gen++
	e.waitCv.Broadcast()
	e.waitMu.Unlock()
}

// Wake makes a goroutine sleeping in a blocking wait re-check its condition.
// Call it after changing state that a WaitUntil condition reads, from outside
// a handler.
func (e *Endpoint) Wake() {
	if e.blocked.Load() {
		e.tr.Wake()
	}
	e.notify()
}

// WaitUntil services the network until cond returns true: it polls, spinning
// for the configured time, then sleeps in the kernel until a datagram, a
// Wake or the next retransmission deadline. cond is called often and from
// this goroutine only; it must be cheap and must not block.
func (e *Endpoint) WaitUntil(cond func() bool) error {
	for !cond() {
		if err := e.waitOnce(cond); err != nil {
			return err
		}
	}
	return nil
}

// waitOnce makes progress once: a poll pass (spinning, then sleeping when
// nothing arrives) if this goroutine can poll, else waits for the poller's
// next pass.
func (e *Endpoint) waitOnce(cond func() bool) error {
	if e.pollMu.TryLock() {
		err := e.spinOrBlock(cond)
		e.pollMu.Unlock()
		e.notify()
		return err
	}
	e.waiters.Add(1)
	defer e.waiters.Add(-1)
	e.waitMu.Lock()
	if e.pollMu.TryLock() { // the poller left meanwhile
		e.waitMu.Unlock()
		err := e.spinOrBlock(cond)
		e.pollMu.Unlock()
		e.notify()
		return err
	}
	g := e.gen
	for g == e.gen {
		e.waitCv.Wait()
	}
	e.waitMu.Unlock()
	return nil
}

// spinOrBlock polls until something happens or cond holds, spinning for
// e.spin, then sleeps once in the kernel. The caller holds pollMu.
func (e *Endpoint) spinOrBlock(cond func() bool) error {
	start := time.Now()
	for {
		if err := e.pollLocked(cond); err != nil {
			return err
		}
		if cond() {
			// The waiter leaves the network: the replies it holds back
			// must not wait for its next poll, which may be far off.
			e.flushAcks(true)
			return nil
		}
		if e.drained > 0 {
			return nil
		}
		if e.isClosed() {
			return net.ErrClosed
		}
		// Goroutines waiting for this poller's passes are woken by
		// notify when a pass drains something and by Wake when state they
		// read changes elsewhere; an empty pass changes nothing for them,
		// so the poller keeps to its own spin-then-sleep. (Returning to
		// them after every empty pass kept two goroutines handing the
		// poll back and forth without ever sleeping, burning the cores an
		// oversubscribed host's other workers need.)
		if !e.polite && (e.spin < 0 || time.Since(start) < e.spin) {
			continue
		}
		break
	}
	timeout := maxBlock
	e.mu.Lock()
	if dl, ok := e.tracker.NextDeadline(); ok {
		timeout = min(timeout, dl.Sub(e.now()))
	}
	e.mu.Unlock()
	if timeout <= 0 {
		return nil
	}
	e.flushAcks(true) // nothing waits on a sleeping poller
	e.blocked.Store(true)
	defer e.blocked.Store(false)
	if cond() { // a Wake between our check and blocked=true
		return nil
	}
	return e.tr.Wait(timeout)
}

// Fence makes every handler run that has ended happen before what the
// caller does next, in the sense of the Go memory model: it waits for the
// poll pass in progress, if any, to end. A program that learns by other
// means (a barrier, a message to another rank and back) that a handler has
// run on this endpoint, for example one that wrote a Put into the segment,
// calls Fence before reading what the handler wrote; conduit's collectives
// do it for the program.
func (e *Endpoint) Fence() {
	for s := e.passSeq.Load(); s%2 == 1 && e.passSeq.Load() == s; {
		runtime.Gosched()
	}
}

func (e *Endpoint) isClosed() bool { return e.closedFlag.Load() }

// Drain waits until every request this endpoint sent has been answered or
// returned.
func (e *Endpoint) Drain() error {
	return e.WaitUntil(func() bool { return e.Outstanding() == 0 })
}

// Close releases the endpoint's socket. Requests still in flight are
// abandoned; calls after Close return net.ErrClosed.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return net.ErrClosed
	}
	e.closed = true
	e.closedFlag.Store(true)
	e.mu.Unlock()
	e.tr.Wake()
	e.pollMu.Lock()
	err := e.tr.Close()
	e.pollMu.Unlock()
	e.notify()
	return err
}
