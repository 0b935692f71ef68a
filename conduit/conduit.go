// Package conduit is udpconduit's public API: a program written against it
// runs as `./prog N args...`. That process becomes the console: it spawns N
// workers running the same program, serves them and exits with the job's
// exit code. A worker calls Init, Attach (its handlers and segment), then
// sends active messages, Puts and Gets and runs collectives on teams
// (World is the whole job), and ends with Finalize or Exit (DESIGN.md).
//
// Every function and method may be called from any goroutine of a worker.
// Handlers run on whichever goroutine polls (a request, Poll, WaitUntil, a
// wait), one at a time per rank, or on a background goroutine with
// GASNET_RCV_THREAD=1. A team's collectives match across its members by
// their order of call on it.
//
// The package-level functions act on this worker's Job (Default). RunLocal
// runs a job of N ranks on goroutines of one process, each with a Job of
// its own, for examples and tests. cmd/hello is the smallest program.
package conduit

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/spawn"
)

// Handler runs an active message: args and payload are valid only during
// the call. It must not block, and may reply once to a request through t.
type Handler func(t *Token, args []uint32, payload []byte)

// Token is the message a handler runs for, valid during its call.
type Token amudp.Token

// Source returns the rank that sent the message.
func (t *Token) Source() int { return (*amudp.Token)(t).Source() }

// IsRequest reports whether the message is a request.
func (t *Token) IsRequest() bool { return (*amudp.Token)(t).IsRequest() }

// ReplyShort replies to the request, once and from its handler, with a Short
// message to handler (128..255) of its source.
func (t *Token) ReplyShort(handler int, args ...uint32) error {
	return (*amudp.Token)(t).ReplyShort(handler, args...)
}

// ReplyMedium is ReplyShort with a payload of at most MaxMedium bytes.
func (t *Token) ReplyMedium(handler int, payload []byte, args ...uint32) error {
	return (*amudp.Token)(t).ReplyMedium(handler, payload, args...)
}

// ReplyLong is ReplyShort writing payload at offset of the source's segment.
func (t *Token) ReplyLong(handler int, payload []byte, offset uint64, args ...uint32) error {
	return (*amudp.Token)(t).ReplyLong(handler, payload, offset, args...)
}

// Returned describes an undeliverable request given to handler 0: its
// destination (Dest, Addr), Reason, kind and handler.
type Returned = amudp.Returned

// Reasons a request is returned (Returned.Reason).
const (
	ReasonBadHandler = amudp.ReasonBadHandler // no handler at that index
	ReasonNoSegment  = amudp.ReasonNoSegment  // a Long to a rank without a segment
	ReasonBadOffset  = amudp.ReasonBadOffset  // a Long outside the segment
	ReasonTimeout    = amudp.ReasonTimeout    // silent for the give-up time
	ReasonClosed     = amudp.ReasonClosed     // this rank's endpoint closed
)

// Errors of requests and replies, wrapped: compare with errors.Is.
var (
	// ErrTooManyArgs: more than MaxArgs arguments.
	ErrTooManyArgs = amudp.ErrTooManyArgs
	// ErrPayloadTooBig: a payload over MaxMedium or MaxLong bytes.
	ErrPayloadTooBig = amudp.ErrPayloadTooBig
	// ErrBadRank: a destination outside 0..Size()-1.
	ErrBadRank = amudp.ErrBadRank
	// ErrNotInHandler: a reply from outside a request handler.
	ErrNotInHandler = amudp.ErrNotInHandler
	// ErrAlreadyReplied: a second reply to one request.
	ErrAlreadyReplied = amudp.ErrAlreadyReplied
	// ErrRequestInHandler: a request, Put or Get from a handler.
	ErrRequestInHandler = amudp.ErrRequestInHandler
	// ErrBadHandler: a request to itself for an index without a handler.
	ErrBadHandler = amudp.ErrBadHandler
	// ErrInterrupted: a wait ended because the rank's endpoint closed.
	ErrInterrupted = amudp.ErrInterrupted
	// ErrNotPrepared: Commit of a Prepared already committed, or not
	// returned by a Prepare call.
	ErrNotPrepared = amudp.ErrNotPrepared
)

// Limits.
const (
	MaxArgs   = amudp.MaxArgs
	MaxMedium = amudp.MaxMedium
	MaxLong   = amudp.MaxLong
	// FirstClientHandler is the lowest handler index of a program.
	FirstClientHandler = 128
	// MaxExitCode is the largest code Exit accepts.
	MaxExitCode = 255
	// MaxSegment is the largest segment Attach accepts.
	MaxSegment = 1 << 46
)

// Errors of the API.
var (
	// ErrNotInitialized: a package-level function before Init.
	ErrNotInitialized = errors.New("conduit: Init has not run")
	ErrAttached       = errors.New("conduit: Attach called twice")
	ErrNotAttached    = errors.New("conduit: Attach has not run on this rank")
	ErrHandlerIndex   = errors.New("conduit: client handler index must be 128..255")
	ErrHandlerTable   = errors.New("conduit: bad handler table")
	ErrOutOfSegment   = errors.New("conduit: range outside the remote segment")
	// ErrMisaligned: an atomic at an offset not a multiple of its size.
	ErrMisaligned = errors.New("conduit: offset not aligned to the word's size")
	// ErrAtomicOp: an unknown or misapplied atomic operation.
	ErrAtomicOp = errors.New("conduit: atomic operation not accepted")
	// ErrReduceOp: an unknown operator, or bitwise on floats.
	ErrReduceOp = errors.New("conduit: reduction operator not accepted")
	// ErrCollectiveMismatch: members of a team called a collective
	// differently (kind, element type, operator, length or root).
	ErrCollectiveMismatch = coll.ErrMismatch
	// ErrCollectiveArgument: a member refused its own arguments (a root
	// out of range, a Scatter root's part count, all-to-all blocks).
	ErrCollectiveArgument = coll.ErrArgument
	// ErrNoHandle: WaitAny was given no handle.
	ErrNoHandle = errors.New("conduit: WaitAny: no handle")
	// ErrWaitInHandler: a wait for a collective's handle from a handler,
	// whose completion would need the poll pass the handler runs in to
	// end first.
	ErrWaitInHandler = errors.New("conduit: a wait for a collective from a handler (handlers may only reply)")
)

// Usage is the syntax of the program's arguments after N, printed by -h
// or --help; set it before Init. Empty means "[args...]".
var Usage string

// HandlerEntry names one handler of the table passed to Attach.
type HandlerEntry struct {
	Index int
	Fn    Handler
}

// std is the Job of this process, made by Init in a worker.
var std struct {
	once sync.Once
	job  *Job
}

// Default returns this worker's Job; nil before Init.
func Default() *Job { return std.job }

// job returns the Job of an initialised worker, for the package-level
// function call; before Init has returned, an error wrapping
// ErrNotInitialized that names it.
func job(call string) (*Job, error) {
	if j := std.job; j != nil {
		return j, nil
	}
	return nil, notInitialized(call)
}

// notInitialized is job's error, apart so that job inlines.
func notInitialized(call string) error {
	return fmt.Errorf("conduit.%s: %w", call, ErrNotInitialized)
}

// must is job for the functions that return no error (Rank, Size, Exit,
// ...): before Init has returned they panic with that error, as a method
// of a nil Job would.
func must(call string) *Job {
	j, err := job(call)
	if err != nil {
		panic(err)
	}
	return j
}

// Init starts the job; call it first. In the console it spawns and serves
// the workers and exits with the job's code; in a worker it returns. A bad
// setting or N is one line and exit 1.
func Init() {
	std.once.Do(initOnce)
}

func progName() string {
	if len(os.Args) > 0 {
		return baseName(os.Args[0])
	}
	return "udpconduit"
}

func baseName(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i+1:]
		}
	}
	return p
}

// initOnce runs Init: the one place where the package ends the process
// (what start returns decides).
func initOnce() {
	j, code, err := start()
	if j != nil {
		std.job = j
		return
	}
	var ended *spawn.EndedError
	if err != nil && !errors.As(err, &ended) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", progName(), err)
	}
	os.Exit(code)
}
