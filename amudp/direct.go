package amudp

// This file is the direct path between ranks that share memory: requests
// and replies to a co-located rank go into its inbox (Shared) as records
// outside the datagram protocol, marked wire.FlagDirect. The inbox neither
// loses, repeats nor forges what a rank of the job put there, so a direct
// message needs none of the protocol's per-message work: no MAC, no
// sequence number, no retransmission timer, no acknowledgement, no lock.
// Credits stay: a rank has at most the network depth of direct requests
// outstanding to each peer (lane.out), and each request is answered by
// exactly one direct reply (the handler's, an automatic one, or a returned
// message), which gives the credit back. A request that finds the peer's
// inbox full makes progress (its own inbox may hold what the peer waits
// for) and tries again; a reply, which a handler sends and which must not
// wait, goes to a backlog that each poll pass retries first (at most the
// network depth per peer, as each answers a request of that peer's credit).
//
// A peer takes direct messages once its Shared.SetInboxes has run (it can
// then answer each sender: shmring.Ring.Ready); until then, and to every
// rank of another host, messages take the datagram protocol, as does a
// datagram that Shared.Send puts into an inbox. The two paths coexist for
// a pair: each message is answered on the path it came by.

import (
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/retransmit"
)

// lane is the direct path to one co-located rank.
type lane struct {
	rank  int
	addr  netip.AddrPort
	ring  *shmring.Ring
	out   atomic.Int32  // direct requests to rank not answered yet
	sends atomic.Uint32 // direct requests sent to rank, for pollFirstEvery
	// last is the kind and handler (kind<<8 | handler) of the last request
	// sent to rank, which a give-up reports (see checkLanes).
	last atomic.Uint32

	// The poller's watch over the answers (checkLanes): replies counts
	// those that came, seen is replies as the last check saw it, and
	// stalled is when requests were first seen outstanding with no reply
	// since (0: not stalled).
	replies, seen uint64
	stalled       retransmit.Time
}

// pollFirstEvery: a direct request polls first (DESIGN.md §3) when this
// rank's inbox holds a record, which costs two loads to see, and else, in
// a job with ranks on other hosts (whose datagrams only a full poll pass
// reads), one time in pollFirstEvery, by the clock's rule for the
// datagram path.
const pollFirstEvery = 64

// directHead is room for a direct record's head: the message header and
// its arguments. The record carries nothing else: up to 4 arguments, a
// Short message fills one cache line with the ring's record header.
type directHead [wire.HeaderLen + 4*MaxArgs]byte

// backlogged is a direct reply that found its peer's inbox full.
type backlogged struct {
	l   *lane
	rec []byte // head and payload
}

// directBacklogWait bounds a poller's sleep while replies wait in the
// backlog: nothing wakes it when the peer's inbox empties.
const directBacklogWait = 100 * time.Microsecond

// directOutstanding is the number of direct requests not answered yet.
func (e *Endpoint) directOutstanding() int {
	n := 0
	for _, l := range *e.laneList.Load() {
		n += int(l.out.Load())
	}
	return n
}

// laneTo returns the direct path to rank, or nil when messages to it take
// the datagram protocol (no shared memory, its inbox not ready, not known).
func (e *Endpoint) laneTo(rank int) *lane {
	if e.shared == nil {
		return nil
	}
	ls := e.lanes.Load()
	if ls == nil || rank < 0 || rank >= len(*ls) || rank == e.rank {
		return nil
	}
	slot := &(*ls)[rank]
	if l := slot.Load(); l != nil {
		return l
	}
	e.mu.Lock()
	addr := e.addrs[rank]
	e.mu.Unlock()
	if !addr.IsValid() {
		return nil
	}
	r := e.shared.directRing(addr)
	if r == nil {
		return nil
	}
	l := &lane{rank: rank, addr: addr, ring: r}
	e.mu.Lock()
	defer e.mu.Unlock()
	if old := slot.Load(); old != nil {
		return old
	}
	slot.Store(l)
	all := append(*e.laneList.Load(), l)
	e.laneList.Store(&all)
	return l
}

// directMessage fills m's header for a direct message from this rank.
func (e *Endpoint) directMessage(m *wire.Message, kind wire.Kind, handler int, payload []byte, off uint64, args []uint32) {
	m.Header = wire.Header{Kind: kind, Flags: wire.FlagDirect, Handler: uint8(handler), NArgs: uint8(len(args)),
		Src: uint32(e.rank), Offset: off}
	m.Payload = payload
	copy(m.Args[:], args)
}

// directUser fills m as a direct request or reply (kind) of the program's
// to rank: a Long payload goes straight into rank's segment when this
// process maps it (wire.FlagInPlace), else in the record.
func (e *Endpoint) directUser(m *wire.Message, rank int, kind wire.Kind, handler int, payload []byte, off uint64, args []uint32) {
	n := len(payload)
	inPlace := kind.Category() == Long && e.placeInPeer(rank, payload, off)
	if inPlace {
		payload = nil
	}
	e.directMessage(m, kind, handler, payload, off, args)
	if inPlace {
		m.Flags, m.Len = m.Flags|wire.FlagInPlace, uint32(n)
	}
}

// encodeDirect writes the head of m's record into h and returns it.
func (e *Endpoint) encodeDirect(h *directHead, m *wire.Message) ([]byte, error) {
	return m.AppendHead(h[:0])
}

// requestDirect sends a request to l's rank through its inbox, waiting
// for credit and for room there.
func (e *Endpoint) requestDirect(l *lane, cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if e.isClosed() {
		return net.ErrClosed
	}
	if !e.shared.inbox.ring.Empty() || !e.shared.allShared() && l.sends.Add(1)%pollFirstEvery == 0 &&
		time.Duration(int64(e.now())-e.lastPass.Load()) >= pollFirstGap {
		if e.pollMu.TryLock() {
			err := e.pollLocked(nil)
			e.pollMu.Unlock()
			e.notify()
			if err != nil {
				return err
			}
		}
	}
	for l.out.Add(1) > int32(e.depth) {
		l.out.Add(-1)
		if err := e.directWait(func() bool { return l.out.Load() < int32(e.depth) }); err != nil {
			return err
		}
	}
	var m wire.Message
	e.directUser(&m, l.rank, wire.RequestKind(cat), handler, payload, off, args)
	if last := uint32(m.Kind)<<8 | uint32(handler); l.last.Load() != last {
		l.last.Store(last)
	}
	var h directHead
	head, err := e.encodeDirect(&h, &m)
	for err == nil && !e.shared.pushDirect(l.ring, l.addr, head, m.Payload) {
		err = e.directWait(nil)
	}
	if err != nil {
		l.out.Add(-1)
		return err
	}
	return nil
}

// directWait makes progress once for a direct request that waits (for
// credit, cond, or room in an inbox, cond nil), or says why it must give up.
func (e *Endpoint) directWait(cond func() bool) error {
	if e.isClosed() {
		return net.ErrClosed
	}
	if e.interrupted() {
		return ErrInterrupted
	}
	if cond == nil {
		// One poll pass: the peer drains its inbox meanwhile.
		cond = func() bool { return true }
		if e.polite {
			runtime.Gosched()
		}
	}
	stop := func() bool { return cond() || e.interrupted() || e.isClosed() }
	e.fg.Add(1)
	err := e.waitOnce(stop)
	e.leaveWait()
	return err
}

// replyDirect answers a direct request of l's rank (Poller only: handlers
// run there): into its inbox, or into the backlog when that is full.
func (e *Endpoint) replyDirect(l *lane, m *wire.Message) error {
	var h directHead
	head, err := e.encodeDirect(&h, m)
	if err != nil {
		return err
	}
	if len(e.backlog) == 0 && e.shared.pushDirect(l.ring, l.addr, head, m.Payload) {
		return nil
	}
	var rec []byte
	if n := len(e.backlog); n < cap(e.backlog) {
		rec = e.backlog[:n+1][n].rec[:0] // reuse a record buffer
	}
	rec = append(append(rec, head...), m.Payload...)
	e.backlog = append(e.backlog, backlogged{l: l, rec: rec})
	return nil
}

// flushBacklog puts backlogged replies into their inboxes, in order, as
// far as they fit. Poller only.
func (e *Endpoint) flushBacklog() {
	i := 0
	for ; i < len(e.backlog); i++ {
		b := &e.backlog[i]
		if !e.shared.pushDirect(b.l.ring, b.l.addr, b.rec, nil) {
			break
		}
	}
	if i == 0 {
		return
	}
	// Move the waiting entries to the front, and the sent ones' record
	// buffers behind them for reuse: each buffer stays in one entry.
	n := len(e.backlog) - i
	for j := range n {
		e.backlog[j], e.backlog[i+j] = e.backlog[i+j], e.backlog[j]
	}
	for j := n; j < len(e.backlog); j++ {
		e.backlog[j].l = nil
	}
	e.backlog = e.backlog[:n]
}

// handleDirect runs a direct message from the inbox. Poller only.
func (e *Endpoint) handleDirect(b []byte) {
	m := &e.msg
	if wire.Decode(b, m) != nil || m.Flags&wire.FlagDirect == 0 {
		e.stats.badDatagrams.Add(1)
		return
	}
	src := int(m.Src)
	l := e.laneTo(src)
	if l == nil {
		e.stats.badSource.Add(1)
		if m.Kind.IsRequest() && e.isPeer(src) {
			// A rank of the job sent it, and waits for the answer that
			// this rank cannot give.
			e.fail(fmt.Errorf("amudp: rank %d sent a request through shared memory, but rank %d cannot map its inbox to answer", src, e.rank))
		}
		return
	}
	tab := e.table.Load()
	h, seg := tab.handlers[m.Handler], tab.segment
	if m.Kind.IsRequest() {
		payload, reason := e.handlerView(h, m, seg)
		var out wire.Message
		if reason != ReasonNone {
			e.directMessage(&out, KindReturned, int(m.Handler), nil, 0, nil)
			out.NArgs, out.Args[0], out.Slot = 1, uint32(reason), uint16(m.Kind)
			_ = e.replyDirect(l, &out)
			return
		}
		t := &e.tok
		*t = Token{ep: e, lane: l, src: src, isReq: true, active: true, client: int(m.Handler) >= e.reserved}
		e.runHandler(h, t, m.Args[:m.NArgs], payload)
		t.active = false
		if !t.replied {
			e.directMessage(&out, KindAutoReply, 0, nil, 0, nil)
			_ = e.replyDirect(l, &out)
		}
		return
	}
	if l.out.Add(-1) < 0 { // no request of this rank's waits for it
		l.out.Add(1)
		e.stats.dupReplies.Add(1)
		return
	}
	l.replies++
	switch m.Kind {
	case KindAutoReply:
		return
	case KindReturned:
		e.returned(Returned{Reason: Reason(m.Args[0]), Dest: src, Addr: l.addr, Kind: Kind(m.Slot), Handler: m.Handler})
		return
	}
	e.runReply(h, m, seg, src, l.addr, nil)
}

// isPeer reports whether rank is another rank of the job.
func (e *Endpoint) isPeer(rank int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return rank >= 0 && rank < len(e.addrs) && rank != e.rank
}

// fail keeps err as the error of the next poll, when none is kept (see
// takeRetErr).
func (e *Endpoint) fail(err error) {
	e.mu.Lock()
	if e.retErr == nil {
		e.retErr = err
		e.retPending.Store(true)
	}
	e.mu.Unlock()
}

// quickPasses is how many quick passes (directPass) a spinning poller makes
// between two full ones (pollLocked) when every peer shares memory with
// it; quickPassesMixed when some do not, whose datagrams only full passes
// read.
const (
	quickPasses      = 64
	quickPassesMixed = 4
)

// directPass runs the direct messages at the head of the inbox, until it
// holds none or stop returns true, without the rest of a poll pass (the
// clock, the socket, timers), and returns how many it ran. The caller
// holds pollMu.
func (e *Endpoint) directPass(stop func() bool) int {
	if len(e.backlog) > 0 {
		e.flushBacklog()
	}
	d, ok := e.shared.peekDirect()
	if !ok {
		return 0
	}
	e.passSeq.Add(1)
	n := 0
	for ok {
		n++
		e.handleDirect(d)
		e.shared.Release()
		if stop != nil && stop() {
			break
		}
		d, ok = e.shared.peekDirect()
	}
	e.passSeq.Add(1)
	return n
}

// checkLanes gives up on the direct requests to a rank that has answered
// none of them for the datagram protocol's give-up time
// (retransmit.Config.GiveUpAfter): a rank stopped, or stuck in a handler
// or a computation that never polls. Each is returned as undeliverable
// (ReasonTimeout) naming the rank, with the kind and handler of the last
// request sent to it (the direct path does not keep the others'), and its
// credit is freed; an answer that comes later is counted as a duplicate
// reply. Poller only, at the end of a full pass.
func (e *Endpoint) checkLanes() {
	now := e.clock
	for _, l := range *e.laneList.Load() {
		if l.out.Load() <= 0 {
			l.stalled = 0
			continue
		}
		if l.replies != l.seen || l.stalled == 0 {
			l.seen, l.stalled = l.replies, now
			continue
		}
		if now.Sub(l.stalled) < e.rcfg.GiveUpAfter() {
			continue
		}
		l.stalled = 0
		last := l.last.Load()
		for n := l.out.Swap(0); n > 0; n-- {
			e.returned(Returned{Reason: ReasonTimeout, Dest: l.rank, Addr: l.addr, Kind: Kind(last >> 8), Handler: uint8(last)})
		}
	}
}
