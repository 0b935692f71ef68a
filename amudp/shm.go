package amudp

// This file is the path between ranks of one host: Shared, a Transport
// that carries datagrams to co-located peers through shared-memory queues
// and to every other peer through the UDP Transport it wraps.
//
// Each rank owns one inbox, a queue (package amudp/internal/shmring) in an
// anonymous shared-memory file (memfd, mode 0600) that its co-located
// peers map from /proc/PID/fd/N when they first send to it: nothing is
// ever named in /dev/shm, and the kernel frees the memory when the last
// process that maps it ends, whichever way. Only processes of the same
// user may open another's descriptor there.
//
// The inbox carries two kinds of records. Direct messages (direct.go) are
// the Endpoint's requests and replies to a co-located rank that is ready
// for them, outside the datagram protocol. Datagrams are those the UDP
// path carries, with their tags, sequence numbers and acknowledgements,
// sent through Send before a peer is ready; a full inbox, or one that
// cannot be mapped, sends those by UDP instead. A rank that waits marks its
// inbox asleep and blocks in the UDP Transport's Wait; a producer that
// finds the mark sends the rank a one-byte doorbell datagram that wakes
// it, and that Recv discards.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/release"
	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
)

// DefaultInbox is the size of a rank's inbox by default, InboxSize(64).
const DefaultInbox = 4 << 20

// InboxSize returns the size of an inbox that holds depth datagrams of the
// largest size (GASNET_PSHM_NETWORK_DEPTH), at least 4: the smallest power
// of two that does. Smaller messages fit many more: a Short direct message
// of up to 4 arguments takes 64 bytes, a short datagram 128 to 192.
func InboxSize(depth int) int {
	record := shmring.RecordSize(addrLen + MaxDatagram)
	want := max(depth, 4) * record
	size := shmring.MinCapacity
	for size < want {
		size <<= 1
	}
	return size
}

// AreaSize is the size of the area of shared words in each inbox
// (Shared.Area).
const AreaSize = shmring.AreaSize

// MaxInbox bounds an inbox's size.
const MaxInbox = 1 << 30

// doorbell is the datagram that wakes a sleeping rank; amudp's datagrams
// are never one byte long.
var doorbell = []byte{0xdb}

// ErrInboxCorrupt: a value read from a shared-memory inbox broke the
// queue's rules, in this rank's inbox or in that of a co-located peer it
// sends to (an *InboxError says which). Messages in it, or meant for it,
// may be lost, and direct messages are never retransmitted, so the
// endpoint cannot keep its promise that each runs once: the job must end
// (Endpoint.SetFatalHandler).
var ErrInboxCorrupt = errors.New("amudp: corrupted shared-memory inbox")

// addrLen is the size of a record's source address: 16 address bytes and
// a port.
const addrLen = 18

// ShmStats counts the datagrams each path of a Shared transport carried.
type ShmStats struct {
	ShmSent, ShmReceived uint64 // through the inboxes
	Fallbacks            uint64 // meant for an inbox, sent by UDP (full or unmapped)
	Doorbells            uint64 // wake-ups sent to sleeping ranks
	Corrupt              uint64 // records of this rank's inbox too short for an address, and inboxes found corrupted
}

// Shared is a Transport that sends to co-located peers through
// their inboxes (see SetInboxes) and to the others through UDP.
type Shared struct {
	udp   Transport
	inbox *shmInbox
	self  [addrLen]byte

	peers atomic.Pointer[shmPeers]
	// last is the peer Send last found in peers, or nil: most sends go
	// to the peer of the send before (a ping-pong, a flood, a reply),
	// and a lookup hashes the address each time.
	last atomic.Pointer[shmPeer]
	mu   sync.Mutex // serialises mapping peers' inboxes

	shmSent, fallbacks, doorbells, corrupt atomic.Uint64
	// shmRecv and shmReplied (direct replies and backlog flushes) count
	// what the poller alone does: release stores, no locked instruction.
	shmRecv, shmReplied atomic.Uint64
	// directSent counts the direct requests of the endpoint over this
	// transport (Endpoint.directSent), set by NewEndpoint, which is called
	// once for a transport; nil before.
	directSent func() uint64

	// udpSkip counts the UDP reads Recv leaves out after one found the
	// socket empty (the poller's alone); udpPeriod is udpEvery or, once
	// SetAllShared(true), udpEveryShared.
	udpSkip   int
	udpPeriod atomic.Int32

	// notes is the inbox's count of Notify calls as the last Recv that
	// found the inbox empty saw it: Wait does not sleep when it has grown
	// since (the poller alone uses it).
	notes uint64
	// pendHead and pendTail are the inbox's ends as the last Wait that
	// found them apart saw them, and pendSleep the bound it gave its
	// sleep (pendingSleep; the poller alone uses them).
	pendHead, pendTail uint64
	pendSleep          time.Duration

	// fault is the first corrupted inbox this rank found, its own or a
	// co-located peer's (its Rank and By are not known here: see
	// Endpoint.fatal); once it is set, every View returns it.
	fault atomic.Pointer[InboxError]

	// detours is the inbox's count of datagrams that co-located peers
	// sent by UDP because it was full, as Recv last saw it: when it grows,
	// Recv reads the socket at once.
	detours uint64
}

// udpEvery is how often, in polls of an empty inbox, Recv reads the UDP
// socket once a read found it empty: a system call costs about as much as
// a whole round trip through the inbox, and a co-located peer's datagram
// comes by UDP only when its inbox was full, which the peer says in the
// inbox (Ring.Detour): Recv
// then reads the socket at once. Datagrams from other hosts wait at most
// udpEvery-1 looks at the inbox; a read that finds one keeps Recv reading
// the socket every time, and so does the first Recv after a Wait, which
// blocks on the socket as before.
const udpEvery = 8

// udpEveryShared replaces udpEvery when every peer shares memory with this
// rank (SetAllShared): the socket then carries only datagrams that the
// inbox's detour count announces, doorbells, which Wait sees anyway, and
// those of a peer that could not map the inbox, which this bounds the wait
// of. A message that arrives while the poller is in the system call
// waits for it to end, which at udpEvery a measurable share of round
// trips did (BENCHMARKS.md).
const udpEveryShared = 1024

// shmPeer is a co-located rank's inbox, mapped on first use.
type shmPeer struct {
	addr   netip.AddrPort
	path   string
	ring   atomic.Pointer[shmring.Ring]
	failed atomic.Bool
}

// NewShared returns a Shared transport over udp with an inbox of size
// bytes (a power of two from 4 KiB to MaxInbox); Inbox names it for the
// co-located peers. On a system without memfd it returns an error, and the
// caller uses udp alone.
func NewShared(udp Transport, size int) (*Shared, error) {
	in, err := newShmInbox(size)
	if err != nil {
		return nil, err
	}
	t := &Shared{udp: udp, inbox: in}
	t.udpPeriod.Store(udpEvery)
	putAddr(t.self[:], udp.LocalAddr())
	t.peers.Store(&shmPeers{})
	return t, nil
}

// Inbox returns the path by which a process of this host opens this rank's
// inbox.
func (t *Shared) Inbox() string { return t.inbox.reg.Path() }

// Inbox names the inbox of a co-located peer: the path by which a process
// of this host opens it (the peer's Shared.Inbox), and the peer's UDP
// address.
type Inbox struct {
	Addr netip.AddrPort
	Path string
}

// SetInboxes names the inboxes of the co-located peers; an entry with an
// empty path, or this rank's own, is skipped, and of two for one address
// the later counts. A datagram to any other address goes by UDP. It may
// be called once, before or while datagrams flow.
func (t *Shared) SetInboxes(inboxes []Inbox) {
	t.peers.Store(newShmPeers(inboxes, t.udp.LocalAddr()))
	t.last.Store(nil)
	// Every peer that may now send direct messages here (Endpoint's direct
	// path) is in m, and this rank can map its inbox to answer.
	t.inbox.ring.SetReady()
}

// directRing returns the mapped inbox of the co-located peer at to when
// that peer takes direct messages (its SetInboxes has run: ready; a
// rank that answers one needs no mark), else nil.
func (t *Shared) directRing(to netip.AddrPort, ready bool) *shmring.Ring {
	p := t.peers.Load().get(to)
	if p == nil {
		return nil
	}
	if r := t.ring(p); r != nil && (r.Ready() || !ready) {
		return r
	}
	return nil
}

// pushDirect puts the direct message head+payload into r, the inbox of
// the peer at to, as a message record (shmring.Ring.PushMessage: no
// address prefix), and rings its doorbell if it sleeps. It reports false
// when r is full. polled says that the caller holds the poll (a reply).
func (t *Shared) pushDirect(r *shmring.Ring, to netip.AddrPort, head, payload []byte, polled bool) bool {
	if !r.PushMessage(head, payload) {
		if err := r.Err(); err != nil {
			t.found(to, err)
		}
		return false
	}
	if polled {
		release.Inc(&t.shmReplied)
	}
	if r.Sleeping() {
		t.doorbells.Add(1)
		_ = t.udp.Send(doorbell, to) // a lost doorbell costs a sleep of maxBlock at most
	}
	return true
}

// SetAllShared says whether every peer of the job shares memory with this
// rank (a job on one host, in one group): Recv then reads the UDP socket
// more rarely while the inbox is empty (udpEveryShared).
func (t *Shared) SetAllShared(all bool) {
	if all {
		t.udpPeriod.Store(udpEveryShared)
	} else {
		t.udpPeriod.Store(udpEvery)
	}
}

// allShared reports whether SetAllShared(true) was called.
func (t *Shared) allShared() bool { return t.udpPeriod.Load() == udpEveryShared }

// Stats returns the counters of the two paths.
func (t *Shared) Stats() ShmStats {
	sent := t.shmSent.Load() + t.shmReplied.Load()
	if t.directSent != nil {
		sent += t.directSent()
	}
	return ShmStats{ShmSent: sent, ShmReceived: t.shmRecv.Load(), Fallbacks: t.fallbacks.Load(),
		Doorbells: t.doorbells.Load(), Corrupt: t.corrupt.Load()}
}

// String formats the counters as GASNET_STATS prints them, after the
// Endpoint's.
func (s ShmStats) String() string {
	return fmt.Sprintf("shm-sent %d shm-received %d shm-fallbacks %d shm-doorbells %d shm-corrupt %d",
		s.ShmSent, s.ShmReceived, s.Fallbacks, s.Doorbells, s.Corrupt)
}

// Send puts b into the inbox of a co-located peer, or sends it by UDP.
func (t *Shared) Send(b []byte, to netip.AddrPort) error {
	p := t.last.Load()
	if p == nil || p.addr != to {
		if p = t.peers.Load().get(to); p != nil {
			t.last.Store(p)
		}
	}
	if p != nil {
		if r := t.ring(p); r != nil {
			if r.Push(t.self[:], b) {
				t.shmSent.Add(1)
				if r.Sleeping() {
					t.doorbells.Add(1)
					return t.udp.Send(doorbell, to)
				}
				return nil
			}
			if err := r.Err(); err != nil {
				t.found(to, err)
			}
			t.fallbacks.Add(1)
			err := t.udp.Send(b, to)
			r.Detour() // the datagram is in the peer's socket: look there
			return err
		}
	}
	return t.udp.Send(b, to)
}

// ring returns p's mapped inbox, mapping it on first use; nil when it
// cannot be mapped (the peer then gets UDP).
func (t *Shared) ring(p *shmPeer) *shmring.Ring {
	if r := p.ring.Load(); r != nil {
		return r
	}
	if p.failed.Load() {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := p.ring.Load(); r != nil {
		return r
	}
	if p.failed.Load() {
		return nil
	}
	r, err := mapShmPeer(p.path)
	if err != nil {
		if errors.Is(err, shmring.ErrCorrupt) {
			t.found(p.addr, err) // an inbox, whose header is garbage
		}
		p.failed.Store(true)
		return nil
	}
	p.ring.Store(r)
	return r
}

// Recv takes a datagram from this rank's inbox, else from UDP (see
// udpEvery). The poller alone calls it.
func (t *Shared) Recv(b []byte) (int, netip.AddrPort, error) {
	d, from, inPlace, err := t.View(b)
	if inPlace {
		n := copy(b, d)
		t.Release()
		return n, from, nil
	}
	return len(d), from, err
}

// View is Recv that gives a datagram of the inbox in place (or a direct
// message, which has no source address: from is the zero AddrPort), in the shared
// memory of the ring, until Release: the Endpoint's handlers read a Medium
// payload there, one copy fewer. Whatever a faulty peer writes into the
// record meanwhile, d's bounds are the ring's. Once this rank has found
// an inbox corrupted (its own, here or in Wait; a peer's, sending to it),
// it returns that *InboxError (ErrInboxCorrupt). An empty inbox's header
// is checked (shmring.Ring.Check) each time it reads the socket. The
// poller alone calls it.
func (t *Shared) View(b []byte) (d []byte, from netip.AddrPort, inPlace bool, err error) {
	for {
		if f := t.fault.Load(); f != nil {
			return nil, netip.AddrPort{}, false, f
		}
		rec, ok, err := t.inbox.ring.Peek()
		if err != nil { // shmring.ErrCorrupt
			t.found(t.udp.LocalAddr(), err)
			continue
		}
		if ok && t.inbox.ring.Message() { // a direct message: no prefix
			release.Inc(&t.shmRecv)
			return rec[:len(rec):len(rec)], netip.AddrPort{}, true, nil
		}
		if ok {
			if len(rec) < addrLen {
				t.inbox.ring.Advance()
				t.corrupt.Add(1)
				continue
			}
			release.Inc(&t.shmRecv)
			return rec[addrLen:len(rec):len(rec)], getAddr(rec), true, nil
		}
		t.notes = t.inbox.ring.Notes()
		if d := t.inbox.ring.Detours(); d != t.detours {
			t.detours, t.udpSkip = d, 0
		}
		if t.udpSkip > 0 {
			t.udpSkip--
			return nil, netip.AddrPort{}, false, ErrNoData
		}
		// A system call's worth of time: a look at the header too.
		if err := t.inbox.ring.Check(); err != nil {
			t.found(t.udp.LocalAddr(), err)
			continue
		}
		n, from, err := t.udp.Recv(b)
		if errors.Is(err, ErrNoData) {
			t.udpSkip = int(t.udpPeriod.Load()) - 1
		}
		if err == nil && n == 1 && b[0] == doorbell[0] {
			continue
		}
		return b[:n], from, false, err
	}
}

// peekDirect returns the direct message at the head of the inbox in
// place, until Release, or ok false when the head holds none: the inbox is
// empty or holds a datagram, which View takes. The poller alone calls it.
func (t *Shared) peekDirect() (d []byte, ok bool) {
	rec, ok, err := t.inbox.ring.Peek()
	if err != nil {
		t.found(t.udp.LocalAddr(), err) // View reports it
	}
	if !ok || !t.inbox.ring.Message() {
		return nil, false
	}
	release.Inc(&t.shmRecv)
	return rec[:len(rec):len(rec)], true
}

// Release frees the datagram View gave in place.
func (t *Shared) Release() { t.inbox.ring.Advance() }

// Wait blocks until the inbox or the UDP socket may hold a datagram, Wake
// is called, or timeout passes.
func (t *Shared) Wait(timeout time.Duration) error {
	// Whatever wakes the rank, the next Recv reads the socket: what woke
	// it may be there (udpEvery).
	t.udpSkip = 0
	r := t.inbox.ring
	if !r.Empty() {
		return nil
	}
	if err := r.Check(); err != nil {
		t.found(t.udp.LocalAddr(), err) // the next View reports it
		return nil
	}
	r.SetSleeping(true)
	defer r.SetSleeping(false)
	if !r.Empty() || r.Notes() != t.notes {
		return nil
	}
	if head, tail := r.Ends(); head != tail {
		// A record on its way, whose producer may have looked for the
		// mark before it was set: no doorbell may come for it.
		timeout = min(timeout, t.pendingSleep(head, tail))
	}
	return t.udp.Wait(timeout)
}

// pendingWait is the first bound of a sleep that begins while a
// producer's record is on its way into the inbox (shmring.Ring.Ends):
// the record is committed within a few instructions of its producer's
// reservation, unless that producer lost its CPU in between (or died, or
// a faulty peer moved the tail). Parked in Go's network poller, a sleep
// lasts at least a millisecond.
const pendingWait = 50 * time.Microsecond

// pendingSleep bounds the sleep of a Wait that found the inbox's ends
// apart at head and tail: pendingWait, doubled at each Wait that finds
// them where the last one did. Poller only.
func (t *Shared) pendingSleep(head, tail uint64) time.Duration {
	if head != t.pendHead || tail != t.pendTail { // apart: never the zero values
		t.pendHead, t.pendTail, t.pendSleep = head, tail, pendingWait
		return pendingWait
	}
	t.pendSleep = min(2*t.pendSleep, maxBlockPolite)
	return t.pendSleep
}

// Area returns the area of shared words (shmring.AreaSize bytes, zero at
// first, 8-aligned) in the inbox of the co-located peer at to, mapping it
// on first use, or in this rank's own inbox when to is its own address;
// nil when to shares no memory with this rank (SetInboxes) or its inbox
// cannot be mapped. Ranks of a group lay out their collectives' words
// there and access them with sync/atomic; Notify wakes a rank that waits
// for a word to change.
func (t *Shared) Area(to netip.AddrPort) []byte {
	if to == t.udp.LocalAddr() {
		return t.inbox.ring.Area()
	}
	p := t.peers.Load().get(to)
	if p == nil {
		return nil
	}
	if r := t.ring(p); r != nil {
		return r.Area()
	}
	return nil
}

// Notify tells the co-located peer at to that a word it may wait for has
// changed (see Area): a peer asleep in Wait, or about to sleep, wakes. Call
// it after the change. It does nothing for a peer that shares no memory
// with this rank.
func (t *Shared) Notify(to netip.AddrPort) error { return t.notify(t.peers.Load().get(to)) }

// Bell is Notify of one peer without finding it by its address each
// time, for a rank that notifies the same peers again and again.
type Bell struct {
	t *Shared
	p *shmPeer // nil: the peer shares no memory with this rank
}

// Bell returns the bell of the peer at to, as SetInboxes named it.
func (t *Shared) Bell(to netip.AddrPort) Bell {
	return Bell{t: t, p: t.peers.Load().get(to)}
}

// Ring is Notify of the bell's peer.
func (b Bell) Ring() error { return b.t.notify(b.p) }

// notify is Notify of peer p.
func (t *Shared) notify(p *shmPeer) error {
	if p == nil {
		return nil
	}
	r := t.ring(p)
	if r == nil || !r.Note() {
		return nil
	}
	t.doorbells.Add(1)
	return t.udp.Send(doorbell, p.addr)
}

// Wake makes a current or the next Wait return.
func (t *Shared) Wake() { t.udp.Wake() }

// SetPark chooses how Wait blocks, as UDP's SetPark does, when the
// transport it wraps is a Parker; else it does nothing.
func (t *Shared) SetPark(park bool) error {
	if p, ok := t.udp.(Parker); ok {
		return p.SetPark(park)
	}
	return nil
}

// LocalAddr is the UDP address, by which peers know this rank.
func (t *Shared) LocalAddr() netip.AddrPort { return t.udp.LocalAddr() }

// SetBuffers sets the UDP socket's buffers.
func (t *Shared) SetBuffers(n int) (rcv, snd int, err error) { return t.udp.SetBuffers(n) }

// Unwrap releases the inbox and returns the UDP Transport, for a rank that
// learns, before any datagram flows, that it will share no memory. Peers
// must not have been given the inbox (SetInboxes).
func (t *Shared) Unwrap() Transport {
	t.inbox.release()
	return t.udp
}

// Close closes the UDP socket and this rank's descriptor of its inbox:
// no peer maps it afterwards. The mappings stay until the process ends, so
// that a Send racing with Close never touches unmapped memory.
func (t *Shared) Close() error {
	err := t.udp.Close()
	t.inbox.close()
	return err
}

func putAddr(b []byte, a netip.AddrPort) {
	ip := a.Addr().As16()
	copy(b, ip[:])
	binary.LittleEndian.PutUint16(b[16:], a.Port())
}

func getAddr(b []byte) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[:16])).Unmap(), binary.LittleEndian.Uint16(b[16:]))
}

var _ Transport = (*Shared)(nil)
