// Package conduit is udpconduit's public API: a program written against it
// runs as `./prog N args...`. That process becomes the console: it spawns N
// workers running the same program, serves them and exits with the job's
// exit code. In the workers, Init bootstraps and returns; they then exchange
// active messages over UDP (DESIGN.md §1, §3).
//
// A worker's duties, in order:
//  1. Init().
//  2. Attach(handlers, segmentSize) registers handlers 128..255 and the
//     segment that Long messages and Put/Get use.
//  3. Send requests, Poll or WaitUntil, Barrier, Put/Get.
//  4. Exit(code), or return from main (exit code 0 for the job).
//
// Goroutines: every function and method of the package may be called from
// any goroutine of a worker, at the same time. Handlers run on whichever
// goroutine polls (a request, Poll, WaitUntil, a collective), one at a
// time per rank, or on a background goroutine with GASNET_RCV_THREAD=1.
// Collectives (Barrier, and every collective of a Team: World is the
// whole job's) match across ranks by their order of call on their team:
// called from several goroutines of a rank they do not race, but take
// numbers in the order they reach the library.
//
// In one process: RunLocal runs a job of N ranks on goroutines of the
// calling process, each with a Job of its own over a loopback UDP socket,
// with no console and no spawning. The Job methods are the package-level
// functions of the same names; the runnable examples (go test -run Example)
// use it, and so can a program's own tests.
//
// Programs: cmd/hello is the smallest; cmd/testcore sends every kind of
// request and reply and checks them; the Examples below show Init and
// Attach, request and reply, Put and Get, collectives and Exit, as a
// program run as `./prog N` writes them, and the same in RunLocal, with
// their output.
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

// Handler runs an active message: t identifies the message (and replies to
// a request), args are its arguments and payload its Medium or Long payload,
// valid only during the call (a Long payload is also in the segment). It
// runs on whichever goroutine polls, one handler at a time per rank; it
// must not block, and may reply once (t.ReplyShort/Medium/Long) to a
// request.
type Handler func(t *Token, args []uint32, payload []byte)

// Token identifies the message a handler runs for: its source rank
// (Source), whether it is a request (IsRequest), and the way to reply. A
// Token is valid only during its handler's call, on that goroutine.
type Token amudp.Token

// Source returns the rank that sent the message.
func (t *Token) Source() int { return (*amudp.Token)(t).Source() }

// IsRequest reports whether the message is a request (a reply's handler
// may not reply).
func (t *Token) IsRequest() bool { return (*amudp.Token)(t).IsRequest() }

// ReplyShort replies to the request with a Short message to handler of its
// source: at most one reply per request (ErrAlreadyReplied), from its
// handler only (ErrNotInHandler); handler is a client index (128..255,
// ErrHandlerIndex).
func (t *Token) ReplyShort(handler int, args ...uint32) error {
	return (*amudp.Token)(t).ReplyShort(handler, args...)
}

// ReplyMedium replies with a Medium message of at most MaxMedium bytes
// (ErrPayloadTooBig), under the rules of ReplyShort.
func (t *Token) ReplyMedium(handler int, payload []byte, args ...uint32) error {
	return (*amudp.Token)(t).ReplyMedium(handler, payload, args...)
}

// ReplyLong replies with a Long message that writes payload at offset of
// the source's segment, under the rules of ReplyShort.
func (t *Token) ReplyLong(handler int, payload []byte, offset uint64, args ...uint32) error {
	return (*amudp.Token)(t).ReplyLong(handler, payload, offset, args...)
}

// Returned describes an undeliverable request, as handler 0 receives it
// (SetReturnedHandler): the destination rank and address (Dest, Addr),
// why (Reason: ReasonTimeout when the peer was silent for the give-up
// time), its kind and handler, and whether it was refused here (Incoming).
type Returned = amudp.Returned

// Reasons a request is returned (Returned.Reason).
const (
	// ReasonBadHandler: the destination has no handler at that index.
	ReasonBadHandler = amudp.ReasonBadHandler
	// ReasonNoSegment: a Long request to a rank without a segment.
	ReasonNoSegment = amudp.ReasonNoSegment
	// ReasonBadOffset: a Long request outside the destination's segment.
	ReasonBadOffset = amudp.ReasonBadOffset
	// ReasonTimeout: the destination sent nothing for the give-up time.
	ReasonTimeout = amudp.ReasonTimeout
	// ReasonClosed: this rank's endpoint closed with the request in flight.
	ReasonClosed = amudp.ReasonClosed
)

// Errors that requests and a Token's replies return, wrapped: compare
// with errors.Is. Every call may be made from any goroutine of a worker.
var (
	// ErrTooManyArgs: more than MaxArgs arguments.
	ErrTooManyArgs = amudp.ErrTooManyArgs
	// ErrPayloadTooBig: a Medium payload over MaxMedium bytes, or a Long
	// one over MaxLong.
	ErrPayloadTooBig = amudp.ErrPayloadTooBig
	// ErrBadRank: a destination outside 0..Size()-1.
	ErrBadRank = amudp.ErrBadRank
	// ErrNotInHandler: a reply from outside a request handler.
	ErrNotInHandler = amudp.ErrNotInHandler
	// ErrAlreadyReplied: a second reply to one request.
	ErrAlreadyReplied = amudp.ErrAlreadyReplied
	// ErrRequestInHandler: a request (or Put, Get) from inside a handler,
	// which may only reply, as in GASNet: it could wait forever for
	// credit that only the handler's own goroutine returns.
	ErrRequestInHandler = amudp.ErrRequestInHandler
	// ErrBadHandler: a request of a rank to itself for an index where no
	// handler is registered (another rank refuses such a request, which
	// comes back to handler 0; see Returned).
	ErrBadHandler = amudp.ErrBadHandler
	// ErrInterrupted: a wait (for credit, or for the requests sent to be
	// answered) gave up because the rank's endpoint closed.
	ErrInterrupted = amudp.ErrInterrupted
)

// Limits re-exported from amudp.
const (
	MaxArgs   = amudp.MaxArgs
	MaxMedium = amudp.MaxMedium
	MaxLong   = amudp.MaxLong
	// FirstClientHandler is the lowest handler index a program may register;
	// lower ones belong to udpconduit (DESIGN.md §3).
	FirstClientHandler = 128
	// MaxExitCode is the largest code Exit accepts.
	MaxExitCode = 255
)

// Errors of the API.
var (
	// ErrNotInitialized is wrapped by the error of a package-level
	// function called before Init has returned (in RunLocal, a program
	// calls the methods of its Job instead), and is what the functions
	// without an error panic with then.
	ErrNotInitialized = errors.New("conduit: Init has not run")
	ErrAttached       = errors.New("conduit: Attach called twice")
	ErrNotAttached    = errors.New("conduit: Attach has not run on this rank")
	ErrHandlerIndex   = errors.New("conduit: client handler index must be 128..255")
	ErrHandlerTable   = errors.New("conduit: bad handler table")
	ErrOutOfSegment   = errors.New("conduit: range outside the remote segment")
	// ErrMisaligned: an atomic on a word whose offset is not a multiple
	// of its size.
	ErrMisaligned = errors.New("conduit: offset not aligned to the word's size")
	// ErrAtomicOp: an atomic operation that is unknown, not defined for
	// the word's type (bitwise on floats), or AtomicGet without fetching.
	ErrAtomicOp = errors.New("conduit: atomic operation not accepted")
	// ErrReduceOp: a reduction operator that is unknown, or bitwise on
	// floats.
	ErrReduceOp = errors.New("conduit: reduction operator not accepted")
	// ErrCollectiveMismatch is wrapped by the error of a collective that
	// the members of its team called differently (another kind, element
	// type, operator, length or root), on every member that had not
	// returned its result when the difference showed (see Team).
	ErrCollectiveMismatch = coll.ErrMismatch
	// ErrCollectiveArgument is wrapped by the error of a collective that
	// a member refused for its own arguments (a root out of range, a
	// Scatter root's part count, an all-to-all's blocks), on that member
	// and on every other that had not returned its result.
	ErrCollectiveArgument = coll.ErrArgument
)

// Usage is the syntax of the program's own arguments (those after N), for
// the usage line that -h or --help as the first argument prints (with the
// main settings) before the console exits 0; set it before Init, on the
// goroutine that calls Init. Empty means "[args...]".
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

// Default returns the Job of this worker process, which the package-level
// functions act on; nil before Init.
func Default() *Job { return std.job }

// job returns the Job of an initialised worker, for the package-level
// function call; before Init has returned, an error wrapping
// ErrNotInitialized that names it.
func job(call string) (*Job, error) {
	if j := std.job; j != nil {
		return j, nil
	}
	return nil, fmt.Errorf("conduit.%s: %w", call, ErrNotInitialized)
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

// Init starts the job. In the console it validates N and the configuration,
// spawns the workers, serves them and exits the process with the job's exit
// code: it never returns there. In a worker it bootstraps (rank, size, peer
// addresses) and returns. When the process cannot take its part (a bad
// setting or N, an unreachable console), Init prints one line saying why
// and exits 1; a worker whose job ended before it joined exits with the
// job's code. Init is where the package ends the process; after it, only
// the job's end does (Exit, or the console's word; see package spawn).
// Call it first, from main: before it has returned, the package-level
// functions that return an error return one wrapping ErrNotInitialized,
// and the others (Rank, Size, HostRanks, Endpoint, SetReturnedHandler,
// Exit) panic with it. Concurrent and repeated calls run it once.
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

// The package-level functions below act on the Job of this process (see
// Default); each is documented at the Job method of the same name.

// SetReturnedHandler replaces handler 0, which receives undeliverable
// requests; see Job.SetReturnedHandler.
func SetReturnedHandler(h func(Returned)) { must("SetReturnedHandler").SetReturnedHandler(h) }

// Rank returns this worker's rank in [0, Size()).
func Rank() int { return must("Rank").Rank() }

// World returns the team of the whole job (Job.World).
func World() *Team { return must("World").World() }

// Size returns the number of workers, N.
func Size() int { return must("Size").Size() }

// HostRanks returns the ranks that share this worker's host, in order.
func HostRanks() []int { return must("HostRanks").HostRanks() }

// Attach registers the client's handlers and allocates the segment; see
// Job.Attach.
func Attach(handlers []HandlerEntry, segmentSize int) ([]byte, error) {
	j, err := job("Attach")
	if err != nil {
		return nil, err
	}
	return j.Attach(handlers, segmentSize)
}

// LocalView returns rank's segment as this process maps it, nil when it
// does not; see Job.LocalView for which ranks and the ordering rules.
func LocalView(rank int) []byte {
	if std.job == nil {
		return nil
	}
	return std.job.LocalView(rank)
}

// Neighbors returns the ranks of this rank's shared-memory group, this
// rank included; see Job.Neighbors. Before Init, nil.
func Neighbors() []int {
	if std.job == nil {
		return nil
	}
	return std.job.Neighbors()
}

// SegmentSize returns the segment size of rank (after Attach; 0 before).
func SegmentSize(rank int) int {
	if std.job == nil {
		return 0
	}
	return std.job.SegmentSize(rank)
}

// RequestShort sends a Short request to the client handler (128..255) of
// dest.
func RequestShort(dest, handler int, args ...uint32) error {
	j, err := job("RequestShort")
	if err != nil {
		return err
	}
	return j.RequestShort(dest, handler, args...)
}

// RequestMedium sends a Medium request; payload may be reused on return.
func RequestMedium(dest, handler int, payload []byte, args ...uint32) error {
	j, err := job("RequestMedium")
	if err != nil {
		return err
	}
	return j.RequestMedium(dest, handler, payload, args...)
}

// RequestLong sends a Long request writing payload at offset of dest's
// segment.
func RequestLong(dest, handler int, payload []byte, offset uint64, args ...uint32) error {
	j, err := job("RequestLong")
	if err != nil {
		return err
	}
	return j.RequestLong(dest, handler, payload, offset, args...)
}

// Poll handles pending messages and due retransmissions; see Job.Poll.
func Poll() error {
	j, err := job("Poll")
	if err != nil {
		return err
	}
	return j.Poll()
}

// WaitUntil services the network until cond returns true; see
// Job.WaitUntil.
func WaitUntil(cond func() bool) error {
	j, err := job("WaitUntil")
	if err != nil {
		return err
	}
	return j.WaitUntil(cond)
}

// Drain waits until every request this rank has sent has been answered;
// see Job.Drain.
func Drain() error {
	j, err := job("Drain")
	if err != nil {
		return err
	}
	return j.Drain()
}

// Collectives (Barrier, BarrierNotify/BarrierWait, AllGather, Attach) are
// matched across ranks by their order: the k-th barrier of one rank
// completes with the k-th barrier of every other. They may be called from
// several goroutines of a rank without a data race, but each call then takes
// the next number in the order the calls reach the library, so a program
// that wants them to match makes them from one goroutine per rank. When a
// collective stays incomplete for GASNET_HANG_WARN, the console says which
// ranks are in which collective.

// BarrierNotify enters the next barrier without waiting; see
// Job.BarrierNotify.
func BarrierNotify() error {
	j, err := job("BarrierNotify")
	if err != nil {
		return err
	}
	return j.BarrierNotify()
}

// BarrierWait waits until every rank has entered the barrier this rank last
// notified; see Job.BarrierWait.
func BarrierWait() error {
	j, err := job("BarrierWait")
	if err != nil {
		return err
	}
	return j.BarrierWait()
}

// Barrier waits until every rank has reached it; see Job.Barrier.
func Barrier() error {
	j, err := job("Barrier")
	if err != nil {
		return err
	}
	return j.Barrier()
}

// PutNB starts writing data at offset of dest's segment; see Job.PutNB.
func PutNB(dest int, offset uint64, data []byte) (*Handle[struct{}], error) {
	j, err := job("PutNB")
	if err != nil {
		return nil, err
	}
	return j.PutNB(dest, offset, data)
}

// Put writes data at offset of dest's segment and waits until it is there.
func Put(dest int, offset uint64, data []byte) error {
	j, err := job("Put")
	if err != nil {
		return err
	}
	return j.Put(dest, offset, data)
}

// GetNB starts reading len(buf) bytes at offset of src's segment into buf.
func GetNB(src int, offset uint64, buf []byte) (*Handle[struct{}], error) {
	j, err := job("GetNB")
	if err != nil {
		return nil, err
	}
	return j.GetNB(src, offset, buf)
}

// Get reads len(buf) bytes at offset of src's segment into buf.
func Get(src int, offset uint64, buf []byte) error {
	j, err := job("Get")
	if err != nil {
		return err
	}
	return j.Get(src, offset, buf)
}

// Exit ends the job: the first rank to call Exit sets the console's exit
// code, and every other rank is told to exit, even one that is computing
// without polling. It does not return: see Job.Exit.
func Exit(code int) { must("Exit").Exit(code) }
