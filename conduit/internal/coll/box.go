package coll

import (
	"fmt"
	"sync"
)

// Box keeps what comes to one member for its collectives on one team
// until it takes it: the others' messages (by collective and sender),
// failure notices, and probes, by which a member that has waited a while
// for another tells it what it called, so that two members waiting for
// each other in different calls (a difference no message shows) find the
// difference instead of waiting for ever. It decides, for what comes
// after this member left the collective with a result, that the job must
// abort (Abort), as that result cannot be taken back. Its methods may be
// called from any goroutine; a Link waits on it by polling Poll.
type Box struct {
	mu      sync.Mutex
	in      map[boxKey]boxMsg
	failed  map[uint64]Failure
	probes  map[boxKey]Call // probes for collectives not yet left
	cur     uint64          // the collective in progress (0: none)
	left    uint64          // the last collective left
	calls   [recent]seqCall // the last collectives entered, by seq%recent
	abort   string          // why the job must abort; "" if it need not
	aborted bool            // abort was reported
}

type boxKey struct {
	seq uint64
	src int
}

type boxMsg struct {
	h    Header
	data []byte
}

type seqCall struct {
	seq  uint64
	call Call
}

// recent is how many of its last calls a member remembers, to compare
// with a probe that comes after it left them.
const recent = 64

// Put keeps message (h, data) from team rank src in collective seq. It
// returns why the job must abort, as Abort does: with Notice and Probe,
// what its handler calls, so that a message costs one lock of the box.
func (b *Box) Put(seq uint64, src int, h Header, data []byte) (abort string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failed[seq].Why != "":
	case seq <= b.left:
		b.abortf("team rank %d sent %v (step %d) in collective %d, which this member has left", src, h.Call, h.Step, seq)
	default:
		if b.in == nil {
			b.in = map[boxKey]boxMsg{}
		}
		b.in[boxKey{seq, src}] = boxMsg{h, data}
	}
	return b.takeAbort()
}

// Notice records that collective seq failed, as team rank src tells, and
// returns what Put does.
func (b *Box) Notice(seq uint64, src int, f Failure) (abort string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.failed[seq].Why != "":
	case seq <= b.left:
		b.abortf("team rank %d found, after this member left collective %d: %s", src, seq, f.Why)
	default:
		b.markFailed(seq, f)
	}
	return b.takeAbort()
}

func (b *Box) markFailed(seq uint64, f Failure) {
	if f.Why == "" {
		f.Why = "(no description)"
	}
	if b.failed == nil {
		b.failed = map[uint64]Failure{}
	}
	b.failed[seq] = f
	for k := range b.in {
		if k.seq == seq {
			delete(b.in, k)
		}
	}
}

// Probe records that team rank src, in collective seq, called call and
// has waited a while, and returns what Put does.
func (b *Box) Probe(seq uint64, src int, call Call) (abort string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if seq <= b.left {
		if c := b.calls[seq%recent]; c.seq == seq && c.call != call && b.failed[seq].Why == "" {
			b.abortf("team rank %d called %v in collective %d, which this member left as %v", src, call, seq, c.call)
		}
		return b.takeAbort()
	}
	if b.probes == nil {
		b.probes = map[boxKey]Call{}
	}
	b.probes[boxKey{seq, src}] = call
	return ""
}

// Enter begins collective seq of this member, a call of call: it returns
// the failure another member told, if any.
func (b *Box) Enter(seq uint64, call Call) (Failure, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cur = seq
	b.calls[seq%recent] = seqCall{seq, call}
	f, ok := b.failed[seq]
	return f, ok
}

// Failed returns the failure of collective seq, if it failed.
func (b *Box) Failed(seq uint64) (Failure, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.failed[seq]
	return f, ok
}

// Fail records that collective seq failed with f here.
func (b *Box) Fail(seq uint64, f Failure) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failed[seq].Why == "" {
		b.markFailed(seq, f)
	}
}

// Poll looks, in collective seq, for the message from team rank from, or
// any message or probe whose call is not want: done true with it (a
// probe has nil data and step -1), or with failed true and the failure
// another member told.
func (b *Box) Poll(seq uint64, from int, want Call) (src int, h Header, data []byte, f Failure, failed, done bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f, ok := b.failed[seq]; ok {
		return 0, Header{}, nil, f, true, true
	}
	if m, ok := b.in[boxKey{seq, from}]; ok {
		delete(b.in, boxKey{seq, from})
		return from, m.h, m.data, Failure{}, false, true
	}
	for k, m := range b.in {
		if k.seq == seq && m.h.Call != want {
			delete(b.in, k)
			return k.src, m.h, m.data, Failure{}, false, true
		}
	}
	for k, c := range b.probes {
		if k.seq == seq && c != want {
			delete(b.probes, k)
			return k.src, Header{Call: c, Step: -1}, nil, Failure{}, false, true
		}
	}
	return 0, Header{}, nil, Failure{}, false, false
}

// Leave ends collective seq of this member, with a result (ok) or an
// error: with a result, a message of it or an earlier one still kept, a
// probe of another call, or a failure told meanwhile, is another call's,
// and the job must abort. It returns why, as Abort does.
func (b *Box) Leave(seq uint64, ok bool) (abort string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.left, b.cur = seq, 0
	if len(b.probes) > 0 {
		for k, c := range b.probes {
			if k.seq > seq {
				continue
			}
			if ok && k.seq == seq && c != b.calls[seq%recent].call {
				b.abortf("team rank %d called %v in collective %d, which this member left as %v", k.src, c, seq, b.calls[seq%recent].call)
			}
			delete(b.probes, k)
		}
	}
	if ok {
		if f, failed := b.failed[seq]; failed {
			b.abortf("collective %d failed after this member left it: %s", seq, f.Why)
		}
		for k, m := range b.in {
			if k.seq <= seq {
				b.abortf("team rank %d sent %v (step %d) in collective %d, which this member has left", k.src, m.h.Call, m.h.Step, k.seq)
			}
		}
	}
	return b.takeAbort()
}

func (b *Box) abortf(format string, a ...any) {
	if b.abort == "" {
		b.abort = fmt.Sprintf(format, a...)
	}
}

// Abort returns why the job must abort, once: "" when it need not.
func (b *Box) Abort() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.takeAbort()
}

func (b *Box) takeAbort() string {
	if b.aborted {
		return ""
	}
	b.aborted = b.abort != ""
	return b.abort
}
