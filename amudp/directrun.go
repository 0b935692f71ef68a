package amudp

import (
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// maxRun bounds the requests one automatic reply of the direct path
// answers (autoReply); a peer's run beyond it is bogus (lane.settleRun).
const maxRun = MaxNetworkDepth

// autoReply answers direct request num of l's rank, whose handler did not
// reply; now: its sender asked for the answer at once (wire.FlagAckNow, a
// lone request or one that used up its credit). A spinning poller's passes
// (holdAuto: spinPolls) hold such answers as a run of consecutive
// requests and send it as one record, an automatic reply numbered with its
// last request and carrying its first as one (slot, seq) pair, when a
// request breaks the run or asks for its answer at once (answeredNow where
// its handler answers it), the run reaches a quarter of the network depth
// (the sender keeps the rest of its credit), at the first full pass that
// finds autoSince autoHold old by the poll clock, or when the spin ends
// (flushAutos): a flood's requests then cost the sender one reply to take
// in many, even when each takes longer to send than the poller's quick
// passes between two full ones. Elsewhere, or with a network depth under
// 8, it answers at once. Poller only.
func (e *Endpoint) autoReply(l *lane, num uint32, now bool) {
	limit := max(e.depth/4, 1)
	if !e.holdAuto || limit == 1 {
		e.sendAuto(l, num, num)
		return
	}
	if l.autoN > 0 && num == l.autoLast+1 {
		l.autoLast++
		l.autoN++
	} else {
		if l.autoN > 0 {
			e.tellRun(l)
		}
		if !l.autoListed {
			if len(e.autoLanes) == 0 {
				e.autoSince = e.clock
			}
			l.autoListed = true
			e.autoLanes = append(e.autoLanes, l)
		}
		l.autoFirst, l.autoLast, l.autoN = num, num, 1
	}
	if now || l.autoN >= limit {
		e.tellRun(l)
	}
}

// answeredNow sends l's held run, if any, when the request just answered
// otherwise (a handler's reply, a returned request) asked for its answer
// at once (autoReply's now): its sender is about to wait for them all.
func (e *Endpoint) answeredNow(l *lane, now bool) {
	if now && l.autoN > 0 {
		e.tellRun(l)
	}
}

// autoHold is how long a spinning poller holds automatic direct replies
// (autoReply), as ackDelay bounds a batch of the datagram path's: they go
// at the first full pass after it (a spin's quick passes between two full
// ones take about a microsecond when its inbox is empty, longer when they
// run handlers), so the tail of a flood that its sender drains waits about
// this long.
const autoHold = 10 * time.Microsecond

// directRun returns the requests a direct answer settles: its own, or
// the run first..last an automatic reply carries (autoReply); ok false
// for a bogus one, more than one pair or a run longer than maxRun.
func directRun(m *wire.Message) (first, last uint32, ok bool) {
	first, last = directNum(m), directNum(m)
	if m.Kind == KindAutoReply && m.AckPairs() > 0 {
		if m.AckPairs() > 1 {
			return 0, 0, false
		}
		slot, seq := m.AckPair(0)
		first = uint32(slot)<<16 | uint32(seq)
	}
	return first, last, last-first < maxRun
}

// tellRun sends l's run of automatic answers (autoReply) and clears it.
func (e *Endpoint) tellRun(l *lane) {
	e.sendAuto(l, l.autoFirst, l.autoLast)
	l.autoN = 0
}

// sendAuto sends the automatic reply to l's requests first..last: one
// numbered last, carrying first as a (slot, seq) pair when they differ.
func (e *Endpoint) sendAuto(l *lane, first, last uint32) {
	var out wire.Message
	var pay []byte
	if first != last {
		pay = wire.AppendAckPair(e.autoPay[:0], uint16(first>>16), uint16(first))
	}
	e.directMessage(&out, last, KindAutoReply, 0, pay, 0, nil)
	_ = e.replyDirect(l, &out)
}

// flushAutos sends every run of automatic answers held (autoReply).
// Poller only.
func (e *Endpoint) flushAutos() {
	for _, l := range e.autoLanes {
		if l.autoN > 0 {
			e.tellRun(l)
		}
		l.autoListed = false
	}
	e.autoLanes = e.autoLanes[:0]
}
