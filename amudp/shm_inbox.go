package amudp

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/amudp/shmem"
)

// shmInbox is this rank's queue, in a shmem.Region whose descriptor stays
// open so that peers can map it.
type shmInbox struct {
	reg  *shmem.Region
	ring *shmring.Ring
}

func newShmInbox(size int) (*shmInbox, error) {
	if size < shmring.MinCapacity || size > MaxInbox || size&(size-1) != 0 {
		return nil, fmt.Errorf("shared-memory inbox of %d bytes: accepted: a power of two from %d to %d", size, shmring.MinCapacity, MaxInbox)
	}
	reg, err := shmem.Create("udpconduit-inbox", shmring.Size(size))
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox: %w", err)
	}
	r, err := shmring.Format(reg.Bytes())
	if err != nil {
		reg.Release()
		return nil, fmt.Errorf("shared-memory inbox: %w", err)
	}
	return &shmInbox{reg: reg, ring: r}, nil
}

// close closes the descriptor, so that no peer maps the inbox from now
// on; the mapping stays (a racing Send may still write to a peer's).
func (in *shmInbox) close() { in.reg.CloseFD() }

// release closes the descriptor and unmaps the inbox, which nobody uses.
func (in *shmInbox) release() {
	in.reg.Release()
	in.ring = nil
}

// mapShmPeer maps the inbox at path, a co-located rank's /proc/PID/fd/N.
func mapShmPeer(path string) (*shmring.Ring, error) {
	mem, err := shmem.Map(path, shmring.Size(shmring.MinCapacity), shmring.Size(MaxInbox))
	if err != nil {
		return nil, fmt.Errorf("shared-memory inbox: %w", err)
	}
	r, err := shmring.Open(mem)
	if err != nil {
		shmem.Unmap(mem)
		return nil, fmt.Errorf("shared-memory inbox %s: %w", path, err)
	}
	return r, nil
}

// InboxError is the error of every poll once this rank found a
// shared-memory inbox corrupted (it matches ErrInboxCorrupt): its own,
// found by its poller (a record, or a header word, that breaks the
// queue's rules), or the inbox of a co-located rank it sends to (the
// tail or head it read there). The job must end: see
// Endpoint.SetFatalHandler.
type InboxError struct {
	Rank int            // the rank whose inbox it is; -1: not known
	Addr netip.AddrPort // that rank's address
	By   int            // the rank that found it (Rank, or one that sends to it); -1: not known
	What string         // the value that broke the rules
}

// Error says whose inbox, e.g. "rank 2: corrupted shared-memory inbox
// (found by rank 1: the tail is 0xffffffffffffffff, not a multiple of 64)".
func (e *InboxError) Error() string {
	who := fmt.Sprintf("rank %d", e.Rank)
	if e.Rank < 0 {
		who = "the rank at " + e.Addr.String()
	}
	by := ""
	if e.By >= 0 {
		by = fmt.Sprintf("found by rank %d: ", e.By)
	}
	return fmt.Sprintf("%s: corrupted shared-memory inbox (%s%s)", who, by, e.What)
}

// Is makes the error match ErrInboxCorrupt.
func (e *InboxError) Is(target error) bool { return target == ErrInboxCorrupt }

// found keeps the first corrupted inbox this rank finds, the one at addr
// (this rank's own, or a peer's), for View to report; err says what broke
// the rules (a *shmring.CorruptError).
func (t *Shared) found(addr netip.AddrPort, err error) {
	what := err.Error()
	var ce *shmring.CorruptError
	if errors.As(err, &ce) {
		what = ce.What
	}
	if t.fault.CompareAndSwap(nil, &InboxError{Rank: -1, Addr: addr, By: -1, What: what}) {
		t.corrupt.Add(1)
	}
}

// SetFatalHandler sets h, which runs once, on the goroutine that polls,
// when the endpoint finds that it cannot keep its promises and the job
// must end: a shared-memory inbox corrupted (an *InboxError naming the
// rank whose inbox it is and this rank, which found it). h may end the
// process. Whether or not one is set, that poll and every one after it
// return the error.
func (e *Endpoint) SetFatalHandler(h func(error)) { e.onFatal.Store(&h) }

// fatal names the ranks of an *InboxError from the transport (see
// Shared.found) and runs the fatal handler on the first; it returns err,
// named. Other errors it returns as they are. Poller only.
func (e *Endpoint) fatal(err error) error {
	f, ok := err.(*InboxError)
	if !ok {
		return err
	}
	named := *f
	named.Rank, named.By = e.rankAt(f.Addr), e.rank
	if h := e.onFatal.Load(); h != nil && !e.fatalRan.Swap(true) {
		(*h)(&named)
	}
	return &named
}

// rankAt returns the rank at address a in the peer table, or -1.
func (e *Endpoint) rankAt(a netip.AddrPort) int {
	if a == e.tr.LocalAddr() {
		return e.rank
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for r, x := range e.addrs {
		if x == a {
			return r
		}
	}
	return -1
}
