package conduit

// This file is the NB collectives on shared words in two halves: this
// rank's post and arrival at the call, the rest at Wait or Test.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// splitColl is an NB collective of World on the group's words (a
// BarrierNB, or a reduction or all-to-all whose data fit a slot) whose
// post and arrival ran at its call (teamCall.post) and whose completion
// (Team.collected) runs at its Wait, at a Test that finds every rank
// arrived, or at the turn of the team's next call, which waits for it
// anyway (Team.turn). It holds the team's turn until then. It is made
// only where what remains after the arrival asks nothing more of this
// rank (words.passive): the other ranks complete the collective whether
// this one waits or not, as they read its post from its slot (or its
// staged line).
type splitColl struct {
	t       *Team
	data    []byte       // this rank's datum, posted
	combine coll.Combine // a reduction's
	to      keeper       // takes the result as the collective completes
	mu      sync.Mutex
	fin     atomic.Bool // completed: to has its result, and err is set
	err     error
	// panicked: what the program's operator panicked with, which Wait
	// and Test pass on.
	panicked any
	// polled: the error of a Test's poll pass, which the collective's
	// wait returns, as a blocking call's wait returns its polls' errors.
	polled atomic.Pointer[error]
}

// keeper takes a split collective's result as it completes (keep), while
// a reduction's result reduced for every rank still lies in the leader's
// buffer or the call, which the team's next collective rewrites: it
// copies what it keeps of it.
type keeper interface{ keep(v coll.Result) }

// splitOp is a split NB collective and its Handle, made in one: dec,
// where the collective has a result, makes the handle's of the
// collective's as it completes; every Wait returns that one.
type splitOp[T any] struct {
	h   Handle[T]
	s   splitColl
	v   T
	dec decoder[T]
}

// decoder makes a handle's result of a collective's on t (decode), in
// the rank's turn on t: a copy of what lies in the leader's buffer or the
// call.
type decoder[T any] interface {
	decode(t *Team, v coll.Result) T
}

func (x *splitOp[T]) keep(v coll.Result) {
	if x.dec != nil {
		x.v = x.dec.decode(x.s.t, v)
	}
}

func (x *splitOp[T]) value() T { return x.v }

const (
	// opChunk is how many split NB collectives newSplitOp makes at once:
	// a handle keeps its chunk's memory alive, about 3 KiB.
	opChunk = 16
	// opKinds is for how many types of result a team keeps a chunk: as
	// many as split NB collectives have (a barrier's, an all-to-all's, a
	// reduction's of each Word), so that a program's chunks stay.
	opKinds = 8
)

// newSplitOp returns a zeroed split NB collective of T on t, in this
// rank's turn on t: the next one of the team's chunk for T, made where
// the team has none or it ran out. Made one by one, their allocations
// cost a crowded rank more than the rest of a BarrierNB (each a turn on
// the CPU, where the allocator's state is out of the caches).
func newSplitOp[T any](t *Team) *splitOp[T] {
	var c *[]splitOp[T]
	for _, k := range t.ops {
		if c, _ = k.(*[]splitOp[T]); c != nil {
			break
		}
	}
	if c == nil {
		c = new([]splitOp[T])
		t.ops[t.opNext] = c
		t.opNext = (t.opNext + 1) % opKinds
	}
	if len(*c) == 0 {
		*c = make([]splitOp[T], opChunk)
	}
	x := &(*c)[0]
	*c = (*c)[1:]
	return x
}

// split starts the NB call n of call, with data and combine, split
// (splitNB), and returns its handle, whose result dec makes of the
// collective's (nil: T's zero); nil where that does not apply.
func split[T any](t *Team, n uint64, call coll.Call, data []byte, combine coll.Combine, dec decoder[T]) *Handle[T] {
	if !t.splittable(n, call, len(data), settledCombine(call, combine) != nil) {
		return nil // before anything is allocated
	}
	x := newSplitOp[T](t)
	x.dec = dec
	x.s = splitColl{t: t, data: data, combine: combine, to: x}
	t.splitNB(&x.s, n, call)
	x.h.op = &x.s
	if dec != nil {
		x.h.res = x
	}
	return &x.h
}

// splittable reports whether the NB call n of call, with a datum of size
// bytes (reduced: a reduction the settling rank combines), splits: n this
// rank's turn, no request of the rank's unanswered (the drain that begins
// the collective then returns at once, unless another goroutine sends one
// in between, whose answer it then waits for), not from a handler, data
// within a slot, and World on words whose synchronisation is passive, or
// a team of one member.
func (t *Team) splittable(n uint64, call coll.Call, size int, reduced bool) bool {
	j := t.j
	if j == nil || t.serving.Load() != n || j.ep.Outstanding() != 0 || j.ep.InHandler() || size > maxPost {
		return false
	}
	return len(t.ranks) == 1 || t.onWords() && j.words.passive() && j.words.fitsBuffer(call, size, reduced)
}

// splitNB runs the first half of call, the NB call n (its ticket) of s's
// collective, whose arguments are s.data and s.combine, where its caller
// (split) found it splittable: this rank's post and arrival, or a team of
// one member's whole collective. The caller passes only the kinds whose
// post is this rank's datum of a length the call carries, or none (a
// barrier), so that every rank's post fits where the calls are the same.
func (t *Team) splitNB(s *splitColl, n uint64, call coll.Call) {
	j, data, combine := t.j, s.data, s.combine
	// A call that ends the rank (the job ended, or aborted) passes the
	// turn on as it goes, as ordered's does.
	ok := false
	defer func() {
		if !ok {
			s.end(ErrInterrupted)
		}
	}()
	ended := func(v coll.Result, err error) {
		s.to.keep(v)
		s.end(err)
		ok = true
	}
	if len(t.ranks) == 1 {
		ended(t.collect(call, data, nil, combine))
		return
	}
	c, err := t.begin(call, true)
	if err != nil {
		ended(coll.Result{}, err)
		return
	}
	c.combine = settledCombine(call, combine)
	if err := c.post(j.words, t.postOf(call, data, nil)); err != nil {
		ended(coll.Result{}, c.end(err))
		return
	}
	if j.hangWarn > 0 {
		j.watch.leave(t.watch) // the rank does not wait until it waits
	}
	ok = true
	t.started.Store(s)
	t.wake()
}

// end ends the collective with err, passes the team's turn on, and wakes a
// wait for it that sleeps in the network (WaitAny, WaitContext).
func (s *splitColl) end(err error) {
	// The chunk that holds s (newSplitOp) may outlive its handle: it
	// keeps none of the caller's data or operator.
	s.data, s.combine = nil, nil
	s.err = err
	s.fin.Store(true)
	s.t.started.CompareAndSwap(s, nil)
	s.t.release()
	s.t.j.ep.Wake()
}

// ready reports, s.mu held, whether every rank has arrived.
func (s *splitColl) ready() bool {
	return s.fin.Load() || s.t.call.ready(s.t.j.words)
}

// complete waits until the collective completes, and completes it. A
// panic of the program's operator there ends the collective, and goes on
// from the handle's Wait or Test (pass), not from another call that
// completes it on its turn; a rank that ends there ends it with
// ErrInterrupted.
func (s *splitColl) complete() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fin.Load() {
		return
	}
	t, j := s.t, s.t.j
	if j.hangWarn > 0 {
		// Left at its end, also where it goes over messages.
		j.watch.enter(t.watch, &t.call, j.hangWarn)
	}
	ended := false
	defer func() {
		if ended {
			return
		}
		if j.hangWarn > 0 {
			j.watch.leave(t.watch)
		}
		p := recover()
		if p == nil {
			s.end(ErrInterrupted) // the rank ends (runtime.Goexit)
			return
		}
		s.panicked = p
		s.end(errOperatorPanicked)
	}()
	v, err := t.collected(&t.call, s.data, nil, s.combine)
	ended = true
	s.to.keep(v)
	s.end(err)
}

// pass panics with what the program's operator panicked with, if it did.
func (s *splitColl) pass() {
	if s.fin.Load() && s.panicked != nil {
		panic(s.panicked)
	}
}

// errOperatorPanicked is the error of a split reduction whose operator
// panicked, for a wait after the panic.
var errOperatorPanicked = errors.New("conduit: the reduction's operator panicked")

// done reports whether the collective can complete without waiting: it
// completed, or every rank has arrived. A look without a wait, from any
// goroutine, a wait's condition too.
func (s *splitColl) done() bool {
	if s.fin.Load() {
		return true
	}
	if !s.mu.TryLock() {
		return false // another goroutine completes it
	}
	defer s.mu.Unlock()
	return s.ready()
}

// test is Handle.Test: done, and then the collective completed, but from a
// handler (which must not wait for the poll pass it runs in); where not
// done, a poll pass, which ends the rank if the job has ended, and a
// look again.
func (s *splitColl) test() bool {
	j := s.t.j
	in := j.ep.InHandler()
	if !s.done() {
		if in {
			return false
		}
		if err := j.Poll(); err != nil {
			s.polled.CompareAndSwap(nil, &err)
		}
		if !s.done() {
			return false
		}
	}
	if !in {
		s.complete()
		s.pass()
	}
	return true
}

// wait completes the collective and returns its error, or that of a Test's
// poll pass; from a handler, ErrWaitInHandler unless it has completed.
func (s *splitColl) wait() error {
	if err := s.t.j.refuseWait(s.fin.Load()); err != nil {
		return err
	}
	s.complete()
	s.pass()
	if p := s.polled.Load(); p != nil && s.err == nil {
		return s.t.j.done(*p)
	}
	return s.err
}

func (s *splitColl) waitContext(ctx context.Context) error {
	if err := s.t.j.refuseWait(s.fin.Load()); err != nil {
		return err
	}
	if err := s.t.j.waitContext(ctx, s.done); err != nil {
		return err
	}
	return s.wait()
}

func (s *splitColl) owner() *Job { return s.t.j }
