package retransmit

import "time"

// Tracker holds the retransmission state of every request in flight on one
// endpoint and orders them by deadline, so the endpoint's single timer can be
// set to NextDeadline (DESIGN.md §5, STYLE.md §1).
//
// Requests are named by handles that Add returns; a handle is valid until Ack
// or until Expire gives it up, and may then be reused. Storage grows only
// when more requests are in flight than ever before, so a steady state
// allocates nothing. A Tracker is not safe for concurrent use.
//
// The caller's duties, in a loop:
//  1. On a first transmission: h := t.Add(now, rtt.Timeout(cfg)).
//  2. On the reply (the acknowledgement): if d, ok := t.Ack(h, now); ok, feed d
//     to the peer's RTT estimate.
//  3. When now >= NextDeadline: for each h, ok := t.Due(now) with ok true,
//     retransmit h when t.Expire(h, now, heard, rto) is true, else report h
//     undeliverable.
type Tracker struct {
	cfg      Config
	giveUp   time.Duration
	waitCap  time.Duration
	ents     []entry
	free     []int32
	heap     []int32 // handles, a binary min-heap on ents[h].deadline
	inFlight int
}

type entry struct {
	first    Time          // first transmission
	last     Time          // latest transmission
	deadline Time          // next retransmission or give-up
	wait     time.Duration // current wait
	attempts uint32        // transmissions so far; 0 = handle free
	hidx     int32         // position in heap
}

// NewTracker returns an empty Tracker. cfg must be valid (Config.Validate).
func NewTracker(cfg Config) *Tracker {
	return &Tracker{cfg: cfg, giveUp: cfg.GiveUpAfter(), waitCap: cfg.waitCap()}
}

// Config returns the configuration the Tracker was made with.
func (t *Tracker) Config() Config { return t.cfg }

// Len returns the number of requests in flight.
func (t *Tracker) Len() int { return t.inFlight }

// Add records the first transmission of a request at now, to be retransmitted
// after timeout (normally RTT.Timeout), and returns its handle.
func (t *Tracker) Add(now Time, timeout time.Duration) int {
	var h int32
	if n := len(t.free); n > 0 {
		h = t.free[n-1]
		t.free = t.free[:n-1]
	} else {
		h = int32(len(t.ents))
		t.ents = append(t.ents, entry{})
	}
	if timeout > t.waitCap {
		timeout = t.waitCap
	}
	if timeout <= 0 {
		timeout = 1
	}
	e := &t.ents[h]
	*e = entry{first: now, last: now, wait: timeout, attempts: 1}
	e.deadline = t.clampDeadline(e, now.Add(timeout))
	e.hidx = int32(len(t.heap))
	t.heap = append(t.heap, h)
	t.up(int(e.hidx))
	t.inFlight++
	return int(h)
}

// clampDeadline keeps a deadline no later than the give-up time.
func (t *Tracker) clampDeadline(e *entry, d Time) Time {
	if t.giveUp > 0 {
		if g := e.first.Add(t.giveUp); d > g {
			return g
		}
	}
	return d
}

// Attempts returns how many times the request h was transmitted, 0 if h is
// not in flight.
func (t *Tracker) Attempts(h int) int {
	if h < 0 || h >= len(t.ents) {
		return 0
	}
	return int(t.ents[h].attempts)
}

// Ack removes request h, answered at now. It returns the round-trip time and
// whether it is a valid RTT sample: by Karn's rule only a request transmitted
// exactly once gives one. Acking a handle not in flight returns (0, false).
func (t *Tracker) Ack(h int, now Time) (time.Duration, bool) {
	if h < 0 || h >= len(t.ents) || t.ents[h].attempts == 0 {
		return 0, false
	}
	e := &t.ents[h]
	rtt, once := now.Sub(e.first), e.attempts == 1
	t.remove(int32(h))
	return rtt, once
}

// NextDeadline returns the earliest deadline of the requests in flight, and
// false when none is in flight.
func (t *Tracker) NextDeadline() (Time, bool) {
	if len(t.heap) == 0 {
		return 0, false
	}
	return t.ents[t.heap[0]].deadline, true
}

// Due returns the earliest request whose deadline is at or before now, and
// false when there is none. The caller then decides its fate with Expire.
func (t *Tracker) Due(now Time) (h int, ok bool) {
	if len(t.heap) == 0 || t.ents[t.heap[0]].deadline > now {
		return 0, false
	}
	return int(t.heap[0]), true
}

// Expire handles request h, which Due returned at now. heard is when the
// request's peer was last heard from (any datagram; 0 for never) and rto
// the peer's current retransmission timeout (RTT.Timeout). When the peer
// has been silent for the give-up time (Config.GiveUpAfter, counted from the
// later of heard and h's first transmission), h is removed and Expire
// returns false: the caller reports it undeliverable. Otherwise h is
// rescheduled with the wait that Config.NextWait chooses and Expire returns
// true: the caller retransmits it.
func (t *Tracker) Expire(h int, now, heard Time, rto time.Duration) bool {
	e := &t.ents[h]
	silentFrom := max(e.first, heard)
	if t.giveUp > 0 && now.Sub(silentFrom) >= t.giveUp {
		t.remove(int32(h))
		return false
	}
	e.wait = t.cfg.NextWait(e.wait, rto, e.last, heard, now)
	e.attempts++
	e.last = now
	e.deadline = now.Add(e.wait)
	if t.giveUp > 0 {
		e.deadline = min(e.deadline, silentFrom.Add(t.giveUp))
	}
	i := int(e.hidx)
	t.down(i)
	t.up(i)
	return true
}

func (t *Tracker) remove(h int32) {
	e := &t.ents[h]
	i := int(e.hidx)
	last := len(t.heap) - 1
	if i != last {
		t.swap(i, last)
	}
	t.heap = t.heap[:last]
	if i != last {
		t.down(i)
		t.up(i)
	}
	*e = entry{}
	t.free = append(t.free, h)
	t.inFlight--
}

func (t *Tracker) less(i, j int) bool {
	return t.ents[t.heap[i]].deadline < t.ents[t.heap[j]].deadline
}

func (t *Tracker) swap(i, j int) {
	t.heap[i], t.heap[j] = t.heap[j], t.heap[i]
	t.ents[t.heap[i]].hidx = int32(i)
	t.ents[t.heap[j]].hidx = int32(j)
}

func (t *Tracker) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !t.less(i, p) {
			return
		}
		t.swap(i, p)
		i = p
	}
}

func (t *Tracker) down(i int) {
	n := len(t.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && t.less(r, l) {
			m = r
		}
		if !t.less(m, i) {
			return
		}
		t.swap(i, m)
		i = m
	}
}

// NextDeadlineOf returns the deadline of request h, and false when h is not
// in flight.
func (t *Tracker) NextDeadlineOf(h int) (Time, bool) {
	if h < 0 || h >= len(t.ents) || t.ents[h].attempts == 0 {
		return 0, false
	}
	return t.ents[h].deadline, true
}

// LastSent returns when request h was last transmitted, and false when h is
// not in flight.
func (t *Tracker) LastSent(h int) (Time, bool) {
	if h < 0 || h >= len(t.ents) || t.ents[h].attempts == 0 {
		return 0, false
	}
	return t.ents[h].last, true
}
