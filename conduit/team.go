package conduit

// This file is teams: groups of the job's ranks that run collectives
// among themselves (MPI's communicators, GASNet-EX's gex_TM_t), and the
// engine their collectives run on: numbered messages between the members,
// kept by (team, collective, sender, step) until the member that expects
// them takes them.

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
	"github.com/udpconduit/udpconduit/spawn"
)

// hTeam is the core handler of team collectives: a Medium request whose
// args are the team's id (lo, hi), the collective's number on the team
// (lo, hi), its meta (teamMeta), its root, and the chunk's index, the
// chunk count and the message's size in bytes; the payload is the chunk.
const hTeam = 70

// Team is a group of the job's ranks that run collectives together, with
// ranks of its own, 0..Size()-1 (MPI_Comm_split's and gex_TM_Split's
// semantics). Job.World is the whole job; Split makes sub-teams of any
// team. Every member calls a team's collectives in the same order, as it
// does the job's; collectives on different teams are independent, so
// ranks that belong to several teams may run them from different
// goroutines at once. A rank's concurrent calls on one team run one after
// another. On the whole job, Barrier, Broadcast, AllGather and the Sum,
// Min and Max reductions of uint64 and float64 vectors are the Job's own,
// which use shared memory and the hosts' hierarchy where they can; every
// other collective, and every collective of a sub-team, runs over active
// messages among the members (binomial trees, a dissemination barrier,
// Bruck's all-to-all, direct sends).
//
// A member that meets a difference between the members' calls of a team
// collective (another kind, root, element type, operator or size) returns
// an ErrCollectiveMismatch that names both calls, and tells every other
// member, whose call of that collective returns the same error (one that
// has not entered it yet returns it when it does), so that the members
// can go on with their next collective. A member that had already left
// the collective when the notice or a message of the other call reaches
// it (it returned its result: a root whose broadcast was sent, say)
// aborts the job with code 1 naming the mismatch, as the collective's
// result cannot be taken back. A difference no message shows (two members
// in collectives that exchange nothing with each other) shows at the
// member's next collective on the team, which finds the other's message
// left over and aborts; members that wait in such calls are seen by the
// console's hang report (GASNET_HANG_WARN), which aborts the job when two
// wait in one collective of the team as different calls.
type Team struct {
	j     *Job
	id    uint64
	ranks []int       // team rank → job rank
	index map[int]int // job rank → team rank; nil for the whole job
	me    int         // this rank's team rank

	// The order of this rank's calls on the team: each call takes a
	// ticket (next) when it is made and runs when serving reaches it.
	omu           sync.Mutex
	turned        sync.Cond // on omu: serving moved
	next, serving uint64
	seq           uint64 // collectives begun, by the call whose turn it is
	// left is the last collective this rank left on the team: a message
	// of it or an earlier one that comes after is another call's.
	left   atomic.Uint64
	splits uint64 // Splits of this team, which name the sub-teams, likewise
}

// World returns the team of the whole job: its ranks are the job's.
func (j *Job) World() *Team { return j.world }

// newWorld makes the team of the whole job.
func newWorld(j *Job) *Team {
	ranks := make([]int, j.size)
	for i := range ranks {
		ranks[i] = i
	}
	return newTeam(&Team{j: j, ranks: ranks, me: j.rank})
}

// newTeam readies t's order of calls and makes it known to the handler of
// its messages (teamBox.message), which checks what comes for it.
func newTeam(t *Team) *Team {
	t.turned.L = &t.omu
	if t.j != nil {
		t.j.teams.register(t)
	}
	return t
}

// Rank returns this rank's rank in the team.
func (t *Team) Rank() int { return t.me }

// Size returns the number of ranks in the team.
func (t *Team) Size() int { return len(t.ranks) }

// JobRank returns the job rank of the team's rank r, or -1 when r is not
// one of its ranks.
func (t *Team) JobRank(r int) int {
	if r < 0 || r >= len(t.ranks) {
		return -1
	}
	return t.ranks[r]
}

// TeamRank returns the team rank of the job's rank r, and whether r is a
// member.
func (t *Team) TeamRank(r int) (int, bool) {
	if t.index == nil {
		return r, r >= 0 && r < len(t.ranks)
	}
	i, ok := t.index[r]
	return i, ok
}

// Split divides the team into sub-teams, one for each color, as
// MPI_Comm_split does: every member calls it, as a collective; the members
// that pass the same color form one team, ranked by key and then by their
// rank in this team. A negative color joins none: Split returns nil for
// it. Splits of sub-teams nest.
func (t *Team) Split(color, key int) (*Team, error) {
	return ordered(t, func() (*Team, error) { return t.split(color, key) })
}

// SplitContext is Split bounded by ctx, as BarrierContext: when ctx ends
// first it returns ctx's error, and the split goes on in the background
// (the other members need this rank's part), but the team it makes is
// lost to this rank, whose fellow members wait for it in that team's
// collectives: a deadline here is for giving up on the job, not for
// trying again.
func (t *Team) SplitContext(ctx context.Context, color, key int) (*Team, error) {
	return startNB(t, func() (*Team, error) { return t.split(color, key) }).WaitContext(ctx)
}

// split is the body of Split, in its turn.
func (t *Team) split(color, key int) (*Team, error) {
	var mine [16]byte
	binary.LittleEndian.PutUint64(mine[:], uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	n := t.splits // numbered in the team's order of calls, as on every member
	t.splits++
	all, err := t.allGather(mine[:])
	if err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	if color < 0 {
		return nil, nil
	}
	type member struct{ key, rank int }
	var ms []member
	for r, b := range all {
		if len(b) != 16 {
			return nil, fmt.Errorf("split: %w: team rank %d sent %d bytes", ErrCollectiveMismatch, r, len(b))
		}
		if int(int64(binary.LittleEndian.Uint64(b))) == color {
			ms = append(ms, member{int(int64(binary.LittleEndian.Uint64(b[8:]))), r})
		}
	}
	slices.SortFunc(ms, func(a, b member) int { return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank)) })
	sub := newTeam(&Team{j: t.j, id: teamID(t.id, n, color), ranks: make([]int, len(ms)), index: make(map[int]int, len(ms))})
	for i, m := range ms {
		jr := t.ranks[m.rank]
		sub.ranks[i], sub.index[jr] = jr, i
		if m.rank == t.me {
			sub.me = i
		}
	}
	return sub, nil
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

// The kinds of team collective, in teamMeta.
const (
	// teamFailed is the kind of a failure notice (teamCall.fail): its
	// sender met a mismatch in the collective, which its payload names.
	teamFailed = 0xff

	teamBarrier = iota + 1
	teamBroadcast
	teamReduce
	teamAllReduce
	teamGather
	teamAllGather
	teamScatter
	teamAlltoall
	teamAlltoallv
	teamAlltoallBruck // Alltoall of small blocks (teamcoll.go bruck)
	teamAlltoallTree  // Alltoall through the tree of a crowded job (treeAlltoall)
)

var teamKinds = [...]string{teamBarrier: "barrier", teamBroadcast: "broadcast", teamReduce: "reduce",
	teamAllReduce: "all-reduce", teamGather: "gather", teamAllGather: "all-gather", teamScatter: "scatter",
	teamAlltoall: "all-to-all", teamAlltoallv: "all-to-all-v", teamAlltoallBruck: "all-to-all of small blocks",
	teamAlltoallTree: "all-to-all through a tree"}

// teamCall is one collective of a team on this rank.
type teamCall struct {
	t    *Team
	seq  uint64
	kind int
	op   Op
	elem uint8 // amo.Kind of a reduction's elements, else 0
	root int   // team rank, 0 where there is none
	// watch is the call's slot in the job's hang watch, whose reports
	// (GASNET_HANG_WARN) let the console see members waiting in different
	// calls of one team collective that no message shows; -1: none.
	watch int
}

// meta packs what a message says of its collective, and its step: the
// round or phase of the algorithm it belongs to.
func (c *teamCall) meta(step int) uint32 {
	return uint32(c.kind) | uint32(c.op)<<8 | uint32(c.elem)<<16 | uint32(step)<<24
}

// describe names a collective from its meta and root.
func describeTeam(meta uint32, root uint32) string {
	k := int(meta & 0xff)
	name := fmt.Sprintf("kind %d", k)
	if k > 0 && k < len(teamKinds) {
		name = teamKinds[k]
	}
	if op := Op(meta >> 8 & 0xff); op != 0 {
		name += " " + op.String()
	}
	if k := amo.Kind(meta >> 16 & 0xff); k != 0 {
		name += " of " + k.String()
	}
	return fmt.Sprintf("%s (root %d)", name, root)
}

// begin starts this rank's next collective of kind on the team, in the
// turn of the call that makes it (ordered, startNB).
func (t *Team) begin(kind int, op Op, elem uint8, root int) (*teamCall, error) {
	if root < 0 || root >= len(t.ranks) {
		return nil, fmt.Errorf("%w: root %d of a team of %d", ErrBadRank, root, len(t.ranks))
	}
	t.j.enter()
	t.seq++
	c := &teamCall{t: t, seq: t.seq, kind: kind, op: op, elem: elem, root: root}
	if why, ok := t.j.teams.failure(t.id, t.seq); ok {
		// Another member met a mismatch in it before this rank came.
		t.left.Store(c.seq)
		return nil, t.j.done(failedTeamCall(why))
	}
	if src, meta, seq, ok := t.j.teams.stale(t.id, t.seq); ok {
		// Every message of a collective is taken in it, when the members'
		// calls match: one left over names a call that differed.
		r, _ := t.TeamRank(src)
		return nil, c.abortMismatch(fmt.Errorf("team rank %d sent a message of %s in collective %d, which this rank has left", r,
			describeTeam(meta.meta, meta.root), seq))
	}
	c.watch = -1
	if j := t.j; j.hangWarn > 0 {
		c.watch = j.watch.enter(spawn.Coll{Kind: "team " + teamKinds[kind], Seq: c.seq, Team: t.id, Root: root}, j.hangWarn, j.ctl.Report)
	}
	return c, nil
}

// end ends the call: err, with the job's end taken into account. A
// message of this collective or an earlier one still kept here is
// another call's (every member takes all it is sent in a collective of
// matched calls): a mismatch.
func (c *teamCall) end(err error) error {
	t := c.t
	if c.watch >= 0 {
		t.j.watch.leave(c.watch)
	}
	t.left.Store(c.seq)
	if err == nil {
		if src, m, seq, ok := t.j.teams.stale(t.id, c.seq+1); ok {
			r, _ := t.TeamRank(src)
			err = c.abortMismatch(fmt.Errorf("team rank %d sent a message of %s in collective %d, which this rank has left", r,
				describeTeam(m.meta, m.root), seq))
		}
	}
	return t.j.done(err)
}

// ticket takes the next place in the order of this rank's calls on t.
func (t *Team) ticket() uint64 {
	t.omu.Lock()
	defer t.omu.Unlock()
	t.next++
	return t.next - 1
}

// turn waits until the calls before ticket n have ended.
func (t *Team) turn(n uint64) {
	t.omu.Lock()
	for t.serving != n {
		t.turned.Wait()
	}
	t.omu.Unlock()
}

// release ends the call whose turn it is.
func (t *Team) release() {
	t.omu.Lock()
	t.serving++
	t.turned.Broadcast()
	t.omu.Unlock()
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

// collOp is a non-blocking collective in progress, behind its Handle.
// The collective takes its place in this rank's order of calls on its
// team when it is started, and runs on a goroutine of its own, whose
// waits poll the network as every wait does; several may be in progress
// at once, on one team or several.
type collOp[T any] struct {
	t        *Team
	finish   chan struct{} // closed when f has returned
	finished bool          // f returned (else its goroutine ended with the rank)
	panicked any           // what f panicked with, passed on to Wait
	v        T
	err      error
}

// startNB starts f, a collective on t, as ordered would run it, and
// returns its handle at once.
func startNB[T any](t *Team, f func() (T, error)) *Handle[T] {
	h := &collOp[T]{t: t, finish: make(chan struct{})}
	n := t.ticket()
	go func() {
		if t.j != nil {
			defer t.j.ep.Wake() // a WaitAny that sleeps in the network
		}
		defer close(h.finish)
		t.turn(n)
		defer t.release()
		defer func() {
			if p := recover(); p != nil {
				h.panicked = p
			}
		}()
		h.v, h.err = f()
		h.finished = true
	}()
	return &Handle[T]{op: h, get: func() T { return h.v }}
}

// result returns what f returned, once done is closed: a panic of f's is
// passed on, and a collective cut short because the rank ends (the job
// ended, or aborted) ends the caller as any call then does.
func (h *collOp[T]) result() (T, error) {
	if h.panicked != nil {
		panic(h.panicked)
	}
	if !h.finished {
		h.t.j.enter()
		var zero T
		return zero, fmt.Errorf("conduit: the collective ended with the rank: %w", ErrInterrupted)
	}
	return h.v, h.err
}

func (h *collOp[T]) owner() *Job { return h.t.j }

// done reports whether the collective has completed.
func (h *collOp[T]) done() bool {
	select {
	case <-h.finish:
		return true
	default:
		return false
	}
}

// wait waits until the collective completes and returns its error.
func (h *collOp[T]) wait() error {
	<-h.finish
	_, err := h.result()
	return err
}

// waitContext is wait bounded by ctx: when ctx ends first it returns
// ctx's error, and the collective goes on (the other members need this
// rank's part); a later wait returns its result.
func (h *collOp[T]) waitContext(ctx context.Context) error {
	select {
	case <-h.finish:
		_, err := h.result()
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// send sends blob to team rank r as message step of the call, in chunks
// of at most MaxMedium bytes.
func (c *teamCall) send(r, step int, blob []byte) error {
	to := c.t.ranks[r]
	id, meta := c.t.id, c.meta(step)
	return sendChunks(blob, func(i, chunks int, part []byte) error {
		return c.t.j.ep.RequestMedium(to, hTeam, part, uint32(id), uint32(id>>32), uint32(c.seq), uint32(c.seq>>32),
			meta, uint32(c.root), uint32(i), uint32(chunks), uint32(len(blob)))
	})
}

// recv waits for message step of the call from team rank r and returns
// it. A message of another collective is a mismatch, which recv reports
// to every member (see mismatch); a failure notice from a member that met
// one ends the wait with its error.
func (c *teamCall) recv(r, step int) ([]byte, error) {
	j := c.t.j
	k := teamKey{id: c.t.id, seq: c.seq, src: c.t.ranks[r]}
	box := &j.teams
	if err := j.wait(func() bool { return box.ready(k) || box.hasFailed(k.id, k.seq) }); err != nil {
		return nil, err
	}
	m, why, failed := box.takeOrFailure(k)
	if failed {
		return nil, failedTeamCall(why)
	}
	b, err := m.take()
	if err != nil {
		return nil, c.mismatch(fmt.Errorf("from team rank %d: %v", r, err))
	}
	if m.meta != c.meta(step) || m.root != uint32(c.root) {
		return nil, c.mismatch(fmt.Errorf("team rank %d is in %s, team rank %d in %s", r, describeTeam(m.meta, m.root),
			c.t.me, describeTeam(c.meta(step), uint32(c.root))))
	}
	return b, nil
}

// mismatch reports a difference between the members' calls met in the
// call, and returns it as the call's error: it marks the collective
// failed here and sends every other member a failure notice naming why
// (the members that wait for this rank would otherwise wait forever).
func (c *teamCall) mismatch(why error) error {
	desc := fmt.Sprintf("team collective %d: %v", c.seq, why)
	if len(desc) > maxFailure {
		desc = desc[:maxFailure]
	}
	t := c.t
	t.j.teams.markFailed(t.id, c.seq, desc)
	note := []byte(desc)
	meta := uint32(teamFailed)
	for r, to := range t.ranks {
		if r == t.me {
			continue
		}
		// A member that cannot be told ends with the job (its rank
		// ended, or the job is ending): nothing more to do for it.
		_ = t.j.ep.RequestMedium(to, hTeam, note, uint32(t.id), uint32(t.id>>32), uint32(c.seq), uint32(c.seq>>32),
			meta, 0, 0, 1, uint32(len(note)))
	}
	return failedTeamCall(desc)
}

// maxFailure bounds the description a failure notice carries.
const maxFailure = 1000

// failedTeamCall is the error of a team collective that failed with the
// mismatch why describes (mismatch).
func failedTeamCall(why string) error { return fmt.Errorf("%w: %s", ErrCollectiveMismatch, why) }

// abortMismatch reports a difference that a message shows only after
// this rank left the collective it belongs to, whose result it returned:
// it aborts the job with why. In a worker the abort ends the process; in
// RunLocal the rank ends at its next call, and the error it returns
// meanwhile is never seen.
func (c *teamCall) abortMismatch(why error) error {
	err := fmt.Errorf("%w: team collective %d: %v", ErrCollectiveMismatch, c.seq, why)
	c.t.j.abortJob(err.Error())
	return err
}
