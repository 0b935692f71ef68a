package amudp

// This file is the direct path between ranks that share memory: requests
// and replies to a co-located rank go into its inbox (Shared) as records
// outside the datagram protocol, marked wire.FlagDirect. The inbox neither
// loses, repeats nor forges what a rank of the job put there, so a direct
// message needs none of the protocol's per-message work: no MAC, no
// sequence number, no retransmission timer, no acknowledgement, no lock.
// Credits stay: a rank has at most the network depth of direct requests
// outstanding to each peer (lane.state), each numbered (a per-lane 32-bit
// number, in the header's Slot and Seq), and each is answered by exactly
// one direct reply carrying its number (the handler's, an automatic one,
// or a returned message), which gives the credit back. A request that
// finds the peer's inbox full makes progress (full poll passes: its own
// inbox may hold what the peer waits for) and tries again; a reply, which
// a handler sends and which must not wait, goes to a backlog that each
// poll pass retries first, in order per peer (at most the network depth
// per peer, as each answers a request of that peer's credit). Requests to
// a peer that answers none for the give-up time are returned (checkLanes),
// and a later answer to one of them is a duplicate: it runs no handler.
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

	"github.com/udpconduit/udpconduit/amudp/internal/release"
	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/retransmit"
)

// lane is the direct path to one co-located rank.
type lane struct {
	rank int
	addr netip.AddrPort
	ring *shmring.Ring
	// state packs the number of the last direct request to rank reserved
	// (high 32 bits) and how many are outstanding (low 32 bits), so that
	// a give-up takes exactly the requests reserved before it.
	state atomic.Uint64
	// wraps counts the request numbers that went past 2^32-1, and unsent
	// the requests reserved and never pushed: the requests pushed into
	// rank's inbox are wraps·2^32 + the last number − unsent (sent), with
	// no atomic addition of their own.
	wraps, unsent atomic.Uint64
	// floor is the number of the last request given up, or of the last
	// reserved when none was outstanding (checkLanes): an answer to a
	// request at or below it is late, a duplicate.
	floor atomic.Uint32
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
	// queued counts this lane's replies in the backlog, and blocked is
	// the flush (Endpoint.flushes) that last found its inbox full. Poller
	// only.
	queued  int
	blocked uint64
	// A run of consecutive requests of rank whose handlers did not
	// reply, answered in one record when it ends (autoReply): autoN of
	// them, autoFirst..autoLast. Poller only.
	autoFirst, autoLast uint32
	autoN               int
	autoListed          bool // in Endpoint.autoLanes
}

// outstanding is the number of direct requests to the lane's rank not
// answered yet.
func (l *lane) outstanding() int { return int(uint32(l.state.Load())) }

// reserve takes a credit for a direct request and returns its number and
// how many are outstanding with it, or ok false when depth requests are.
func (l *lane) reserve(depth int) (num uint32, out int, ok bool) {
	for {
		v := l.state.Load()
		if int(uint32(v)) >= depth {
			return 0, 0, false
		}
		if l.state.CompareAndSwap(v, v+1<<32+1) {
			num := uint32(v>>32) + 1
			if num == 0 {
				l.wraps.Add(1)
			}
			return num, int(uint32(v)) + 1, true
		}
	}
}

// sent is the number of direct requests pushed into the rank's inbox,
// exact while none is being sent (during a request whose number wraps to
// 0 it may be 2^32 high).
func (l *lane) sent() uint64 {
	// unsent first: each request it counts was reserved before, so the
	// number loaded next covers it (read the other way, a request
	// reserved and failed in between would make the count wrap below 0).
	unsent := l.unsent.Load()
	last := l.state.Load() >> 32
	return l.wraps.Load()<<32 + last - unsent
}

// settle gives back the credit of request num, answered or never sent,
// and reports whether it was outstanding: false for one given up, one
// not reserved yet, or when none is outstanding (a bogus answer).
func (l *lane) settle(num uint32) bool { return l.settleRun(num, num) == 1 }

// settleRun gives back the credits of requests first..last, answered in
// one record (autoReply), and returns how many were outstanding: those
// above the floor (the others were given up), none when the run is not
// one of up to depth requests reserved and outstanding (a bogus answer).
func (l *lane) settleRun(first, last uint32) int {
	if d := last - first; d >= maxRun {
		return 0
	}
	if f := l.floor.Load(); int32(first-f) <= 0 {
		if int32(last-f) <= 0 {
			return 0
		}
		first = f + 1
	}
	k := last - first + 1
	for {
		v := l.state.Load()
		if uint32(v) < k || int32(last-uint32(v>>32)) > 0 {
			return 0
		}
		if l.state.CompareAndSwap(v, v-uint64(k)) {
			return int(k)
		}
	}
}

// giveUp takes every outstanding request off the lane and returns how
// many there were; answers to them become late (floor). Poller only.
func (l *lane) giveUp() int {
	for {
		v := l.state.Load()
		if uint32(v) == 0 {
			return 0
		}
		// The floor first: a request whose send fails meanwhile, at or
		// below it, leaves its credit to this give-up.
		l.floor.Store(uint32(v >> 32))
		if l.state.CompareAndSwap(v, v&^0xffffffff) {
			return int(uint32(v))
		}
	}
}

// directNum returns the request number a direct message's header carries.
func directNum(m *wire.Message) uint32 { return uint32(m.Slot)<<16 | uint32(m.Seq) }

// pollFirstEvery: a direct request polls first (DESIGN.md §3, pollFirst)
// when this rank's inbox holds a record, which costs two loads to see, and else, in
// a job with ranks on other hosts (whose datagrams only a full poll pass
// reads), one time in pollFirstEvery, by the clock's rule for the
// datagram path.
const pollFirstEvery = 64

// pollFirst is a direct request's poll before it goes (pollFirstEvery):
// the direct messages at the head of the inbox (a flood's replies) take a
// quick pass (directPass), and what stays there (a datagram) a full one.
func (e *Endpoint) pollFirst(l *lane) error {
	if e.shared.inbox.ring.Empty() {
		if e.shared.allShared() || l.sends.Add(1)%pollFirstEvery != 0 ||
			time.Duration(int64(e.now())-e.lastPass.Load()) < pollFirstGap {
			return nil
		}
		return e.Poll()
	}
	if e.pollMu.TryLock() {
		e.directPass(nil)
		e.pollMu.Unlock()
		e.notify()
		if e.shared.inbox.ring.Empty() {
			return e.takeRetErr() // a handler's (fail), as a full pass returns it
		}
	}
	return e.Poll()
}

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
		n += l.outstanding()
	}
	return n
}

// laneTo returns the direct path to rank, or nil when messages to it take
// the datagram protocol (no shared memory, its inbox not ready, not known).
func (e *Endpoint) laneTo(rank int) *lane { return e.lane(rank, true) }

// lane returns the direct path to rank, made on first use; ready: only
// once rank's inbox takes direct messages (a rank that sent one has set
// its inboxes, though perhaps not yet the mark: false).
func (e *Endpoint) lane(rank int, ready bool) *lane {
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
	r := e.shared.directRing(addr, ready)
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

// directHeader is the header of a direct message from this rank, request
// number num (a request's, or the one a reply answers), with nargs
// arguments.
func (e *Endpoint) directHeader(num uint32, kind wire.Kind, handler int, off uint64, nargs int) wire.Header {
	return wire.Header{Kind: kind, Flags: wire.FlagDirect, Handler: uint8(handler), NArgs: uint8(nargs),
		Src: uint32(e.rank), Slot: uint16(num >> 16), Seq: uint16(num), Offset: off}
}

// directMessage fills m as a direct message of the library's (an
// automatic reply, a returned request): directHeader's, with payload
// and args.
func (e *Endpoint) directMessage(m *wire.Message, num uint32, kind wire.Kind, handler int, payload []byte, off uint64, args []uint32) {
	m.Header = e.directHeader(num, kind, handler, off, len(args))
	m.Payload = payload
	copy(m.Args[:], args)
}

// directUser encodes into h the head of the record of a direct request or
// reply (kind) of the program's to rank, with flags besides
// wire.FlagDirect, and returns it with the payload the record carries: a
// Long payload goes straight into rank's segment when this process maps
// it (wire.FlagInPlace), and the record carries none.
func (e *Endpoint) directUser(h *directHead, rank int, num uint32, kind wire.Kind, flags uint8, handler int, payload []byte, off uint64, args []uint32) (head, rec []byte, err error) {
	hd := e.directHeader(num, kind, handler, off, len(args))
	hd.Flags |= flags
	hd.Len = uint32(len(payload))
	rec = payload
	if kind.Category() == Long && e.placeInPeer(rank, payload, off) {
		hd.Flags |= wire.FlagInPlace
		rec = nil
	}
	head, err = hd.AppendTo(h[:0], args)
	return head, rec, err
}

// requestDirect sends a request to l's rank through its inbox, waiting
// for credit and for room there.
func (e *Endpoint) requestDirect(l *lane, cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if e.isClosed() {
		return net.ErrClosed
	}
	if err := e.pollFirst(l); err != nil {
		return err
	}
	num, out, ok := l.reserve(e.depth)
	for !ok {
		if err := e.directWait(func() bool { return l.outstanding() < e.depth }); err != nil {
			return err
		}
		num, out, ok = l.reserve(e.depth)
	}
	// As on the datagram path (sendLocked), a lone request, or one that
	// uses up the credit, asks for its automatic reply at once; the
	// receiver may hold the others' for a while (autoReply).
	var flags uint8
	if out == 1 || out >= e.depth {
		flags = wire.FlagAckNow
	}
	kind := wire.RequestKind(cat)
	var h directHead
	head, rec, err := e.directUser(&h, l.rank, num, kind, flags, handler, payload, off, args)
	if last := uint32(kind)<<8 | uint32(handler); l.last.Load() != last {
		l.last.Store(last)
	}
	for err == nil && !e.shared.pushDirect(l.ring, l.addr, head, rec, false) {
		if int32(num-l.floor.Load()) <= 0 {
			// Given up while it waited for room (checkLanes): handler 0
			// has it as undeliverable.
			l.unsent.Add(1)
			return nil
		}
		err = e.directWait(nil)
	}
	if err != nil {
		l.unsent.Add(1)
		l.settle(num)
		return err
	}
	return nil
}

// directSent is the number of direct requests this endpoint pushed into
// its peers' inboxes (Shared's ShmSent counts them).
func (e *Endpoint) directSent() uint64 {
	var n uint64
	if ls := e.laneList.Load(); ls != nil {
		for _, l := range *ls {
			n += l.sent()
		}
	}
	return n
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
		// A full poll pass (this rank's inbox and socket, timers, the
		// lanes' give-ups), while the peer drains its inbox, or, when
		// another goroutine polls, its pass.
		if e.polite {
			runtime.Gosched()
		}
		if e.pollMu.TryLock() {
			err := e.pollLocked(nil)
			e.pollMu.Unlock()
			e.notify()
			return err
		}
		cond = func() bool { return true }
	}
	stop := func() bool { return cond() || e.interrupted() || e.isClosed() }
	e.fg.Add(1)
	err := e.waitOnce(stop)
	e.leaveWait()
	return err
}

// replyDirect answers a direct request of l's rank (Poller only: handlers
// run there): into its inbox, or, when that is full or holds replies
// waiting already, into the backlog.
func (e *Endpoint) replyDirect(l *lane, m *wire.Message) error {
	var h directHead
	head, err := m.AppendHead(h[:0])
	if err != nil {
		return err
	}
	return e.replyRecord(l, head, m.Payload)
}

// replyRecord is replyDirect of a record encoded: its head and payload.
func (e *Endpoint) replyRecord(l *lane, head, payload []byte) error {
	if l.queued == 0 && e.shared.pushDirect(l.ring, l.addr, head, payload, true) {
		return nil
	}
	var rec []byte
	if n := len(e.backlog); n < cap(e.backlog) {
		rec = e.backlog[:n+1][n].rec[:0] // reuse a record buffer
	}
	rec = append(append(rec, head...), payload...)
	e.backlog = append(e.backlog, backlogged{l: l, rec: rec})
	l.queued++
	return nil
}

// flushBacklog puts backlogged replies into their inboxes, in order for
// each peer: a peer whose inbox is full keeps the rest of its replies
// back, not the others'. Poller only.
func (e *Endpoint) flushBacklog() {
	e.flushes++
	keep := 0
	for i := range e.backlog {
		b := &e.backlog[i]
		if b.l.blocked != e.flushes && e.shared.pushDirect(b.l.ring, b.l.addr, b.rec, nil, true) {
			b.l.queued--
			b.l = nil
			continue
		}
		b.l.blocked = e.flushes
		// Keep it, in order, in front; the sent entry it displaces keeps
		// its record buffer for reuse: each buffer stays in one entry.
		e.backlog[keep], e.backlog[i] = e.backlog[i], e.backlog[keep]
		keep++
	}
	e.backlog = e.backlog[:keep]
}

// handleDirect runs a direct message from the inbox. Poller only.
func (e *Endpoint) handleDirect(b []byte) {
	m := &e.msg
	if wire.Decode(b, m) != nil || m.Flags&wire.FlagDirect == 0 {
		e.stats.badDatagrams.Add(1)
		return
	}
	src := int(m.Src)
	l := e.lane(src, false)
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
		num := directNum(m)
		now := m.Flags&wire.FlagAckNow != 0
		var out wire.Message
		if reason != ReasonNone {
			e.directMessage(&out, num, KindReturned, int(m.Handler), nil, 0, []uint32{uint32(reason), uint32(m.Kind)})
			_ = e.replyDirect(l, &out)
			e.answeredNow(l, now)
			return
		}
		t := &e.tok
		*t = Token{ep: e, lane: l, src: src, slot: m.Slot, seq: m.Seq, isReq: true, active: true, client: int(m.Handler) >= e.reserved}
		e.runHandler(h, t, m.Args[:m.NArgs], payload)
		t.active = false
		t.closeReply()
		if !t.replied {
			e.autoReply(l, num, now)
		} else {
			e.answeredNow(l, now)
		}
		return
	}
	// An answer to a request given up, or to none: no handler runs.
	first, last, ok := directRun(m)
	n, count := 0, uint64(1) // settled, and the answers the record carries
	if ok {
		n, count = l.settleRun(first, last), uint64(last-first)+1
	}
	if uint64(n) < count {
		e.stats.dupReplies.Add(count - uint64(n)) // given up, or bogus
	}
	if n == 0 {
		return
	}
	l.replies += uint64(n)
	switch m.Kind {
	case KindAutoReply:
		return
	case KindReturned:
		e.returned(Returned{Reason: Reason(m.Args[0]), Dest: src, Addr: l.addr, Kind: Kind(m.Args[1]), Handler: m.Handler})
		return
	}
	payload, bad := e.handlerView(h, m, seg)
	e.runReply(h, m, payload, bad, src, l.addr, nil)
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
// holds none, stop returns true or it ran the receive depth's worth,
// without the rest of a poll pass (the clock, the socket, timers), and
// returns how many it ran. The caller holds pollMu.
func (e *Endpoint) directPass(stop func() bool) int {
	if len(e.backlog) > 0 {
		e.flushBacklog()
	}
	d, ok := e.shared.peekDirect()
	if !ok {
		return 0
	}
	release.Inc(&e.passSeq)
	n, limit := 0, max(e.recvMax, 1)
	for ok && n < limit {
		n++
		e.handleDirect(d)
		e.shared.Release()
		if stop != nil && stop() {
			break
		}
		if n < limit {
			d, ok = e.shared.peekDirect()
		}
	}
	release.Inc(&e.passSeq)
	return n
}

// checkLanes gives up on the direct requests to a rank that has answered
// none of them for the datagram protocol's give-up time
// (retransmit.Config.GiveUpAfter; never, when that is 0): a rank stopped,
// or stuck in a handler or a computation that never polls. Each is
// returned as undeliverable (ReasonTimeout) naming the rank, with the kind
// and handler of the last request sent to it (the direct path does not
// keep the others'), and its credit is freed; an answer that comes later
// is counted as a duplicate reply and runs no handler. A lane with none
// outstanding moves its floor up to its last request, so that numbers stay
// within half their range of it. Poller only, at the end of a full pass.
func (e *Endpoint) checkLanes() {
	now, giveUp := e.clock, e.rcfg.GiveUpAfter()
	for _, l := range *e.laneList.Load() {
		v := l.state.Load()
		if uint32(v) == 0 {
			// Stored only when it moves: senders read it, on the line
			// of the credit word they write.
			if f := uint32(v >> 32); l.floor.Load() != f {
				l.floor.Store(f)
			}
			l.stalled = 0
			continue
		}
		if l.replies != l.seen || l.stalled == 0 {
			l.seen, l.stalled = l.replies, now
			continue
		}
		if giveUp == 0 || now.Sub(l.stalled) < giveUp {
			continue
		}
		l.stalled = 0
		last := l.last.Load()
		for n := l.giveUp(); n > 0; n-- {
			e.returned(Returned{Reason: ReasonTimeout, Dest: l.rank, Addr: l.addr, Kind: Kind(last >> 8), Handler: uint8(last)})
		}
	}
}
