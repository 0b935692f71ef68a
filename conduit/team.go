package conduit

// This file is teams: groups of the job's ranks that run collectives
// among themselves (MPI's communicators, GASNet-EX's gex_TM_t), the whole
// job's (World) among them, and the order of a rank's calls on each.

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// Team is a group of the job's ranks that run collectives together, ranked
// 0..Size()-1 (MPI's communicator, GASNet-EX's gex_TM_t); World is the whole
// job, and Split makes sub-teams. Members call a team's collectives in the
// same order; a rank's concurrent calls on one team run in the order made,
// and different teams are independent. When members call a collective
// differently, or one refuses its arguments, each member gets an error
// wrapping ErrCollectiveMismatch or ErrCollectiveArgument and the team goes
// on; a member that had already returned its result (a broadcast's root)
// aborts the job instead, naming the calls (DESIGN.md §7).
type Team struct {
	j     *Job
	id    uint64
	ranks []int       // team rank → job rank
	index map[int]int // job rank → team rank; nil for the whole job
	me    int         // this rank's team rank
	plan  *coll.Plan  // how its collectives run over messages
	watch *hangSlot   // its slot in the job's hang watch: slot, once added
	// slot is held in the team, whose lines a collective reads anyway.
	slot hangSlot

	// The collective in progress, reused by each in turn: its link,
	// engine, this rank's record in an exchange (teamwords.go), and the
	// posts of the exchange with the arena that holds their data, and
	// where they are one post, every rank's, its record (sameRec).
	call    teamCall
	run     coll.Run
	rec     []byte
	posts   []coll.Post
	arena   []byte
	sameRec []byte
	reduced []byte   // the record of a reduction's result (reducePosts)
	vec     []byte   // a reduction's vector of up to maxPost bytes (packVec), a split NB one's until it completes
	slab    []uint64 // what remains of the slab of small results (resultVec)
	// ops: what remains of chunks of split NB collectives, one chunk for
	// each of up to opKinds types of result (newSplitOp), and the next
	// to be replaced.
	ops    [opKinds]any
	opNext int

	// The order of this rank's calls on the team: each call takes a
	// ticket (next) when it is made and runs when serving reaches it; a
	// call that must wait for its turn counts itself in waiting and
	// sleeps on turned, so that a call whose turn it is costs no lock.
	next, serving atomic.Uint64
	waiting       atomic.Int32
	omu           sync.Mutex
	turned        sync.Cond // on omu: serving or started moved
	seq           uint64    // collectives begun, by the call whose turn it is
	splits        uint64    // Splits of this team, which name the sub-teams
	// started: a split NB collective that arrived and holds the turn until it
	// completes (splitnb.go), or nil.
	started atomic.Pointer[splitColl]

	// box keeps what comes for its collectives over messages: last, as
	// collectives on words do not read it, so that the fields they do
	// read lie together; then the probe of a wait for a message
	// (teamCall.Recv), one timer for the team, set again at each wait
	// that does not end at once, and what it probes, under probeMu.
	box     coll.Box
	probe   *time.Timer
	probeMu sync.Mutex
	probing probeWait
}

// World returns the team of the whole job.
func (j *Job) World() *Team { return j.world }

// newWorld makes the team of the whole job.
func newWorld(j *Job) *Team {
	ranks := make([]int, j.size)
	for i := range ranks {
		ranks[i] = i
	}
	return newTeam(&Team{j: j, ranks: ranks, me: j.rank, plan: &coll.Plan{}})
}

// newTeam readies t's order of calls and makes it known to the handler of
// its messages, which may have kept some for it already.
func newTeam(t *Team) *Team {
	t.turned.L = &t.omu
	if t.j != nil {
		t.watch = t.j.watch.add(&t.slot, t)
		t.j.teams.register(t)
	}
	return t
}

// Rank returns this rank's rank in the team.
func (t *Team) Rank() int { return t.me }

// Size returns the number of ranks in the team.
func (t *Team) Size() int { return len(t.ranks) }

// JobRank returns the job rank of team rank r, or -1.
func (t *Team) JobRank(r int) int {
	if r < 0 || r >= len(t.ranks) {
		return -1
	}
	return t.ranks[r]
}

// TeamRank returns the team rank of job rank r, and whether it is a member.
func (t *Team) TeamRank(r int) (int, bool) {
	if t.index == nil {
		return r, r >= 0 && r < len(t.ranks)
	}
	i, ok := t.index[r]
	return i, ok
}

// whole reports whether t is the whole job.
func (t *Team) whole() bool { return t.index == nil }

// Split divides the team as MPI_Comm_split does: members passing the same
// color form a team, ranked by key, then by rank; a negative color joins
// none (nil).
func (t *Team) Split(color, key int) (*Team, error) {
	return ordered(t, func() (*Team, error) { return t.split(color, key) })
}

// SplitNB starts Split. A WaitContext that gives up loses the new team to
// this rank, while its fellow members wait for it.
func (t *Team) SplitNB(color, key int) *Handle[*Team] {
	return startNB(t, func() (*Team, error) { return t.split(color, key) })
}

// split is the body of Split, in its turn.
func (t *Team) split(color, key int) (*Team, error) {
	n := t.splits // numbered in the team's order of calls, as on every member
	t.splits++
	v, err := t.collect(coll.Call{Kind: coll.Split}, coll.SplitDatum(color, key), nil, nil)
	if err != nil || color < 0 {
		return nil, err
	}
	res := v.Split
	sub := &Team{j: t.j, id: teamID(t.id, n, color), ranks: make([]int, len(res.Members)), index: make(map[int]int, len(res.Members)), me: res.Me}
	for i, m := range res.Members {
		jr := t.ranks[m]
		sub.ranks[i], sub.index[jr] = jr, i
	}
	sub.plan = t.subPlan(res.Members)
	return newTeam(sub), nil
}

// subPlan is the plan of a sub-team of t made of t's members (team
// ranks, in the sub-team's order): its trees in two levels where t's are,
// over the same hosts.
func (t *Team) subPlan(members []int) *coll.Plan {
	p := &coll.Plan{TreeBarrier: t.plan.TreeBarrier, TreeGather: t.plan.TreeGather, Central: t.plan.Central}
	if t.plan.Leaders == nil {
		return p
	}
	first := map[int]int{} // t's leader → the sub-team's lowest member in its group
	p.Leaders = make([]int, len(members))
	for i, m := range members {
		l := t.plan.Leaders[m]
		if _, ok := first[l]; !ok {
			first[l] = i
		}
		p.Leaders[i] = first[l]
	}
	return p
}

// teamID names the sub-team of color made by split n of team parent: the
// same on every member, and (as a 64-bit mix) different from every other
// team's in practice. 0 is the whole job's.
func teamID(parent, n uint64, color int) uint64 {
	x := parent ^ 0x9e3779b97f4a7c15
	for _, v := range []uint64{n, uint64(int64(color))} {
		x ^= v + 0x9e3779b97f4a7c15 + x<<6 + x>>2
		x ^= x >> 30
		x *= 0xbf58476d1ce4e5b9
		x ^= x >> 27
		x *= 0x94d049bb133111eb
		x ^= x >> 31
	}
	return max(x, 1)
}

// teamCall is one collective of a team on this rank: its link
// (teamlink.go).
type teamCall struct {
	t    *Team
	seq  uint64
	call coll.Call
	// boxed: the call entered the team's box (enterBox), as a call over
	// messages does; an exchange on shared words needs none.
	boxed bool
	// An exchange on words (teamwords.go): the leader's area (where the
	// group is not disseminating), this rank's post's digest where
	// counted, and whether this rank's arrival released the group.
	lead     []byte
	digest   uint64
	released bool
	// combine: a reduction's by one of the library's operators, which
	// the rank that completes the arrivals may apply for every rank
	// (reducePosts); reduced: this rank read that result, result, which
	// lies in the leader's buffer (reducedPost), or in accOut where the
	// reduction accumulated (accumulated).
	combine coll.Combine
	reduced bool
	result  []byte
	accOut  [8]byte
}

// begin starts this rank's next collective on the team, call, in the
// turn of the call that makes it (ordered, startNB), for the kinds that
// drain once every request this rank sent has been answered (so that a
// Put completed before a barrier is visible to every member after it).
// A call over messages enters the team's box here (onWords false), an
// exchange on words only if it falls back to messages (enterBox). The
// team's engine (t.run) is reset for the call; an error is the call's
// (argErr).
func (t *Team) begin(call coll.Call, onWords bool) (*teamCall, error) {
	j := t.j
	j.enter()
	if drains(call.Kind) {
		if err := j.ep.Drain(); err != nil {
			return nil, t.argErr(call, j.done(err))
		}
	}
	t.seq++
	c := &t.call
	*c = teamCall{}
	c.t, c.seq, c.call = t, t.seq, call
	if !onWords {
		if err := c.enterBox(); err != nil {
			return nil, t.argErr(call, j.done(fmt.Errorf("%v %d: %w", call.Kind, c.seq, err)))
		}
	}
	if j.hangWarn > 0 {
		// Its reports (GASNET_HANG_WARN) let the console see members
		// waiting in different calls of one collective.
		j.watch.enter(t.watch, c, j.hangWarn)
	}
	t.run.Reset(c, t.plan, call)
	return c, nil
}

// drains reports whether a collective of kind k begins once every request
// the rank sent has been answered, and over messages leaves once its own
// messages are: the barrier, broadcast, reductions, all-gather and split.
// A gather, scatter or all-to-all does neither, so that a member's calls
// in a row need not wait for the answers to the previous one.
func drains(k coll.Kind) bool {
	return k != coll.Gather && k != coll.Scatter && k != coll.Alltoall && k != coll.Alltoallv
}

// enterBox enters the call into the team's box, which keeps the messages
// that come for it: its error is the failure another member told before
// this rank came.
func (c *teamCall) enterBox() error {
	c.boxed = true
	if f, failed := c.t.box.Enter(c.seq, c.call); failed {
		c.t.box.Leave(c.seq, false)
		c.boxed = false
		return f.Err()
	}
	return nil
}

// end ends the call with err: what came for it after it returned a result
// (another call's message, a failure) aborts the job.
func (c *teamCall) end(err error) error {
	t := c.t
	if t.j.hangWarn > 0 {
		t.j.watch.leave(t.watch)
	}
	if c.boxed {
		t.abortFor(t.box.Leave(c.seq, err == nil))
	}
	if err == nil {
		t.j.ep.Fence()
		return nil
	}
	return t.j.done(fmt.Errorf("%v %d: %w", c.call.Kind, c.seq, err))
}

// abortFor aborts the job for why, a difference the team's box found
// after this rank left the collective it belongs to ("": none). In a
// worker the abort ends the process; in RunLocal the rank ends at its
// next call.
func (t *Team) abortFor(why string) {
	if why != "" {
		t.j.abortJob(fmt.Sprintf("%v: %s", ErrCollectiveMismatch, why))
	}
}

// ticket takes the next place in the order of this rank's calls on t.
func (t *Team) ticket() uint64 { return t.next.Add(1) - 1 }

// turn waits until the calls before ticket n have ended. Where the call
// whose turn it is is a split NB collective that arrived (started), this
// call completes it: it would wait for it anyway.
func (t *Team) turn(n uint64) {
	for t.serving.Load() != n {
		if s := t.started.Load(); s != nil {
			s.complete()
			continue
		}
		t.omu.Lock()
		t.waiting.Add(1)
		for t.serving.Load() != n && t.started.Load() == nil {
			t.turned.Wait()
		}
		t.waiting.Add(-1)
		t.omu.Unlock()
	}
}

// release ends the call whose turn it is.
func (t *Team) release() {
	t.serving.Add(1)
	t.wake()
}

// wake wakes the calls that wait for their turn, to look again at
// serving and started. A call that counted itself waiting after it
// looked at them did so under omu, before it sleeps: the broadcast under
// omu reaches it.
func (t *Team) wake() {
	if t.waiting.Load() > 0 {
		t.omu.Lock()
		t.turned.Broadcast()
		t.omu.Unlock()
	}
}

// ordered runs f, a collective on t, after this rank's calls on t made
// before it: every member numbers its collectives on a team in the order
// it calls them, whichever goroutines call them.
func ordered[T any](t *Team, f func() (T, error)) (T, error) {
	n := t.ticket()
	t.turn(n)
	defer t.release()
	return f()
}
