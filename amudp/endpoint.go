package amudp

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/amudp/shmem"
	"github.com/udpconduit/udpconduit/retransmit"
)

// Config configures an Endpoint. A zero field means its default.
type Config struct {
	// Rank is this endpoint's rank.
	Rank int
	// Secret is the job secret: every datagram is sealed under keys
	// derived from it (DESIGN.md §4), and one that does not open is
	// dropped.
	Secret []byte
	// HeaderOnlyAuth leaves payloads out of the datagrams' tags
	// (GASNET_AUTH_PAYLOAD=0), for trusted networks: headers, arguments
	// and acknowledgements stay authenticated.
	HeaderOnlyAuth bool
	// Encrypt encrypts every datagram's arguments and payload
	// (GASNET_ENCRYPT); its header stays authenticated in clear.
	Encrypt bool
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
	// ReservedErr is what such a reply to a reserved index wraps (the
	// library's own error for it; nil: ErrBadHandler).
	ReservedErr error
	// Polite makes blocking waits sleep in the kernel as soon as a poll
	// finds nothing, without spinning: for hosts with more workers than
	// cores, and for tests on virtual time (testing/synctest). A transport
	// that can (a Parker) then parks the waiting goroutine in the Go
	// runtime's poller rather than blocking a thread in a system call.
	Polite bool
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
	buf       []byte // the sealed request, kept for retransmission
	// prepared: taken by a Prepared request not yet committed, its
	// payload written into buf by the caller; prepGen counts the slot's
	// prepared requests.
	prepared bool
	prepGen  uint32
	// replyNonce is the nonce of the last reply accepted for this slot;
	// a reply with a nonce no greater is a replay.
	replyNonce uint64
	// epoch is the peer's epoch (peerState.epoch) when every copy of
	// the request went to the same address of the peer, else 0: only then
	// does its reply confirm that address.
	epoch uint32
}

// rxSlot is one credit instance of a peer, at the receiver.
type rxSlot struct {
	seq      uint16
	replied  bool
	resentAt retransmit.Time // when the stored reply was last sent again
	reply    []byte          // the sealed reply, re-sent for a retransmitted request
	// nonce is the nonce of the request last accepted in this slot (seq):
	// a new request's is greater, a retransmission's the same.
	nonce uint64
}

// peerState is allocated on first contact (DESIGN.md §6).
type peerState struct {
	rank int
	// dst is where datagrams to the peer go: the table's address until a
	// Router routes the peer (route.go). Written under mu; read by anyone.
	dst atomic.Pointer[netip.AddrPort]
	// The peer's route and where the walk along it is (route.go); mu.
	route     []netip.AddrPort
	try       int
	movedAt   retransmit.Time // when dst last moved along the route
	routed    bool            // the router was asked
	restarts  int             // restartLocked's restarts of the walk
	hasRouter bool            // the peer's datagrams are flagged wire.FlagRouted
	confirmed bool            // a reply came back: dst carries traffic
	epoch     uint32          // counts dst's changes, from 1
	from      netip.AddrPort  // the last address, not the table's, a datagram came from
	rtt       retransmit.RTT
	heard     retransmit.Time // when a datagram from the peer last arrived (0: never)
	// maxNonce is the greatest nonce of the peer's datagrams that opened:
	// only one sealed later updates heard.
	maxNonce uint64
	// probedAt is when a retransmission last went to the peer, and probe
	// the request it carried: while the peer has sent nothing since,
	// that request alone is retransmitted (see fireTimers).
	probedAt retransmit.Time
	probe    int
	pool     slotPool
	bytes    byteWindow
	// The per-slot state, in chunks of slotChunk allocated on first use
	// (a peer that never has more than a few requests outstanding costs
	// one chunk, not the network depth's worth). The chunk tables have a
	// fixed length, so a chunk, once set, is read without the lock.
	slots []*[slotChunk]reqSlot // under mu
	rx    []*[slotChunk]rxSlot  // owned by the poller

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
	// handling counts the handlers running now on senders' goroutines
	// (runLocalHandler, runReturned), polledHandling those running on the
	// poller's (runHandler); see inHandler.
	handling       atomic.Int32
	polledHandling atomic.Uint64
	tr             Transport
	viewer         Viewer // tr, if it is a Viewer
	// shared is tr, if it is a Shared transport: the direct path to
	// co-located ranks (direct.go), through lanes (one per rank, made on
	// first use), which laneList lists (replaced whole, under mu).
	shared   *Shared
	lanes    atomic.Pointer[[]atomic.Pointer[lane]]
	laneList atomic.Pointer[[]*lane]
	rank     int
	key      *wire.Key
	// nonces counts the datagrams this endpoint sealed: each takes the
	// next value as its nonce (wire.Key.Seal).
	nonces atomic.Uint64
	// prepIDs counts the replies prepared (Token.PrepareReply): each
	// takes the next value as its id.
	prepIDs  atomic.Uint64
	depth    int
	spin     time.Duration
	polite   bool
	reserved int
	// reservedErr is Config.ReservedErr, or ErrBadHandler.
	reservedErr error
	rcfg        retransmit.Config
	origin      time.Time
	bufMax      int
	// interrupt, when set, makes the waits inside the endpoint give up
	// (SetInterrupt).
	interrupt atomic.Pointer[func() bool]
	// onFatal is SetFatalHandler's handler, which fatalRan says has run.
	onFatal  atomic.Pointer[func(error)]
	fatalRan atomic.Bool

	// table holds the handlers and the segment, replaced whole (under mu)
	// by Register and SetSegment, read without a lock.
	table atomic.Pointer[dispatch]

	mu      sync.Mutex // guards the fields below, up to pollMu
	onRet   ReturnedHandler
	retErr  error
	addrs   []netip.AddrPort
	peers   []*peerState
	tracker *retransmit.Tracker
	owner   []slotRef // tracker handle -> slot
	send    sendCredits
	recvMax int
	window  int                                   // byte window per peer (0: unlimited)
	views   atomic.Pointer[func(rank int) []byte] // SetPeerSegments
	closed  bool
	router  Router
	routing atomic.Bool // router set: datagrams flagged wire.FlagRouted (read without a lock)

	pollMu sync.Mutex // held by the poller; guards the fields below
	rbuf   []byte
	msg    wire.Message
	tok    Token
	// tokOpen is the id of the reply prepared in tok's handler, until it
	// is committed or released or the handler returns (Token.open).
	tokOpen atomic.Uint64
	pass    uint64
	resends []slotRef
	gaveUp  []Returned
	drained int
	bufSize int
	ackq    []*peerState // peers with automatic replies waiting
	backlog []backlogged // direct replies waiting for room (direct.go)
	flushes uint64       // flushBacklog calls
	abuf    []byte       // encoded batch of automatic replies
	apay    []byte

	// holdAuto says that the spin in progress (spinPolls) holds
	// automatic direct replies in runs (autoReply), autoLanes the lanes
	// listed with a run since the last flushAutos, and autoSince the poll
	// clock (the last full pass's) when the first of them was listed.
	holdAuto  bool
	autoLanes []*lane
	autoSince retransmit.Time
	autoPay   [wire.AckPairLen]byte

	waitMu  sync.Mutex
	waitCv  *sync.Cond
	gen     uint64
	waiters atomic.Int32
	blocked atomic.Bool
	sleeps  atomic.Uint64 // the poller's sleeps in the kernel (spinOrBlock)
	// The background poller (Progress): fg counts the goroutines that
	// wait (WaitUntil, a request waiting for credit), which it steps
	// aside for; bgPolling says that it holds pollMu.
	fg        atomic.Int32
	bgPolling atomic.Bool
	waitEnd   atomic.Int64 // when a wait last ended (e.now()), while a background poller runs
	bgActive  atomic.Bool
	// Lock-free views for the spin loop: closed, a pending returned error,
	// and the earliest retransmission deadline (math.MaxInt64: none).
	closedFlag atomic.Bool
	retPending atomic.Bool
	deadline   atomic.Int64
	lastPass   atomic.Int64 // the clock of the last poll pass at its end: read then, or at its start when nothing needed it again (e.now)
	// clock is the poller's reading of e.now(), taken when a poll pass
	// starts and after each datagram it handles: the pass's timestamps
	// (a peer heard, a round-trip sample, acks' ages, due timers) use it
	// rather than read the clock each (a read is not free on a VM).
	// Poller only.
	clock retransmit.Time
	// passSeq is odd while a poll pass runs and even between passes; its
	// updates (release stores: the poller alone writes it) give Fence a
	// happens-before edge over every handler run in a pass that ended.
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
		tr: tr, rank: cfg.Rank,
		depth: cfg.NetworkDepth, spin: cfg.Spin, polite: cfg.Polite, reserved: cfg.Reserved, reservedErr: cmp.Or(cfg.ReservedErr, ErrBadHandler), rcfg: cfg.Retransmit, origin: time.Now(),
		bufMax:  cfg.SocketBufferMax,
		tracker: retransmit.NewTracker(cfg.Retransmit),
		rbuf:    make([]byte, MaxDatagram+1),
	}
	mode := wire.AuthPayload
	switch {
	case cfg.Encrypt:
		mode = wire.Encrypt
	case cfg.HeaderOnlyAuth:
		mode = wire.AuthHeader
	}
	e.key = wire.NewKey(cfg.Secret, mode)
	// Nonces count from the wall clock's nanoseconds: an endpoint opened
	// again with the same rank and secret (a program's restart) starts
	// above every nonce the one before it could have taken.
	e.nonces.Store(uint64(time.Now().UnixNano()))
	e.viewer, _ = tr.(Viewer)
	e.shared, _ = tr.(*Shared)
	if p, ok := tr.(Parker); ok && cfg.Polite {
		if err := p.SetPark(true); err != nil {
			return nil, err
		}
	}
	if rcv, _, err := tr.SetBuffers(0); err == nil {
		e.window = windowFor(rcv)
	}
	e.send.limit = cfg.SendDepth
	e.recvMax = cfg.RecvDepth
	e.waitCv = sync.NewCond(&e.waitMu)
	e.table.Store(new(dispatch))
	e.laneList.Store(new([]*lane))
	e.deadline.Store(math.MaxInt64)
	if e.shared != nil {
		e.shared.directSent = e.directSent
	}
	return e, nil
}

// Transport returns the Transport the endpoint sends and receives on.
func (e *Endpoint) Transport() Transport { return e.tr }

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
	lanes := make([]atomic.Pointer[lane], len(addrs))
	e.lanes.Store(&lanes)
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
// addrs' values, and known ones must agree. Until then a request to a rank
// whose address is unknown is refused (ErrNoAddress), and a datagram from
// one is taken, its source address becoming the rank's (see learnLocked),
// which addrs must then confirm: either the same address, or one of the
// rank's that the Router knows, in which case the table's address replaces
// it (datagrams already going to the learned one keep going there until
// a route moves them).
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
		case e.addrs[i] == a:
		case e.router != nil && e.router.Knows(i, e.addrs[i]):
			e.addrs[i] = a // learned at another of i's addresses
		default:
			return fmt.Errorf("amudp: rank %d is at %v, not %v", i, e.addrs[i], a)
		}
	}
	return nil
}

// learnLocked takes from as the address of rank src, whose address is not
// known yet, when a datagram from src has come from there: its tag, keyed
// by the job's secret, says src sent it. So a rank that has the whole
// address table and sends to one that is still waiting for it (the table
// is relayed down a tree at startup) is answered at once instead of
// retransmitting until the table comes; FillPeers then checks the address
// against the table. It reports whether it took it. mu held.
func (e *Endpoint) learnLocked(src int, from netip.AddrPort) bool {
	if e.addrs[src].IsValid() || !from.IsValid() {
		return false
	}
	e.addrs[src] = from // no peer state yet: it comes with a known address
	return true
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
	return e.RegisterAll(map[int]Handler{index: h})
}

// RegisterAll installs each handler of hs at its index, as Register does,
// in one step: the poller reads the table lock-free from a snapshot, which
// each call copies once. An index out of range installs none of them.
func (e *Endpoint) RegisterAll(hs map[int]Handler) error {
	for index := range hs {
		if index < 1 || index >= NumHandlers {
			return fmt.Errorf("%w (got %d)", ErrBadHandler, index)
		}
	}
	e.mu.Lock()
	t := *e.table.Load()
	for index, h := range hs {
		t.handlers[index] = h
	}
	e.table.Store(&t)
	e.mu.Unlock()
	return nil
}

// SetInterrupt sets f, which the waits inside the endpoint (a request
// waiting for credit, Drain) consult while they wait: once it returns true
// they give up with ErrInterrupted. Call Wake when its answer changes. f
// runs on the waiting goroutine; it must be cheap and must not block.
func (e *Endpoint) SetInterrupt(f func() bool) { e.interrupt.Store(&f) }

// interrupted reports whether the waits inside the endpoint must give up.
func (e *Endpoint) interrupted() bool {
	f := e.interrupt.Load()
	return f != nil && (*f)()
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
	t := *e.table.Load()
	t.segment = seg
	e.table.Store(&t)
	e.mu.Unlock()
}

// SetPeerSegments gives the endpoint view, which returns a peer's segment
// as this process maps it, or nil (peers sharing memory, conduit's
// LocalView). A Long request or reply to such a peer is written straight
// into that segment before its datagram goes, and the datagram carries no
// payload (wire.FlagInPlace): one copy instead of three. Its handler sees
// the same bytes at the same place.
func (e *Endpoint) SetPeerSegments(view func(rank int) []byte) { e.views.Store(&view) }

// placeInPeer writes a Long payload straight into rank's segment when
// this process maps it (SetPeerSegments) and the payload fits there, and
// reports whether it did.
func (e *Endpoint) placeInPeer(rank int, payload []byte, off uint64) bool {
	f := e.views.Load()
	if f == nil || len(payload) == 0 {
		return false
	}
	v := (*f)(rank)
	if v == nil || off > uint64(len(v)) || uint64(len(payload)) > uint64(len(v))-off {
		return false
	}
	if &v[off] != &payload[0] { // a Prepared request's payload is there already
		shmem.Copy(v[off:], payload)
	}
	return true
}

// Segment returns the attached segment.
func (e *Endpoint) Segment() []byte { return e.table.Load().segment }

// dispatch is what a message's handling reads: the handler table and the
// segment (Endpoint.table).
type dispatch struct {
	handlers [NumHandlers]Handler
	segment  []byte
}

// peerLocked returns rank's state, allocating it on first contact.
func (e *Endpoint) peerLocked(rank int) *peerState {
	p := e.peers[rank]
	if p == nil {
		chunks := (e.depth + slotChunk - 1) / slotChunk
		p = &peerState{rank: rank, probe: -1, pool: newSlotPool(e.depth),
			slots: make([]*[slotChunk]reqSlot, chunks), rx: make([]*[slotChunk]rxSlot, chunks)}
		a := e.addrs[rank]
		p.dst.Store(&a)
		p.epoch = 1
		e.peers[rank] = p
	}
	return p
}

// slotChunk is how many slots' state a peer allocates at a time.
const slotChunk = 16

// req returns the state of request slot s, or nil when no request has
// used the slot (a slot named by a reply that this endpoint never sent).
// mu held, or s in flight.
func (p *peerState) req(s uint16) *reqSlot {
	c := p.slots[int(s)/slotChunk]
	if c == nil {
		return nil
	}
	return &c[int(s)%slotChunk]
}

// newReq returns the state of request slot s, just acquired. mu held.
func (p *peerState) newReq(s uint16) *reqSlot { return chunked(p.slots, s) }

// rxAt returns the receiver's state of slot s (below the depth). Poller
// only.
func (p *peerState) rxAt(s uint16) *rxSlot { return chunked(p.rx, s) }

// chunked returns slot s's entry of a chunk table, allocating its chunk on
// first use.
func chunked[T any](tab []*[slotChunk]T, s uint16) *T {
	c := &tab[int(s)/slotChunk]
	if *c == nil {
		*c = new([slotChunk]T)
	}
	return &(*c)[int(s)%slotChunk]
}

func (e *Endpoint) isClosed() bool { return e.closedFlag.Load() }

// Drain waits until every request this endpoint sent has been answered or
// returned, or the interrupt function (SetInterrupt) says to give up.
func (e *Endpoint) Drain() error {
	// Whether the last check gave up: afterwards another goroutine may have
	// sent more, so Outstanding then says nothing about this wait.
	cut := false
	err := e.WaitUntil(func() bool {
		cut = false
		if e.Outstanding() == 0 {
			return true
		}
		cut = e.interrupted()
		return cut
	})
	if err == nil && cut {
		err = ErrInterrupted
	}
	return err
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
