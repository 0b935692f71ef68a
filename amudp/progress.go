package amudp

import (
	"math"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/release"
	"github.com/udpconduit/udpconduit/retransmit"
)

// DefaultSpin is the default busy-poll time of a blocking wait: long
// enough that a rank whose peer lost its CPU for a while (to a runtime's
// monitor thread, the console) keeps spinning rather than sleep, after
// which each message would cost it a doorbell and a wake-up (DESIGN.md §3).
const DefaultSpin = time.Millisecond

// pollFirstGap: a request skips its poll-first when a poll pass ended more
// recently than this. Replies come batched at most ackDelay apart, so a
// sender that only sends polls about as often as they can arrive; a request
// from another peer waits at most this long for a busy sender to run it.
const pollFirstGap = ackDelay

// maxBlock caps one sleep in the kernel, so progress never depends on a
// missed wakeup.
const maxBlock = 20 * time.Millisecond

// maxBlockPolite is maxBlock for a polite endpoint, whose host has more
// ranks than cores. Wakeups do not depend on it: datagrams, Wake and
// retransmission deadlines end a sleep; it only bounds the cost of a missed
// one. Each extra wakeup of a waiter costs context switches (the Go
// runtime's monitor thread polls after each blocking syscall) that the busy
// ranks pay for, while the early ranks of a large job on few cores wait
// long for the last to start (BENCHMARKS.md, Scale).
const maxBlockPolite = 5 * time.Second

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

// Pending reports whether a poll pass may find a message: this rank's
// shared-memory inbox holds a record, or the endpoint has none (a look
// at the socket would cost a system call). It is a few loads, for a
// waiter that polls between other work; what it misses (a datagram, a
// due retransmission) the next Poll takes.
func (e *Endpoint) Pending() bool { return e.Probe().Pending() }

// Probe is Pending in one load, for a waiter that looks between turns on
// the CPU: whether the record word at the inbox's head, as it was when
// Endpoint.Probe returned it, says committed. Once a poll has taken that
// record it reports what is no longer there, and misses what is behind
// it: the waiter takes a new one after each poll.
type Probe struct {
	w    *atomic.Uint64 // nil: the endpoint has no inbox
	full uint64
}

// Pending reports whether the record at the head the probe looks at is
// committed, or the endpoint has no inbox (as Endpoint.Pending).
func (p Probe) Pending() bool { return p.w == nil || p.w.Load() == p.full }

// Probe returns a Probe of the inbox's head as it is now.
func (e *Endpoint) Probe() Probe {
	if e.shared == nil {
		return Probe{}
	}
	w, full := e.shared.inbox.ring.HeadWord()
	return Probe{w: w, full: full}
}

// pollLocked is one poll pass; the caller holds pollMu. A pass ends when
// the socket is empty, after the receive depth, or, for a waiting caller,
// as soon as its condition stop holds: the rest stays in the socket for the
// next pass, and the waiter saves a syscall that would find nothing.
func (e *Endpoint) pollLocked(stop func() bool) error {
	release.Inc(&e.passSeq)
	defer release.Inc(&e.passSeq)
	e.pass++
	e.drained = 0
	e.clock = e.now()
	// A spin's passes hold them (autoReply) until the first is autoHold
	// old; any other pass sends them.
	if len(e.autoLanes) > 0 && (!e.holdAuto || time.Duration(e.clock-e.autoSince) >= autoHold) {
		e.flushAutos()
	}
	if err := e.takeRetErr(); err != nil {
		return err
	}
	if len(e.backlog) > 0 {
		e.flushBacklog()
	}
	limit := max(e.recvMax, 1) // set once by SetPeers, before traffic
	bytes := 0
	stopped := false
	for i := 0; i < limit; i++ {
		d, from, inPlace, err := e.recv()
		if err == ErrNoData {
			break
		}
		if err != nil {
			return e.fatal(err)
		}
		if i > 0 {
			// The handlers of the datagram before ran since the clock
			// was read.
			e.clock = e.now()
		}
		e.drained++
		bytes += len(d)
		e.handleDatagram(d, from, inPlace)
		if inPlace {
			e.viewer.Release()
		}
		if stop != nil && stop() {
			// A waiter whose condition the datagram met returns at
			// once, without reading the clock again: the end of the
			// pass keeps the time before its handlers.
			stopped = true
			break
		}
	}
	if e.drained > 0 && !stopped && (len(e.ackq) > 0 || e.deadline.Load() != math.MaxInt64) {
		// The acknowledgements' and timers' time, when there are any:
		// a pass that only answered requests (the other side of a
		// ping-pong) keeps the time before its handlers, a clock read
		// less per round trip.
		e.clock = e.now()
	}
	e.flushAcks(false)
	e.growBuffers(bytes)
	e.fireTimers()
	if e.shared != nil {
		e.checkLanes()
	}
	e.lastPass.Store(int64(e.clock))
	return e.takeRetErr()
}

// recv takes the next datagram from the transport: in place when it is a
// Viewer that can (the handlers have run when the caller releases it),
// else in e.rbuf.
func (e *Endpoint) recv() (d []byte, from netip.AddrPort, inPlace bool, err error) {
	if e.viewer != nil {
		return e.viewer.View(e.rbuf)
	}
	n, from, err := e.tr.Recv(e.rbuf)
	return e.rbuf[:n], from, false, err
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
	if cond() {
		return nil
	}
	// The wait is counted for a background poller (see Progress) once one
	// runs, which it looks at before each step; without one, counting
	// would cost two atomic additions a wait, a fair part of a round trip
	// through shared memory.
	counted := false
	for !cond() {
		if !counted && e.bgActive.Load() {
			e.fg.Add(1)
			counted = true
		}
		if err := e.waitOnce(cond); err != nil {
			if counted {
				e.leaveWait()
			}
			return err
		}
	}
	if counted {
		e.leaveWait()
	}
	return nil
}

// leaveWait ends a goroutine's wait; with a background poller running, it
// notes when (see Progress).
func (e *Endpoint) leaveWait() {
	if e.bgActive.Load() {
		e.waitEnd.Store(int64(e.now()))
	}
	e.fg.Add(-1)
}

// bgResume and bgResumeMax bound how long the background poller, standing
// aside, sleeps before it looks again whether a goroutine waits: it starts
// at bgResume and doubles while it finds one each time. A program that
// waits for one message after another (a ping-pong, the rounds of a
// barrier) re-enters a wait within microseconds and keeps polling itself;
// one that computes gets a background poll within bgResumeMax.
const (
	bgResume    = 100 * time.Microsecond
	bgResumeMax = 16 * bgResume
)

// Progress polls in the background until the endpoint closes, and then
// returns net.ErrClosed (GASNET_RCV_THREAD): it makes progress while no
// goroutine waits on the endpoint (the program computes, and handlers,
// replies and retransmissions go on), and steps aside while one does,
// which then polls itself. A waiting goroutine that only slept until a
// background poller's pass would wait for the scheduler to run it after
// each message, long on a host whose cores the pollers keep busy
// (BENCHMARKS.md, GASNET_RCV_THREAD). Run it on one goroutine per endpoint.
func (e *Endpoint) Progress() error {
	e.bgActive.Store(true)
	defer e.bgActive.Store(false)
	wanted := func() bool { return e.fg.Load() > 0 }
	aside := bgResume
	for {
		if e.isClosed() {
			return net.ErrClosed
		}
		// Stand aside while a goroutine waits, or has waited within
		// bgResume (it is about to wait again).
		if since := time.Duration(int64(e.now()) - e.waitEnd.Load()); wanted() || since < bgResume {
			time.Sleep(max(aside, bgResume-since))
			aside = min(2*aside, bgResumeMax)
			continue
		}
		aside = bgResume
		if !e.pollMu.TryLock() {
			// Another goroutine polls (Poll, a request's poll-first):
			// wait for its pass.
			if err := e.waitOnce(wanted); err != nil && isClosedErr(err) {
				return err
			}
			continue
		}
		e.bgPolling.Store(true)
		err := e.spinOrBlock(wanted)
		e.bgPolling.Store(false)
		e.pollMu.Unlock()
		e.notify()
		if err != nil && isClosedErr(err) {
			return err
		}
		// Another error is a returned request, which handler 0 has had.
	}
}

func isClosedErr(err error) bool { return err == net.ErrClosed }

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
	if e.bgPolling.Load() {
		// The background poller steps aside as soon as it sees this
		// waiter (see Progress): take the poll from it rather than sleep
		// until its pass ends.
		if e.blocked.Load() {
			e.tr.Wake()
		}
		for start := time.Now(); time.Since(start) < bgResume; {
			if e.pollMu.TryLock() {
				err := e.spinOrBlock(cond)
				e.pollMu.Unlock()
				e.notify()
				return err
			}
			runtime.Gosched()
		}
	}
	e.waiters.Add(1)
	defer e.waiters.Add(-1)
	e.waitMu.Lock()
	if cond() { // a Wake (notify) while waiters was 0 found no one
		e.waitMu.Unlock()
		return nil
	}
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

// spinOrBlock polls until cond holds, a pass runs messages for goroutines
// that wait on this poller (or, polite, for its caller), or the spin of
// e.spin without traffic ends, and then sleeps once in the kernel. It sends
// the automatic direct replies its spin held. The caller holds pollMu.
func (e *Endpoint) spinOrBlock(cond func() bool) error {
	e.holdAuto = !e.polite // runs of automatic replies, until the spin ends
	done, err := e.spinPolls(cond)
	e.holdAuto = false
	if len(e.autoLanes) > 0 {
		e.flushAutos()
	}
	if done || err != nil {
		return err
	}
	timeout := maxBlock
	if e.polite {
		timeout = maxBlockPolite
	}
	e.mu.Lock()
	if dl, ok := e.tracker.NextDeadline(); ok {
		timeout = min(timeout, dl.Sub(e.now()))
	}
	e.mu.Unlock()
	if len(e.backlog) > 0 {
		timeout = min(timeout, directBacklogWait)
	}
	if timeout <= 0 {
		return nil
	}
	e.flushAcks(true) // nothing waits on a sleeping poller
	e.blocked.Store(true)
	defer e.blocked.Store(false)
	if cond() { // a Wake between our check and blocked=true
		return nil
	}
	e.sleeps.Add(1)
	return e.tr.Wait(timeout)
}

// spinPolls is spinOrBlock's spin: passes until cond holds, a pass runs
// messages for goroutines that wait on this poller (or, polite, for its
// caller), the endpoint closes or a pass fails (done), or e.spin passes
// without traffic (done false: the caller sleeps); a pass that ran
// messages, full or quick, starts the spin's time again (a quick one's at
// the next full pass, which reads the clock). The caller holds pollMu,
// and the automatic direct replies its passes hold (holdAuto), which it
// sends.
func (e *Endpoint) spinPolls(cond func() bool) (done bool, err error) {
	// Between full passes, a poller with an inbox makes quick passes
	// (directPass): a direct message costs no clock read then.
	quick := 0
	if e.shared != nil {
		quick = quickPassesMixed
		if e.shared.allShared() {
			quick = quickPasses
		}
	}
	var start retransmit.Time
	for full := false; ; full = true {
		ran := false // a quick pass ran messages
		for i := 0; i < quick && !e.polite; i++ {
			n := e.directPass(cond)
			ran = ran || n > 0
			if cond() {
				e.flushAcks(true)
				return true, nil
			}
			// Goroutines that wait for this poller's passes look again
			// after one that ran messages (notify, by the caller); with
			// none, the poller goes on.
			if n > 0 && e.waiters.Load() > 0 {
				return true, nil
			}
		}
		if err := e.pollLocked(cond); err != nil {
			return true, err
		}
		if cond() {
			// The waiter leaves the network: the replies it holds back
			// must not wait for its next poll, which may be far off.
			e.flushAcks(true)
			return true, nil
		}
		if e.drained > 0 && (e.polite || e.waiters.Load() > 0) {
			return true, nil
		}
		if !full || ran || e.drained > 0 {
			start = e.clock // the first pass, or traffic: the spin starts again
		}
		if e.isClosed() {
			return true, net.ErrClosed
		}
		// Goroutines waiting for this poller's passes are woken by
		// notify when a pass drains something and by Wake when state they
		// read changes elsewhere; an empty pass changes nothing for them,
		// so the poller keeps to its own spin-then-sleep. (Returning to
		// them after every empty pass kept two goroutines handing the
		// poll back and forth without ever sleeping, burning the cores an
		// oversubscribed host's other workers need.)
		if !e.polite && (e.spin < 0 || time.Duration(e.clock-start) < e.spin) {
			continue
		}
		return false, nil
	}
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
