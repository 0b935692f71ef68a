package conduit

// This file is the collectives' phase within a shared-memory group on
// shared words, as GASNet's PSHM barrier: no message, no queue, a store
// that the other ranks of the host load.

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/udpconduit/udpconduit/amudp"
)

// groupSync is a kind of synchronisation of a group (the collectives',
// the start-up's): where its words lie in a rank's area.
type groupSync struct {
	arrive  int // the leader's count of its members' arrivals
	release int // the leader's number of the last one released
	rounds  int // a rank's words of the dissemination, one per round
	// sleep: a waiting rank sleeps at once, never yields (wordWait):
	// the wait lasts until the slowest rank of the host has started.
	sleep bool
}

// Layout of a rank's area (amudp.Shared.Area): the words that several
// ranks write each on a cache line of its own, the dissemination's, which
// their owner alone writes, packed; then the slots of the collectives'
// posts (teamwords.go), the leader's buffer, and its staged posts.
var (
	syncColl = groupSync{arrive: 0, release: 64, rounds: 128}
	// syncStart, once at start-up (shareAreas), lies in the collectives'
	// cache lines, past their words: no dissemination.
	syncStart = groupSync{arrive: 8, release: 72, rounds: -1, sleep: true}
)

// The collectives' agreement word and verdict (agree.go), on the cache
// lines of their count of arrivals and release word.
const (
	offAgree = 16
	// offAcc, on the same line, is the accumulator of a reduction of
	// one integer element (coll.Accumulable), into which each rank
	// combines its encoded element before it arrives; offResult, on
	// the release line, the word that the rank completing the arrivals
	// found there, which each rank decodes (agree.go).
	offAcc     = 24
	offVerdict = 80
	offResult  = 96
	// offSleepers, on the release words' line, counts the group's
	// ranks that wait for a release and may sleep in the kernel
	// (wordWait): where none do, a release rings no bell.
	offSleepers = 88
)

const (
	// maxGroupRounds bounds the rounds of a dissemination within a
	// group: groups of up to 2^16 ranks.
	maxGroupRounds = 16
	// offSlots is where a rank's two slots begin, one for each parity
	// of the collective's number (teamwords.go has their layout).
	offSlots = 128 + 8*maxGroupRounds
	slotSize = 1664
	// offCombined is where the leader's buffer of a collective's posts
	// begins (see combinePosts), to its staged posts where the group is
	// counted, else to the area's end (words.room): the collective's
	// number, the posts' total length, and the posts.
	offCombined = offSlots + 2*slotSize
	// offStaged is where the leader's lines of staged posts begin, one
	// for each rank of a counted group (teamwords.go), to the end of
	// the area: the last page of the inbox's header. stagedLines is at
	// least the largest counted group (eagerAreas, TestWordsLayout).
	offStaged   = amudp.AreaSize - stagedLines*stagedSize
	stagedSize  = 64
	stagedLines = 64
	// combinedDirect, as the buffer's length, says that the posts did
	// not fit in it and are read from the slots.
	combinedDirect = ^uint64(0)
	// combinedSame, in the buffer's length, says that it holds one post
	// that is every rank's.
	combinedSame = 1 << 62
	// combinedReduced, in the buffer's length, says that it holds a
	// reduction's result (reducePosts).
	combinedReduced = 1 << 61
)

// words runs the synchronisation of a group's collectives on words in the
// inbox areas of the group's ranks (amudp.Shared.Area), in one of three
// ways. Counted, where every rank maps every area (counted): each rank
// counts its arrival at synchronisation e of a kind into a word of the
// leader's area (the group's lowest rank); the one whose arrival brings
// the count to (ranks)·e copies the posts into the leader's buffer
// (combinePosts), stores e into the leader's release word and wakes the
// ranks that sleep (amudp.Shared.Notify); the others wait until the
// release word reaches e. Gathered and released, in a larger group: the
// same, but the members count and the leader waits for the count to reach
// (members)·e and releases them. Each waiting rank wakes once.
// Dissemination, for a job that is one group whose ranks fit its CPUs, or
// where GASNET_BARRIER is AMDISSEM and the group crowded is of up to
// eagerAreas ranks (setWay): in
// round i, each rank stores e into its word of round i and waits until the
// rank 2^i before it has done the same: ⌈log2 G⌉ one-way latencies instead
// of two, but each round may wake each rank. A rank completes e before it
// arrives at e+1, so the words only grow and need no reset. Only a job of
// one group runs its collectives on words (teamwords.go); data too large
// for a slot, and the collectives of a job of several groups, go over
// active messages.
type words struct {
	sh     *amudp.Shared
	addrs  []netip.AddrPort // of every rank of the job, by rank
	bells  []amudp.Bell     // Notify of each, in group order
	group  []int            // the group's ranks, in order; group[0] leads
	me     int              // this rank's index in group
	whole  bool             // the group is the whole job
	dissem bool             // by dissemination (set before the first)
	// yield: the host's ranks outnumber its CPUs; a waiting rank yields
	// the CPU between looks at the words for up to yieldFor before it
	// sleeps (see wordWait).
	yield bool
	// counted: every rank of the group, the leader too, counts its
	// arrival, and the one that completes the count releases the group
	// (see arriveCounted).
	counted bool

	mu    sync.Mutex
	areas []atomic.Pointer[[]byte] // by index in group, once mapped

	// fatal ends the job for a value in an area that no rank of the job
	// writes there (Job.fatal; nil for words tested alone), and bad
	// keeps the first such value found (see corrupt).
	fatal func(error)
	bad   atomic.Pointer[amudp.InboxError]
}

// newWords returns the words of rank's group (shmGroup of leaders) over
// sh, whose inboxes SetInboxes named; addrs are every rank's addresses.
func newWords(sh *amudp.Shared, addrs []netip.AddrPort, group []int, rank int) *words {
	w := &words{sh: sh, group: group, whole: len(group) == len(addrs), areas: make([]atomic.Pointer[[]byte], len(group)),
		addrs: addrs, bells: make([]amudp.Bell, len(group))}
	for i, r := range group {
		w.bells[i] = sh.Bell(addrs[r])
		if r == rank {
			w.me = i
		}
	}
	return w
}

// setWay chooses how the group synchronises (see words): by
// dissemination where the barrier is AMDISSEM, but in a crowded group
// (yield) of more than eagerAreas ranks, where each rank would map every
// other's inbox; else counted where every rank maps every area
// (shareAreas), else gathered and released. After yield is set, before
// shareAreas.
func (w *words) setWay(algo barrierAlgo) {
	w.dissem = algo == barrierDissem && len(w.group) <= 1<<maxGroupRounds && (!w.yield || len(w.group) <= eagerAreas)
	w.counted = !w.dissem && len(w.group) <= eagerAreas
}

// room returns how many bytes of posts the leader's buffer holds, past
// its number and length: to the staged posts where counted, else to the
// area's end.
func (w *words) room() int {
	end := amudp.AreaSize
	if w.counted {
		end = offStaged
	}
	return end - offCombined - 16
}

// leads reports whether this rank leads its group.
func (w *words) leads() bool { return w.me == 0 }

// area returns the area of the group's i-th rank, mapped on first use.
func (w *words) area(i int) ([]byte, error) {
	if a := w.areas[i].Load(); a != nil {
		return *a, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if a := w.areas[i].Load(); a != nil {
		return *a, nil
	}
	a := w.sh.Area(w.addrs[w.group[i]])
	if len(a) != amudp.AreaSize {
		return nil, fmt.Errorf("shared memory: the inbox of rank %d, in this rank's group, cannot be mapped", w.group[i])
	}
	w.areas[i].Store(&a)
	return a, nil
}

// corrupt reports that the area of the group's i-th rank holds a value
// that no rank of the job writes there, as the rules of the collectives
// on words bound them (what: which, and the bound): that rank's inbox is
// corrupted, and the job ends as for a corrupted queue (w.fatal, which
// in a worker does not return). It returns the error, which the caller
// returns; a look at words in a wait's condition returns true on it, and
// the wait then fails with it (wordWait).
func (w *words) corrupt(i int, format string, a ...any) error {
	err := &amudp.InboxError{Rank: w.group[i], Addr: w.addrs[w.group[i]], By: w.group[w.me], What: fmt.Sprintf(format, a...)}
	if !w.bad.CompareAndSwap(nil, err) {
		return w.bad.Load()
	}
	if w.fatal != nil {
		w.fatal(err)
	}
	return err
}

// broken is corrupt for the condition of a wait, which it ends: it
// returns true.
func (w *words) broken(i int, format string, a ...any) bool {
	w.corrupt(i, format, a...)
	return true
}

// err returns the value that corrupt reported, or nil.
func (w *words) err() error {
	if e := w.bad.Load(); e != nil {
		return e
	}
	return nil
}

// word returns the word at off in area a.
func word(a []byte, off int) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&a[off])) }

// arrive counts this member's arrival at synchronisation e of kind k, and
// wakes the leader if it sleeps. Members only.
func (w *words) arrive(k *groupSync, e uint64) error {
	a, err := w.area(0)
	if err != nil {
		return err
	}
	word(a, k.arrive).Add(1)
	return w.bells[0].Ring()
}

// arrived reports whether every member has arrived at synchronisation e of
// kind k. The leader only, after area(0) succeeded. A member arrives at
// e+1 only once the leader has released e, so the count is at most
// (members)·e: more is corrupt.
func (w *words) arrived(k *groupSync, e uint64) bool {
	a := *w.areas[0].Load()
	want, n := uint64(len(w.group)-1)*e, word(a, k.arrive).Load()
	if n > want {
		return w.broken(0, "an arrival count of %#x, beyond %d members at synchronisation %d", n, len(w.group)-1, e)
	}
	return n >= want
}

// release releases the group's other ranks from synchronisation e of
// kind k and, where some rank of the group may sleep (offSleepers),
// rings their bells, which wakes those that sleep: the leader gathering,
// or the rank whose arrival completed the count (arriveCounted).
func (w *words) release(k *groupSync, e uint64) error {
	a, err := w.area(0)
	if err != nil {
		return err
	}
	word(a, k.release).Store(e)
	if word(a, offSleepers).Load() == 0 {
		// No rank sleeps: the ranks that wait look at the word at
		// their turns (wordWait).
		return nil
	}
	for i, b := range w.bells {
		if i == w.me {
			continue
		}
		if err := b.Ring(); err != nil {
			return err
		}
	}
	return nil
}

// released reports whether synchronisation e of kind k is released.
// Members, or any rank where it is counted, after area(0) succeeded. No
// rank releases e+1 before this one has arrived at it: a word beyond e is
// corrupt.
func (w *words) released(k *groupSync, e uint64) bool {
	a := *w.areas[0].Load()
	v := word(a, k.release).Load()
	if v > e {
		return w.broken(0, "a release word of %#x, while this rank waits for %d", v, e)
	}
	return v >= e
}

// yieldFor bounds how long a rank of a crowded host (words.yield) that
// waits for a word to change gives the CPU to the host's other ranks
// (sched_yield) between looks, before it sleeps in the kernel until a
// Notify wakes it: the ranks of a collective that all wait take turns on
// the CPUs and each sees the words change at its next turn, with no
// wake-up to pay for, as Open MPI's ranks do; a rank that waits for
// longer (another one computes) stops taking turns from it.
const yieldFor = 20 * time.Millisecond

// yieldPoll is how often, in turns on the CPU, a rank that yields while
// it waits for a word (wordWait) polls whatever its inbox holds; at the
// other turns it polls only if its inbox holds a record
// (Endpoint.Pending). A poll pass reads the socket now and then, the
// clock and the timers, a cost a crowded rank would pay at each of its
// turns (BENCHMARKS.md); a datagram or a due retransmission waits at most
// yieldPoll-1 turns. A variable for tests.
var yieldPoll = 16

// yieldTurn is how wordWait yields: yieldCPU, or a count of the turns in
// tests.
var yieldTurn = yieldCPU

// waitTicks is the counter a yielding wait reads (yieldClock): ticks, or
// one that stands still in tests.
var waitTicks = ticks

// watch is what a wait for words (wordWait) watches between its looks at
// its condition: the condition holds only once word has reached at least
// mark (a count, a number that only grow). released: word is the group's
// release word, whose releaser rings only where some rank of the group
// sleeps (offSleepers).
type watch struct {
	word     *atomic.Uint64
	mark     uint64
	released bool
}

// wordWait waits in synchronisation of kind k, servicing the network,
// until cond (a look at words) holds, which it does only once ww's word
// reaches its mark. A rank of a crowded host yields the CPU at each turn
// (see yieldFor); between two whole looks (cond, a poll of the network
// every yieldPoll turns, the clock, the job's end) it takes up to
// yieldPoll-1 turns that load only ww's word and its inbox's head
// (quietTurns): a turn on a crowded host is a context switch, whose
// cost grows with each page and line the rank touches in it.
func (j *Job) wordWait(w *words, k *groupSync, ww watch, cond func() bool) error {
	if w.yield && !k.sleep && !cond() {
		var clk yieldClock
		clk.begin(waitTicks())
		for turn := 1; ; turn++ {
			if turn > 1 && clk.up(turn, waitTicks(), time.Now) {
				break
			}
			if turn%yieldPoll == 0 || j.ep.Pending() {
				if err := j.ep.Poll(); err != nil {
					return err
				}
			}
			if turn > 1 && cond() || j.leaving() || j.aborting.Load() {
				break
			}
			yieldTurn()
			if ww.word.Load() < ww.mark {
				// Only a wait that goes on looks up the inbox's head:
				// in a barrier, most end at their first turn.
				turn += quietTurns(ww, j.ep.Probe(), &clk, yieldPoll-1-turn%yieldPoll)
			}
			if ww.word.Load() >= ww.mark && cond() {
				// What collWait does once cond holds, on the turn
				// that sees it, touching no more than it needs.
				j.abort()
				return w.err()
			}
		}
	}
	if ww.released {
		// The releaser rings this rank's bell only if it finds it
		// counted, after its store to the word that cond loads: either
		// it rings, or cond, which WaitUntil looks at before it sleeps,
		// finds the release.
		s := word(*w.areas[0].Load(), offSleepers)
		s.Add(1)
		defer s.Add(^uint64(0))
	}
	if err := j.collWait(cond); err != nil {
		return err
	}
	return w.err()
}

// quietTurns yields up to n turns while ww's word is below its mark, p
// finds no record in the inbox and clk reads no clock (yieldClock.due),
// and returns how many it yielded.
func quietTurns(ww watch, p amudp.Probe, clk *yieldClock, n int) int {
	i := 0
	for ; i < n && ww.word.Load() < ww.mark && !p.Pending() && !clk.due(waitTicks()); i++ {
		yieldTurn()
	}
	return i
}

// shareAreas maps, at start-up, the areas that this rank's collectives
// read, and then synchronises the group once: no rank returns from Init
// before every rank of the group has mapped them. A mapping keeps its
// inbox, so a collective that another rank completed before it ended (its
// Exit, say) still reads that rank's words and parts; mapped on first use
// instead, an inbox whose rank had ended could no longer be mapped. By
// dissemination, and in a group of up to eagerAreas ranks, each rank
// reads every area, and maps them all; in a larger group gathered and
// released, a member reads the leader's (its release word and buffer of
// posts) and maps only that one, and the leader maps them all: G² mappings
// there would cost the host more page tables and start-up than the job
// has use for. A collective whose posts do not fit the leader's buffer
// (combinePosts) goes over messages there (errOverMessages).
func (j *Job) shareAreas(w *words) error {
	for i := range w.group {
		if !w.dissem && len(w.group) > eagerAreas && !w.leads() && i != 0 && i != w.me {
			continue
		}
		if _, err := w.area(i); err != nil {
			return err
		}
	}
	return j.syncGroup(w, &syncStart, 1, func() error { return nil })
}

// eagerAreas is the largest group whose ranks each map every area at
// start-up (shareAreas), and so synchronise counted (setWay) unless they
// disseminate; a larger group is gathered and released.
var eagerAreas = 64

// syncGroup runs synchronisation e of kind k within the group, counted
// (arriveCounted) or gathered and released: there every member arrives, and
// returns once the leader has released it; the leader waits for them all,
// runs before and releases them.
func (j *Job) syncGroup(w *words, k *groupSync, e uint64, before func() error) error {
	if _, err := w.area(0); err != nil {
		return err
	}
	released, err := j.arriveGroup(w, k, e, before)
	if err != nil || released {
		return err
	}
	return j.awaitGroup(w, k, e, before)
}

// arriveGroup is this rank's arrival at synchronisation e of kind k
// (syncGroup), after area(0) succeeded: counted, its count, and where it
// completed the count, before and the release (released true); a
// member's count; the leader's nothing.
func (j *Job) arriveGroup(w *words, k *groupSync, e uint64, before func() error) (released bool, err error) {
	switch {
	case w.counted:
		return j.arriveCounted(w, k, e, before)
	case !w.leads():
		return false, w.arrive(k, e)
	}
	return false, nil
}

// awaitGroup is the rest of synchronisation e of kind k after this rank's
// arrival (arriveGroup) did not release it: counted, or a member, the wait
// for the release; the leader's wait for its members, before, and their
// release.
func (j *Job) awaitGroup(w *words, k *groupSync, e uint64, before func() error) error {
	a := *w.areas[0].Load()
	if w.counted || !w.leads() {
		return j.wordWait(w, k, watch{word(a, k.release), e, true}, func() bool { return w.released(k, e) })
	}
	if err := j.wordWait(w, k, watch{word(a, k.arrive), uint64(len(w.group)-1) * e, false}, func() bool { return w.arrived(k, e) }); err != nil {
		return err
	}
	if err := before(); err != nil {
		return err
	}
	return w.release(k, e)
}

// arriveCounted is a rank's arrival at synchronisation e of kind k within
// a group whose ranks have mapped every area: each rank, the leader too,
// adds its arrival to the leader's count, and the one that brings it to
// (ranks)·e runs before, releases e and wakes the ranks that sleep
// (released true); the others then wait for the release (awaitGroup).
// No rank waits for a look of the leader's after the last arrival, which
// on a crowded host is a turn on a CPU.
func (j *Job) arriveCounted(w *words, k *groupSync, e uint64, before func() error) (released bool, err error) {
	a := *w.areas[0].Load()
	g := uint64(len(w.group))
	// Every rank arrived at e-1 before any left it, this one too.
	n := word(a, k.arrive).Add(1)
	if n <= g*(e-1) || n > g*e {
		return false, w.corrupt(0, "an arrival count of %#x, where %d ranks arrive at synchronisation %d", n, g, e)
	}
	if n < g*e {
		return false, nil
	}
	if err := before(); err != nil {
		return false, err
	}
	return true, w.release(k, e)
}

// passive reports whether what remains of a synchronisation after this
// rank's arrival (arriveGroup, or a dissemination's first ring) is a wait
// for words that other ranks store, with nothing more of this rank's for
// them: counted, a member's, or a dissemination of one round.
func (w *words) passive() bool {
	if w.dissem {
		return len(w.group) <= 2
	}
	return w.counted || !w.leads()
}

// post stores e into this rank's word of round i of a dissemination of
// kind k, and wakes the rank that waits for it if it sleeps.
func (w *words) post(k *groupSync, i int, e uint64) error {
	own, err := w.area(w.me)
	if err != nil {
		return err
	}
	word(own, k.rounds+8*i).Store(e)
	return w.bells[(w.me+1<<i)%len(w.group)].Ring()
}

// disseminate runs synchronisation e of kind k as a dissemination (see
// words). With slots, its first round is the posts of collective e: each
// rank has numbered its slot e and rung the next rank's bell
// (teamwords.go), and waits for the rank before it to have done the same
// (numbered), so that the round's word and the post it announces travel
// in one cache line.
func (j *Job) disseminate(w *words, k *groupSync, e uint64, slots bool) error {
	g := len(w.group)
	for i := 0; 1<<i < g; i++ {
		from := (w.me - 1<<i + g) % g
		a, err := w.area(from)
		if err != nil {
			return err
		}
		if i == 0 && slots {
			if err := j.wordWait(w, k, watch{word(slot(a, e), 0), e, false}, func() bool { return w.numbered(from, a, e) }); err != nil {
				return err
			}
			continue
		}
		if err := w.post(k, i, e); err != nil {
			return err
		}
		// The rank before may post e+1 (it completed e), not e+2,
		// which needs this rank to have arrived at e+1.
		r := word(a, k.rounds+8*i)
		if err := j.wordWait(w, k, watch{r, e, false}, func() bool {
			v := r.Load()
			if v > e+1 {
				return w.broken(from, "its word of round %d holds %#x, while this rank waits for %d", i, v, e)
			}
			return v >= e
		}); err != nil {
			return err
		}
	}
	return nil
}

// numbered reports whether the slot of collective e in area a, of the
// group's rank from, is numbered e: the rank before has posted e in a
// dissemination. That rank rewrites the slot of e's parity only at e+2,
// after this rank has arrived at e+1: any other number is corrupt.
func (w *words) numbered(from int, a []byte, e uint64) bool {
	v := word(slot(a, e), 0).Load()
	if v != e && !(v < e && e-v == 2) && !(v == 0 && e <= 2) {
		return w.broken(from, "its slot is numbered %#x, while this rank waits for %d", v, e)
	}
	return v == e
}
