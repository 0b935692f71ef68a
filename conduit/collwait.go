package conduit

// This file is how the job's collectives are planned (the barrier's
// algorithm, trees in two levels), and how a rank waits in them.

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"
	"github.com/udpconduit/udpconduit/spawn"
)

// barrierAlgo is a barrier algorithm (GASNET_BARRIER). Every rank of a job
// runs the same one: the console's settings and its welcome's Crowded are
// the same for all.
type barrierAlgo uint8

const (
	// barrierDissem (AMDISSEM): in round k, member r tells member
	// (r+2^k) mod N that it is there and waits to hear the same from
	// member (r−2^k) mod N (Hensgen, Finkel and Manber): fewest steps,
	// but each round may wake every rank. All-gathers and small
	// all-to-alls then run Bruck's algorithms.
	barrierDissem barrierAlgo = iota
	// barrierTree (AMTREE): each member waits for its children in the
	// tree to arrive, tells its parent, waits to be released and
	// releases its children: most ranks wake once or twice, whatever N.
	// All-gathers and small all-to-alls then go through the tree too.
	barrierTree
	// barrierCentral (AMCENTRAL, as GASNet's): every member a child of
	// team rank 0.
	barrierCentral
)

// barrierNames are GASNET_BARRIER's values as validated, by algorithm.
var barrierNames = map[string]barrierAlgo{"AMDISSEM": barrierDissem, "AMTREE": barrierTree, "AMCENTRAL": barrierCentral}

// chooseBarrier picks the barrier: set is GASNET_BARRIER as validated
// (empty or one of barrierNames), crowded says that some host of the job
// is oversubscribed (spawn.Welcome.Crowded). why says which, for verbose
// mode.
func chooseBarrier(set string, crowded bool) (algo barrierAlgo, why string) {
	if a, ok := barrierNames[set]; ok {
		return a, "barrier " + set + " (GASNET_BARRIER as set)"
	}
	if crowded {
		return barrierTree, "barrier AMTREE: some host has more ranks than CPUs, where each round of a dissemination would wake every rank (set GASNET_BARRIER to choose)"
	}
	return barrierDissem, "barrier AMDISSEM (set GASNET_BARRIER to choose)"
}

// setPlan sets how World's collectives run over messages: the barrier's
// algorithm, and trees in two levels over leaders (every rank's group
// leader, shmLeaders) where hierarchical says so (nil: binomial). Before
// the job's first collective.
func (j *Job) setPlan(algo barrierAlgo, leaders []int) {
	p := j.world.plan
	p.TreeBarrier, p.TreeGather, p.Central = algo != barrierDissem, algo != barrierDissem, algo == barrierCentral
	p.Leaders = nil
	if leaders != nil && hierarchical(leaders) {
		// Trees in two levels, whose messages cross hosts only between
		// their leaders: barriers and all-gathers gather and release
		// over them too.
		p.Leaders, p.TreeBarrier, p.TreeGather = leaders, p.TreeBarrier || !p.Central, true
	}
}

// hierarchical reports whether the barrier should run in two levels: some
// shared-memory group has two ranks or more, and there are two groups or
// more (on one host, every message of a one-level barrier goes through
// shared memory already).
func hierarchical(leaders []int) bool {
	groups, shared := 0, false
	for r, l := range leaders {
		if l == r {
			groups++
		} else {
			shared = true
		}
	}
	return shared && groups > 1
}

// collWait is the wait of the collectives: it waits until cond. Unlike
// other waits it goes on for a while (a quarter of the exit timeout) when
// the console says the job has ended: another rank may have completed this
// collective and ended the job, and this one must complete it too (the
// messages it needs are on their way) to print what the program prints
// after it. A collective that cannot complete (a rank ended without
// entering it) then ends this rank.
func (j *Job) collWait(cond func() bool) error {
	err := j.ep.WaitUntil(func() bool { return cond() || j.leaving() || j.aborting.Load() })
	if !cond() && j.term.Load() {
		j.exitNow()
	}
	j.abort()
	return err
}

// hangWatch finds the collectives that a rank has waited in for longer
// than half of GASNET_HANG_WARN, and reports them. One timer looks at the
// waits in progress every quarter of GASNET_HANG_WARN (a period) while
// there are any, counting the periods, so that a wait costs no timer and
// no clock of its own: it records the period it began in, and is reported
// at the third look after it (between two and three periods, half and
// three quarters of GASNET_HANG_WARN, after it began). A rank waits in any
// number of collectives at once, one per team, each team in a slot of its
// own, which a wait enters and leaves with atomic stores alone.
type hangWatch struct {
	mu     sync.Mutex // over slots, the timer and period
	slots  []*hangSlot
	timer  *time.Timer
	armed  atomic.Bool // the timer runs; check and arming hold mu
	period time.Duration
	looks  atomic.Uint32 // the looks (check) so far
	report func(spawn.Coll) error
}

// hangSlot is a team's slot in a hangWatch: the wait in progress in a
// call of the team, if any. Only the team's caller writes call, before it
// stores state, and only when it changes; check reads call only while
// state holds that wait.
type hangSlot struct {
	t *Team
	// state: 0 with no wait; else the look the wait began at (high 32
	// bits), the call's number's low 30 bits (shifted by 2), hangReported,
	// hangActive.
	state atomic.Uint64
	// call: the call's kind (high 8 bits), its number's next 24 bits,
	// and its root (low 32 bits): the same for a team's calls in a row of
	// one kind and root, which then store nothing here.
	call atomic.Uint64
}

const (
	hangActive   = 1
	hangReported = 2
	hangSeqLow   = 1<<30 - 1
)

// coll describes the wait that state and call describe, for the console.
func (s *hangSlot) coll(state, call uint64) spawn.Coll {
	kind := coll.Kind(call >> 56).String()
	if !s.t.whole() {
		kind = "team " + kind
	}
	seq := (call>>32&(1<<24-1))<<30 | state>>2&hangSeqLow
	return spawn.Coll{Kind: kind, Seq: seq, Team: s.t.id, Root: int(int32(uint32(call)))}
}

// add adds s, team t's slot for its waits, and returns it.
func (h *hangWatch) add(s *hangSlot, t *Team) *hangSlot {
	s.t = t
	h.mu.Lock()
	h.slots = append(h.slots, s)
	h.mu.Unlock()
	return s
}

// enter records a wait in collective c in slot s.
func (h *hangWatch) enter(s *hangSlot, c *teamCall, warn time.Duration) {
	if call := uint64(c.call.Kind)<<56 | (c.seq>>30&(1<<24-1))<<32 | uint64(uint32(c.call.Root)); s.call.Load() != call {
		s.call.Store(call)
	}
	s.state.Store(uint64(h.looks.Load())<<32 | (c.seq&hangSeqLow)<<2 | hangActive)
	// check clears armed before it looks at the slots: either it sees
	// this wait, or this sees armed clear.
	if !h.armed.Load() {
		h.mu.Lock()
		if !h.armed.Load() {
			h.armed.Store(true)
			h.period = warn / 4
			if h.timer == nil {
				h.timer = time.AfterFunc(h.period, h.check)
			} else {
				h.timer.Reset(h.period)
			}
		}
		h.mu.Unlock()
	}
}

// leave ends the wait in slot s, telling the console when it was reported.
func (h *hangWatch) leave(s *hangSlot) {
	if v := s.state.Swap(0); v&hangReported != 0 {
		h.report(s.coll(v, s.call.Load()))
	}
}

// check reports the waits that have lasted two periods, and runs again a
// period later while any wait is in progress.
func (h *hangWatch) check() {
	var due []spawn.Coll
	h.mu.Lock()
	looks := h.looks.Add(1)
	h.armed.Store(false)
	busy := false
	for _, s := range h.slots {
		v := s.state.Load()
		if v&hangActive == 0 {
			continue
		}
		busy = true
		if v&hangReported != 0 || looks-uint32(v>>32) < 3 {
			continue
		}
		// The call word read before the state is confirmed: a call
		// that began since stored its word before its state.
		call := s.call.Load()
		if !s.state.CompareAndSwap(v, v|hangReported) {
			continue // it ended, and another began: seen at the next look
		}
		c := s.coll(v, call)
		c.In = true
		due = append(due, c)
	}
	if busy {
		h.armed.Store(true)
		h.timer.Reset(h.period)
	}
	report := h.report
	h.mu.Unlock()
	for _, c := range due {
		report(c)
	}
}
