package conduit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/spawn"
)

// Job is one rank of a running job. Init makes a worker's (Default), and
// RunLocal one for each rank it runs; every method may be called from any
// goroutine.
type Job struct {
	ep          *amudp.Endpoint
	ctl         control
	term        *atomic.Bool // ctl.Terminating()
	rank, size  int
	hostRank    []int
	hosts       []string // host of every rank (for messages); nil in tests
	exitTimeout time.Duration
	// ending is when this rank first saw that the job ended elsewhere
	// (see leaving), set once by endingOnce.
	ending     time.Time
	endingOnce sync.Once
	aborting   atomic.Bool // the default handler 0 has aborted the job
	// onTable runs once the address table is complete here (relayTable),
	// and router is the Router it gave the endpoint, if any (route.go).
	onTable func() error
	router  atomic.Pointer[router]

	rma   rma
	table tableIn
	nb    nbrhd // the shared-memory group's segments
	// words are the shared words of this rank's group where World's
	// collectives exchange posts on them (the group is the whole job) or
	// the start-up synchronises; nil where they do not.
	words *words

	// attached is set once Attach has exchanged the segment sizes; segs is
	// written before and never after.
	attached atomic.Bool
	segs     []uint64 // segment size of every rank

	// attachMu guards attach, which says that Attach has begun.
	attachMu sync.Mutex
	attach   bool

	world      *Team         // the whole job (World)
	teams      teamBox       // messages of team collectives
	hangWarn   time.Duration // GASNET_HANG_WARN (see waitIn); 0: never report
	watch      hangWatch
	onReturned atomic.Pointer[defaultReturnedFn]
}

// control is a rank's link to the console: the end of the job, and the
// collectives it is told about (for GASNET_HANG_WARN). In a worker process
// it is the *spawn.Worker that bootstrapped it (whose address table
// relayTable completes); RunLocal and the tests use an in-memory console.
type control interface {
	// Terminating is set when the console told this rank to exit because
	// the job ended elsewhere, and never cleared (the Job loads it on
	// every call: Job.term); ExitNow then ends the rank, saying so when
	// the program was in a library call (in, see apiCall) and another
	// rank's Exit ended the job.
	Terminating() *atomic.Bool
	ExitNow(in string)
	// Exit reports code as the job's and ends the rank.
	Exit(code int, grace time.Duration)
	// Finalize tells the console that this rank asks to end the job with
	// code once every rank has: the rank then waits for Terminating.
	Finalize(code int) error
	// Abort reports that this rank aborts the job with code (not 0) and
	// why: the job's code is then not 0, even when another rank's Exit(0)
	// came first. In a worker process it ends the rank and does not
	// return; in RunLocal, which cannot end a handler's goroutine, it
	// returns and the rank ends at its next call (see Job.abort).
	Abort(code int, why string, grace time.Duration)
	// Report tells the console that this rank waits in a collective
	// (c.In), or no longer does.
	Report(c spawn.Coll) error
}

// newJob makes the Job of rank over ep, registering the library's handlers
// and the default handler 0.
func newJob(ep *amudp.Endpoint, ctl control, rank, size int, exitTimeout time.Duration) *Job {
	j := &Job{ep: ep, ctl: ctl, rank: rank, size: size, hostRank: []int{rank}, exitTimeout: exitTimeout}
	j.term = ctl.Terminating()
	j.nb.group = []int{rank}
	j.watch.report = ctl.Report
	j.onReturned.Store(&defaultReturnedFn{j.defaultReturned})
	ep.SetReturnedHandler(j.returned)
	ep.SetFatalHandler(j.fatal)
	ep.SetInterrupt(j.leaving)
	j.world = newWorld(j)
	j.registerCore()
	return j
}

// leaving reports whether this rank's waits must give up because the job
// ended elsewhere: the console said so a quarter of the exit timeout ago.
// Until then a wait goes on, so that a collective another rank completed
// before it ended the job completes here too (the messages it needs are on
// their way) and the program prints what it prints after it. A sleeping
// wait ends at datagrams, Wakes and retransmissions, not at a time of ours:
// a timer wakes it then.
func (j *Job) leaving() bool {
	if !j.term.Load() {
		return false
	}
	j.endingOnce.Do(func() {
		j.ending = time.Now()
		time.AfterFunc(j.exitTimeout/4, j.ep.Wake)
	})
	return time.Since(j.ending) >= j.exitTimeout/4
}

// done ends the rank, as its wait would have, when err says a wait inside
// the endpoint gave up because the job ended elsewhere (leaving); any other
// error it returns. Every API call that may wait for credit or Drain
// returns through it.
func (j *Job) done(err error) error {
	if errors.Is(err, amudp.ErrInterrupted) {
		j.exitNow()
	}
	j.abort()
	return err
}

// setHosts records every rank's host, once the table is complete: for
// HostRanks and the abort message.
func (j *Job) setHosts(hosts []string) {
	j.hosts = hosts
	j.hostRank = slices.Grow(j.hostRank[:0], count(hosts, hosts[j.rank]))
	for r, h := range hosts {
		if h == hosts[j.rank] {
			j.hostRank = append(j.hostRank, r)
		}
	}
}

// defaultReturned is handler 0's default: abort the job naming the
// unreachable rank and its address (DESIGN.md §5).
// It speaks once per rank however many requests come back: the first
// aborts the job, and the console gives the job's one summary line.
// The abort is done before the handler returns, on the goroutine that
// polls: the job then ends with code 1 whatever the other ranks do (an
// Exit(0) of theirs that reached the console first included), and the
// program's call that was polling does not return to it.
func (j *Job) defaultReturned(r Returned) { j.abortJob(j.describe(r)) }

// abortJob says why this rank aborts the job, once, and aborts it with
// code 1 before it returns (see defaultReturned).
func (j *Job) abortJob(why string) {
	if j.setAborting() {
		return
	}
	fmt.Fprintf(os.Stderr, "%s: rank %d: %s; aborting the job\n", progName(), j.rank, why)
	j.ctl.Abort(1, why, j.exitTimeout)
}

// setAborting records that this rank aborts the job, from then on sending
// Put and Get through their checks (which end the rank), and reports
// whether it already did.
func (j *Job) setAborting() bool {
	was := j.aborting.Swap(true)
	j.nb.direct.Store(nil)
	return was
}

// abort ends the rank at a call of the program's once handler 0 has
// aborted the job (in RunLocal, where Abort returns): no call returns to
// the program after that, not even one whose wait was satisfied.
func (j *Job) abort() {
	if j.aborting.Load() {
		j.ctl.ExitNow("")
	}
}

// describe says what a returned message means, naming the rank and host
// that did not take it.
func (j *Job) describe(r Returned) string {
	host := ""
	if r.Dest >= 0 && r.Dest < len(j.hosts) {
		host = " on " + j.hosts[r.Dest]
	}
	switch {
	case r.Incoming:
		return fmt.Sprintf("a %s from rank %d%s (%v) cannot run here: %s (handler %d)", r.Kind, r.Dest, host, r.Addr, r.Reason, r.Handler)
	case r.Reason == amudp.ReasonTimeout || r.Reason == amudp.ReasonClosed:
		from := ""
		if j.rank < len(j.hosts) {
			from = " from " + j.hosts[j.rank]
		}
		return fmt.Sprintf("rank %d%s (%s) is unreachable%s: a %s to it (handler %d) is undeliverable: %s", r.Dest, host, r.Where(), from, r.Kind, r.Handler, r.Reason)
	}
	return fmt.Sprintf("rank %d%s (%v) refused a %s (handler %d): %s", r.Dest, host, r.Addr, r.Kind, r.Handler, r.Reason)
}

// enter starts every call of the API but the getters (Rank, Size,
// HostRanks). It is where a rank that the console told to exit (because the
// job ended elsewhere) does so: at its next call into the library (see
// spawn.Worker.Terminating).
func (j *Job) enter() *amudp.Endpoint {
	if j.term.Load() {
		j.exitNow()
	}
	j.abort()
	return j.ep
}

// wait services the network until cond holds or the console tells this
// rank to exit. A wait cut short that way exits; one whose condition came
// true returns, and the program's next call exits (a barrier that completed
// just before the job ended elsewhere lets the program print its last
// lines).
func (j *Job) wait(cond func() bool) error {
	err := j.ep.WaitUntil(func() bool { return j.term.Load() || cond() })
	if j.term.Load() && !cond() {
		j.exitNow()
	}
	j.abort()
	return err
}

// waitContext is wait for cond, or until ctx ends first: then it returns
// ctx's error. A sleeping poller wakes when ctx ends.
func (j *Job) waitContext(ctx context.Context, cond func() bool) error {
	if cond() {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, j.ep.Wake)
	defer stop()
	if err := j.wait(func() bool { return cond() || ctx.Err() != nil }); err != nil {
		return err
	}
	if cond() {
		return nil
	}
	return ctx.Err()
}

// SetReturnedHandler replaces handler 0, which receives undeliverable
// requests; by default it aborts the job. h runs as a handler does.
func (j *Job) SetReturnedHandler(h func(Returned)) {
	j.enter()
	j.onReturned.Store(&defaultReturnedFn{h})
}

// defaultReturnedFn holds the program's handler 0 (nil: none).
type defaultReturnedFn struct{ fn func(Returned) }

// returned receives every undeliverable request: a collective's message
// that could not be delivered is dropped (its receiver stopped polling,
// which it does only once its collectives are complete: it has heard it,
// and its answer was lost; see Team.collect), and the rest go to handler
// 0.
func (j *Job) returned(r Returned) {
	if r.Handler == hTeam && !r.Incoming {
		return
	}
	if h := j.onReturned.Load(); h != nil && h.fn != nil {
		h.fn(r)
	}
}

// Rank returns this rank, in [0, Size()).
func (j *Job) Rank() int { return j.rank }

// Size returns the number of ranks, N.
func (j *Job) Size() int { return j.size }

// HostRanks returns the ranks on this rank's host, in order.
func (j *Job) HostRanks() []int { return append([]int(nil), j.hostRank...) }

// Poll runs the handlers of pending messages on the calling goroutine and
// returns without waiting (nothing when another goroutine is polling).
func (j *Job) Poll() error { return j.enter().Poll() }

// WaitUntil runs handlers until cond, called after each pass, returns true;
// cond must be cheap, and read what handlers write through atomics or a
// mutex. It returns early with the error of a request given up. Not from a
// handler.
func (j *Job) WaitUntil(cond func() bool) error { j.enter(); return j.wait(cond) }

// Drain waits until every request this rank sent has been answered. Not
// from a handler.
func (j *Job) Drain() error { return j.done(j.enter().Drain()) }

// Exit ends the job with code (0..MaxExitCode; others end it with 1): every
// other rank is told to exit, even one computing. It does not return.
func (j *Job) Exit(code int) {
	j.enter()
	if code < 0 || code > MaxExitCode {
		fmt.Fprintf(os.Stderr, "%s: rank %d: conduit.Exit(%d): accepted: 0..%d; exiting with 1\n", progName(), j.rank, code, MaxExitCode)
		code = 1
	}
	j.ctl.Exit(code, j.exitTimeout)
}
