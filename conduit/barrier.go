package conduit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/internal/binomial"
	"github.com/udpconduit/udpconduit/spawn"
)

// hBarrier is the core handler of the barrier's messages: args are the
// barrier's number (its parity is what matters) and the round, or for the
// gather/release barriers roundArrive or roundRelease.
const hBarrier = 2

// maxRounds bounds the rounds of a dissemination barrier: ⌈log2 N⌉ for N up
// to 2^32.
const maxRounds = 32

// The rounds of the gather/release barriers' messages: a rank's subtree
// has arrived, and the barrier is complete.
const (
	roundArrive  = maxRounds
	roundRelease = maxRounds + 1
)

// barrierAlgo is a barrier algorithm (GASNET_BARRIER). Every rank of a job
// runs the same one: the console's settings and its welcome's Crowded are
// the same for all.
type barrierAlgo uint8

const (
	// barrierDissem (AMDISSEM): in round k of barrier e, rank r tells
	// rank (r+2^k) mod N that it is there and waits to hear the same
	// from rank (r−2^k) mod N (Hensgen, Finkel and Manber); after
	// ⌈log2 N⌉ rounds every rank has heard, through some chain, from
	// every other. Fewest steps, but each round may wake every rank.
	barrierDissem barrierAlgo = iota
	// barrierTree (AMTREE): each rank waits for its children in the
	// binomial tree (package binomial, rooted at 0) to arrive, tells its parent,
	// waits to be released and releases its children: 2(N−1) messages,
	// and most ranks wake once or twice, whatever N.
	barrierTree
	// barrierCentral (AMCENTRAL, as GASNet's): the same with every rank a
	// child of rank 0.
	barrierCentral
	// barrierHier: the same over a tree in two levels, messages only:
	// the ranks of a group gather at its leader over a binomial tree, and
	// the leaders, one per group, over a binomial tree among themselves.
	// Init sets it (setHier) with the two-level collectives and then
	// replaces it with barrierWords, whose groups use shared words; it
	// runs where groups have no words (the in-memory network of tests).
	barrierHier
	// barrierWords (GASNET_PSHM_BARRIER_HIER, where ranks share memory):
	// each shared-memory group synchronises on shared words (words), and
	// the leaders, one per group, gather and release over a binomial tree
	// among themselves over active messages.
	barrierWords
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

// amBarrier is the state of the barrier, which runs over active messages
// among the ranks (barrierAlgo says how). No rank can be more than one
// barrier ahead of another (finishing barrier e+1 needs every rank in it),
// so the counts of heard messages are kept for the two parities of e.
// Exactly-once delivery of active messages makes a count the number of
// ranks heard from.
type amBarrier struct {
	heard [2][maxRounds + 2]atomic.Uint32 // messages received, by parity and round
	acked answered                        // its current barrier is the last one entered

	index    [2]uint64 // Job.calls of the barrier of each parity; under mu
	algo     barrierAlgo
	parent   int    // in the gather/release tree; -1 at its root
	children []int  // in the gather/release tree
	words    *words // the group's phase, for barrierWords
	// bruck says that all-gathers over active messages run Bruck's
	// algorithm (treeAllGather otherwise).
	bruck bool

	mu        chanMutex // one barrier at a time on this rank; guards completed and gathered
	completed uint64    // the last barrier this rank completed
	gathered  bool      // the current barrier's children have arrived (gather/release)
}

// setAlgo sets the algorithm and, for the gather/release barriers, this
// rank's place in their tree. Before the job's first barrier.
func (b *amBarrier) setAlgo(algo barrierAlgo, rank, size int) {
	b.algo, b.parent, b.children, b.bruck = algo, -1, nil, algo == barrierDissem
	switch algo {
	case barrierTree:
		if rank > 0 {
			b.parent = binomial.Parent(rank)
		}
		b.children = binomial.Children(rank, size)
	case barrierCentral:
		if rank > 0 {
			b.parent = 0
		} else {
			for c := 1; c < size; c++ {
				b.children = append(b.children, c)
			}
		}
	}
}

// setHier sets the hierarchical barrier (barrierHier) and rank's place in
// its tree, given every rank's group leader (shmLeaders): the two-level
// tree of hierTree rooted at rank 0, always a leader. Before the job's
// first barrier.
func (b *amBarrier) setHier(leaders []int, rank int) {
	parent, children := hierTree(leaders, 0, rank)
	b.algo, b.parent, b.children, b.bruck = barrierHier, parent.rank, nil, false
	for _, c := range children {
		b.children = append(b.children, c.rank)
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

// sharing reports whether some shared-memory group has two ranks or more.
func sharing(leaders []int) bool {
	for r, l := range leaders {
		if l != r {
			return true
		}
	}
	return false
}

// answered counts the replies to a collective's own messages, by the
// parity of the collective's number (no rank is two collectives of a kind
// ahead), and knows the collective in progress: a message that cannot be
// delivered counts as answered (see Job.returned).
type answered struct {
	n       [2]atomic.Uint32
	current atomic.Uint64
}

func (a *answered) enter(n uint64)   { a.current.Store(n) }
func (a *answered) add(n uint32)     { a.n[n&1].Add(1) }
func (a *answered) returned()        { a.n[a.current.Load()&1].Add(1) }
func (a *answered) last() uint64     { return a.current.Load() }
func (a *answered) consume(want int) { a.n[a.current.Load()&1].Add(-uint32(want)) }

// has reports whether want replies to the current collective's messages
// have come.
func (a *answered) has(want int) bool { return a.n[a.current.Load()&1].Load() >= uint32(want) }

// chanMutex is a mutex whose waiters block on a channel: a goroutine that
// waits for another's barrier then blocks as testing/synctest can see
// (durably), so that a test's fake clock still advances.
type chanMutex struct {
	once sync.Once
	ch   chan struct{}
}

func (m *chanMutex) Lock() {
	m.once.Do(func() { m.ch = make(chan struct{}, 1) })
	m.ch <- struct{}{}
}

func (m *chanMutex) Unlock() { <-m.ch }

// message runs for each barrier message, and for the reply that
// acknowledges it: args are the barrier number and the round. A rank leaves
// a barrier only once its own messages are acknowledged: one that went on
// computing (or ended) with a message still to retransmit would hold the
// others in the barrier.
func (b *amBarrier) message(t *amudp.Token, args []uint32, _ []byte) {
	if len(args) != 2 || args[1] > roundRelease {
		return // not one of ours
	}
	if !t.IsRequest() {
		b.acked.add(args[0])
		return
	}
	b.heard[args[0]&1][args[1]].Add(1)
	t.ReplyShort(hBarrier, args[0], args[1])
}

// rounds is the number of rounds of a barrier of n ranks.
func rounds(n int) int {
	k := 0
	for 1<<k < n {
		k++
	}
	return k
}

// enterLocked enters the next barrier, once the one entered before (if not
// waited for) is complete and every request this rank sent is answered:
// its first round's message, or its arrival if its children have arrived
// already. It returns the barrier's number. b.mu held.
func (j *Job) enterLocked() (uint64, error) {
	b := &j.bar
	if e := b.acked.last(); b.completed < e {
		if err := j.completeLocked(e); err != nil {
			return e, err
		}
	}
	if err := j.ep.Drain(); err != nil {
		return 0, err
	}
	e := j.nextBarrier()
	b.acked.enter(e)
	b.gathered = false
	if j.size == 1 {
		return e, nil
	}
	if w := b.words; w != nil && w.dissem {
		return e, w.post(&syncBarrier, 0, e)
	}
	if b.algo != barrierDissem {
		return e, j.gatherLocked(e, false)
	}
	return e, j.ep.RequestShort((j.rank+1)%j.size, hBarrier, uint32(e), 0)
}

// completeLocked waits for barrier e to complete. b.mu held.
func (j *Job) completeLocked(e uint64) error {
	b := &j.bar
	err := j.waitIn("barrier", e, b.index[e&1], func() error {
		if w := b.words; w != nil && w.dissem {
			return j.disseminate(w, &syncBarrier, e, true)
		}
		if b.algo == barrierDissem {
			return j.disseminateLocked(e)
		}
		return j.gatherReleaseLocked(e)
	})
	if err != nil {
		return err
	}
	b.completed = e
	j.ep.Fence()
	return nil
}

// disseminateLocked waits for the rounds of dissemination barrier e,
// sending each next round's message as the previous one's arrives, then
// for the answers to its own messages. b.mu held.
func (j *Job) disseminateLocked(e uint64) error {
	b := &j.bar
	p := e & 1
	for k := 0; k < rounds(j.size); k++ {
		if k > 0 {
			if err := j.ep.RequestShort((j.rank+1<<k)%j.size, hBarrier, uint32(e), uint32(k)); err != nil {
				return err
			}
		}
		c := &b.heard[p][k]
		if err := j.collWait(func() bool { return c.Load() > 0 }); err != nil {
			return err
		}
		c.Add(^uint32(0)) // consumed: the count is for barrier e+2 now
	}
	return j.answeredLocked(rounds(j.size))
}

// gatherLocked takes the arrivals of this rank's children in barrier e
// and tells its parent that its subtree has arrived, once: when the
// children have arrived, or with wait, after waiting for them. b.mu held.
func (j *Job) gatherLocked(e uint64, wait bool) error {
	b := &j.bar
	if b.gathered {
		return nil
	}
	if w := b.words; w != nil {
		// The group first, on its words: a member arrives there, once,
		// and is done; the leader goes on once its members have arrived.
		if _, err := w.area(0); err != nil {
			return err
		}
		if !w.leads() {
			b.gathered = true
			return w.arrive(&syncBarrier, e)
		}
		ok := func() bool { return w.arrived(&syncBarrier, e) }
		if wait {
			if err := j.wordWait(w, ok); err != nil {
				return err
			}
		} else if !ok() {
			return nil
		}
	}
	c, want := &b.heard[e&1][roundArrive], uint32(len(b.children))
	if wait {
		if err := j.collWait(func() bool { return c.Load() >= want }); err != nil {
			return err
		}
	} else if c.Load() < want {
		return nil
	}
	c.Add(-want) // consumed: the count is for barrier e+2 now
	b.gathered = true
	if b.parent < 0 {
		return nil
	}
	return j.ep.RequestShort(b.parent, hBarrier, uint32(e), roundArrive)
}

// gatherReleaseLocked completes gather/release barrier e: its subtree
// gathered, it waits for its parent's release, releases its children and
// waits for the answers to its own messages. A child cannot arrive at
// barrier e+2 before this rank released it from e+1, so two counts of
// arrivals (by parity) suffice here too. b.mu held.
func (j *Job) gatherReleaseLocked(e uint64) error {
	b := &j.bar
	if err := j.gatherLocked(e, true); err != nil {
		return err
	}
	w := b.words
	if w != nil && !w.leads() {
		return j.wordWait(w, func() bool { return w.released(&syncBarrier, e) })
	}
	sent := len(b.children)
	if b.parent >= 0 {
		sent++
		c := &b.heard[e&1][roundRelease]
		if err := j.collWait(func() bool { return c.Load() > 0 }); err != nil {
			return err
		}
		c.Add(^uint32(0))
	}
	for _, c := range b.children {
		if err := j.ep.RequestShort(c, hBarrier, uint32(e), roundRelease); err != nil {
			return err
		}
	}
	if w != nil {
		if err := w.release(&syncBarrier, e); err != nil {
			return err
		}
	}
	return j.answeredLocked(sent)
}

// answeredLocked waits until the current barrier's sent messages are
// answered, and consumes their answers. b.mu held.
func (j *Job) answeredLocked(sent int) error {
	b := &j.bar
	if err := j.collWait(func() bool { return b.acked.has(sent) }); err != nil {
		return err
	}
	b.acked.consume(sent)
	return nil
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
	if !cond() && j.ctl.Terminating() {
		j.exitNow()
	}
	j.abort()
	return err
}

// waitIn runs wait, the waiting part of collective number seq of the given
// kind; if it lasts longer than half of GASNET_HANG_WARN, this rank tells
// the console where it waits (and again when it leaves), so that the
// console can say which ranks are in which collective when they do not
// match. A job whose collectives match never reports.
func (j *Job) waitIn(kind string, seq, index uint64, wait func() error) error {
	return j.waitInColl(spawn.Coll{Kind: kind, Seq: seq, Index: index}, wait)
}

// waitInColl is waitIn for the collective c says (its In aside).
func (j *Job) waitInColl(c spawn.Coll, wait func() error) error {
	if j.hangWarn <= 0 {
		return wait()
	}
	i := j.watch.enter(c, j.hangWarn, j.ctl.Report)
	err := wait()
	j.watch.leave(i)
	return err
}

// hangWatch finds the collectives that a rank has waited in for longer
// than half of GASNET_HANG_WARN, and reports them (see waitIn). One timer
// looks at the waits in progress every quarter of GASNET_HANG_WARN while
// there are any, so that a wait costs no timer of its own: a wait is
// reported between half and three quarters of GASNET_HANG_WARN after it
// began. A rank waits in at most one collective of the whole job of each
// lock at once (barrier, all-gather, the others), hence three fixed slots,
// and in any number of team collectives (one per team), each in a slot of
// its own for the wait.
type hangWatch struct {
	mu     sync.Mutex
	waits  map[int]hangWait
	teams  int // slots given to team collectives' waits so far
	timer  *time.Timer
	armed  bool
	period time.Duration
	report func(spawn.Coll) error
}

// hangWait is a wait in progress in one slot of a hangWatch.
type hangWait struct {
	c        spawn.Coll
	since    time.Time
	active   bool
	reported bool
}

// watchSlot is the slot of the collectives of kind, by the lock that
// serialises them on a rank.
func watchSlot(kind string) int {
	switch kind {
	case "barrier":
		return 0
	case "all-gather":
		return 1
	}
	return 2
}

// enter records a wait in collective c, and returns its slot.
func (h *hangWatch) enter(c spawn.Coll, warn time.Duration, report func(spawn.Coll) error) int {
	now := time.Now()
	h.mu.Lock()
	i := watchSlot(c.Kind)
	if c.InTeam() {
		h.teams++
		i = 2 + h.teams
	}
	if h.waits == nil {
		h.waits = map[int]hangWait{}
	}
	h.waits[i] = hangWait{c: c, since: now, active: true}
	if !h.armed {
		h.armed, h.period, h.report = true, warn/4, report
		if h.timer == nil {
			h.timer = time.AfterFunc(h.period, h.check)
		} else {
			h.timer.Reset(h.period)
		}
	}
	h.mu.Unlock()
	return i
}

// leave ends the wait in slot i, telling the console when it was reported.
func (h *hangWatch) leave(i int) {
	h.mu.Lock()
	w := h.waits[i]
	if i > 2 {
		delete(h.waits, i) // a team collective's
	} else {
		h.waits[i] = hangWait{}
	}
	h.mu.Unlock()
	if w.reported {
		w.c.In = false
		h.report(w.c)
	}
}

// check reports the waits that have lasted two periods, and runs again a
// period later while any wait is in progress.
func (h *hangWatch) check() {
	var due []spawn.Coll
	h.mu.Lock()
	busy := false
	for i, w := range h.waits {
		if !w.active {
			continue
		}
		busy = true
		if !w.reported && time.Since(w.since) >= 2*h.period {
			w.reported = true
			h.waits[i] = w
			c := w.c
			c.In = true
			due = append(due, c)
		}
	}
	h.armed = busy
	if busy {
		h.timer.Reset(h.period)
	}
	report := h.report
	h.mu.Unlock()
	for _, c := range due {
		report(c)
	}
}

// barrierError wraps a failed barrier's error with its number.
func barrierError(e uint64, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("barrier %d: %w", e, err)
}
