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
package conduit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"udpconduit/amudp"
	"udpconduit/retransmit"
	"udpconduit/spawn"
)

// Handler runs an active message; see amudp.Handler.
type Handler = amudp.Handler

// Token identifies the message a handler runs for; see amudp.Token.
type Token = amudp.Token

// Returned describes an undeliverable request; see amudp.Returned.
type Returned = amudp.Returned

// Limits re-exported from amudp.
const (
	MaxArgs   = amudp.MaxArgs
	MaxMedium = amudp.MaxMedium
	MaxLong   = amudp.MaxLong
	// FirstClientHandler is the lowest handler index a program may register;
	// lower ones belong to udpconduit (DESIGN.md §3).
	FirstClientHandler = 128
)

// Errors of the API.
var (
	ErrNotInitialized = errors.New("conduit: Init has not run")
	ErrAttached       = errors.New("conduit: Attach called twice")
	ErrNotAttached    = errors.New("conduit: Attach has not run on this rank")
	ErrHandlerIndex   = errors.New("conduit: client handler index must be 128..255")
	ErrHandlerTable   = errors.New("conduit: bad handler table")
	ErrOutOfSegment   = errors.New("conduit: range outside the remote segment")
)

// HandlerEntry names one handler of the table passed to Attach.
type HandlerEntry struct {
	Index int
	Fn    Handler
}

var st struct {
	once     sync.Once
	w        *spawn.Worker
	ep       *amudp.Endpoint
	cfg      *spawn.Config
	hostRank []int
	rma      rma

	// attached is set once Attach has exchanged the segment sizes; segs is
	// written before and never after.
	attached atomic.Bool
	segs     []uint64 // segment size of every rank

	// coll orders the collective calls of this rank's goroutines (see
	// Barrier) and guards the fields below.
	coll    sync.Mutex
	attach  bool   // Attach has begun
	barrier uint64 // barriers this rank entered
	gathers uint64
}

// Init starts the job. In the console it validates N and the configuration,
// spawns the workers, serves them and exits the process with the job's exit
// code: it never returns there. In a worker it bootstraps (rank, size, peer
// addresses) and returns. Errors are printed as one line and exit 1.
func Init() {
	st.once.Do(initOnce)
}

func fatal(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s: "+format+"\n", append([]any{progName()}, a...)...)
	os.Exit(1)
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

func initOnce() {
	cfg, src, err := spawn.LoadConfig()
	if err != nil {
		fatal("%v", err)
	}
	if !spawn.IsWorker() {
		n, err := spawn.ParseN(os.Args)
		if err != nil {
			fatal("%v", err)
		}
		prog, err := os.Executable()
		if err != nil {
			fatal("cannot find this program's path: %v", err)
		}
		os.Exit(spawn.Console(cfg, src, n, prog, os.Args[2:]))
	}
	st.cfg = cfg
	w, err := spawn.Dial(cfg)
	if err != nil {
		fatal("%v", err)
	}
	udp, err := amudp.ListenUDP(netip.AddrPortFrom(w.LocalIP, 0), cfg.SockBufInit)
	if err != nil {
		fatal("%v", err)
	}
	if err := w.Join(cfg, udp.LocalAddr()); err != nil {
		fatal("%v", err)
	}
	// The console's settings are now in force: read them again.
	if cfg, _, err = spawn.LoadConfig(); err != nil {
		fatal("%v", err)
	}
	st.cfg, st.w = cfg, w
	w.SetGrace(cfg.ExitTimeout / 2)
	addrs, err := w.Addrs()
	if err != nil {
		fatal("%v", err)
	}
	ep, err := amudp.NewEndpoint(udp, amudp.Config{
		Rank: w.Rank, Secret: w.Secret, NetworkDepth: cfg.NetworkDepth, SendDepth: cfg.SendDepth,
		RecvDepth: cfg.RecvDepth, SocketBufferMax: cfg.SockBufMax, Spin: cfg.PollSpin,
		Reserved: FirstClientHandler,
		Retransmit: retransmit.Config{
			Initial: time.Duration(cfg.ReqTimeoutInitial) * time.Microsecond,
			Backoff: cfg.ReqTimeoutBackoff,
			Max:     time.Duration(cfg.ReqTimeoutMax) * time.Microsecond,
			MinRTO:  time.Millisecond,
		},
	})
	if err != nil {
		fatal("%v", err)
	}
	if err := ep.SetPeers(addrs); err != nil {
		fatal("%v", err)
	}
	ep.SetReturnedHandler(defaultReturned)
	st.ep = ep
	w.OnEvent(ep.Wake)
	registerCore(ep)
	if err := relayTable(ep, w); err != nil {
		fatal("rank %d: %v", w.Rank, err)
	}
	for r, h := range w.Hosts {
		if h == w.Hosts[w.Rank] {
			st.hostRank = append(st.hostRank, r)
		}
	}
	if cfg.RcvThread {
		go progress(ep)
	}
}

// progress services the network in the background for GASNET_RCV_THREAD:
// it polls, spinning briefly then sleeping in the kernel, until the
// endpoint closes. Goroutines of the program that wait meanwhile are woken
// by its poll passes.
func progress(ep *amudp.Endpoint) {
	for {
		if err := ep.WaitUntil(func() bool { return false }); errors.Is(err, net.ErrClosed) {
			return
		}
		// Any other error is a returned request, which the returned
		// handler has already dealt with.
	}
}

// defaultReturned is handler 0's default: abort the job naming the
// unreachable rank and its address (DESIGN.md §5).
func defaultReturned(r Returned) {
	fmt.Fprintf(os.Stderr, "%s: rank %d: %v; aborting the job\n", progName(), st.w.Rank, r)
	go st.w.Exit(1, st.cfg.ExitTimeout) // not on the polling goroutine's stack
}

// SetReturnedHandler replaces handler 0, which receives undeliverable
// requests. The default aborts the job.
func SetReturnedHandler(h func(Returned)) { mustInit().SetReturnedHandler(h) }

// mustInit returns the endpoint of an initialised worker. Every API call
// starts here, so it is also where a rank that the console told to exit
// (because the job ended elsewhere) does so: at its next call into the
// library (see spawn.Worker.Terminating).
func mustInit() *amudp.Endpoint {
	if st.ep == nil {
		fatal("%v", ErrNotInitialized)
	}
	if st.w.Terminating() {
		st.w.ExitNow()
	}
	return st.ep
}

// wait services the network until cond holds or the console tells this
// rank to exit. A wait cut short that way exits; one whose condition came
// true returns, and the program's next call exits (a barrier that completed
// just before the job ended elsewhere lets the program print its last
// lines).
func wait(ep *amudp.Endpoint, cond func() bool) error {
	err := ep.WaitUntil(func() bool { return st.w.Terminating() || cond() })
	if st.w.Terminating() && !cond() {
		st.w.ExitNow()
	}
	return err
}

// Rank returns this worker's rank in [0, Size()).
func Rank() int { mustInit(); return st.w.Rank }

// Size returns the number of workers, N.
func Size() int { mustInit(); return st.w.Size }

// HostRanks returns the ranks that share this worker's host, in order.
func HostRanks() []int { mustInit(); return append([]int(nil), st.hostRank...) }

// Endpoint returns the underlying amudp endpoint.
func Endpoint() *amudp.Endpoint { return mustInit() }

// Attach registers the client's handlers (indexes 128..255, each at most
// once, none nil), allocates a segment of segmentSize bytes that Long
// messages and Put/Get address, and waits until every rank has attached.
// It is collective: every rank calls it once, before any request, Put or
// Get of its own. A bad table or a segment that cannot be allocated is an
// error, and nothing is registered: the rank may call Attach again.
func Attach(handlers []HandlerEntry, segmentSize int) ([]byte, error) {
	ep := mustInit()
	if err := checkTable(handlers); err != nil {
		return nil, err
	}
	st.coll.Lock()
	if st.attach {
		st.coll.Unlock()
		return nil, ErrAttached
	}
	seg, err := allocSegment(segmentSize)
	if err == nil {
		st.attach = true
	}
	st.coll.Unlock()
	if err != nil {
		return nil, err
	}
	for _, h := range handlers {
		if err := ep.Register(h.Index, h.Fn); err != nil {
			return nil, err
		}
	}
	ep.SetSegment(seg)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(segmentSize))
	parts, err := AllGather(b[:])
	if err != nil {
		return nil, err
	}
	segs := make([]uint64, len(parts))
	for i, p := range parts {
		if len(p) == 8 {
			segs[i] = binary.LittleEndian.Uint64(p)
		}
	}
	st.segs = segs
	st.attached.Store(true)
	return seg, nil
}

// checkTable checks a handler table: client indexes, each once, no nil
// function.
func checkTable(handlers []HandlerEntry) error {
	seen := map[int]bool{}
	for i, h := range handlers {
		switch {
		case h.Index < FirstClientHandler || h.Index >= amudp.NumHandlers:
			return fmt.Errorf("%w (entry %d has index %d)", ErrHandlerIndex, i, h.Index)
		case seen[h.Index]:
			return fmt.Errorf("%w: index %d appears twice", ErrHandlerTable, h.Index)
		case h.Fn == nil:
			return fmt.Errorf("%w: index %d has a nil handler", ErrHandlerTable, h.Index)
		}
		seen[h.Index] = true
	}
	return nil
}

// SegmentSize returns the segment size of rank (after Attach).
func SegmentSize(rank int) int {
	if !st.attached.Load() || rank < 0 || rank >= len(st.segs) {
		return 0
	}
	return int(st.segs[rank])
}

// clientCall checks a client request before it is sent: Attach done, a
// client handler index.
func clientCall(handler int) (*amudp.Endpoint, error) {
	ep := mustInit()
	if !st.attached.Load() {
		return nil, ErrNotAttached
	}
	if handler < FirstClientHandler || handler >= amudp.NumHandlers {
		return nil, fmt.Errorf("%w (got %d)", ErrHandlerIndex, handler)
	}
	return ep, nil
}

// RequestShort sends a Short request to the client handler (128..255) of
// dest.
func RequestShort(dest, handler int, args ...uint32) error {
	ep, err := clientCall(handler)
	if err != nil {
		return err
	}
	return ep.RequestShort(dest, handler, args...)
}

// RequestMedium sends a Medium request; payload may be reused on return.
func RequestMedium(dest, handler int, payload []byte, args ...uint32) error {
	ep, err := clientCall(handler)
	if err != nil {
		return err
	}
	return ep.RequestMedium(dest, handler, payload, args...)
}

// RequestLong sends a Long request writing payload at offset of dest's
// segment; the range is checked against the segment sizes exchanged at
// Attach.
func RequestLong(dest, handler int, payload []byte, offset uint64, args ...uint32) error {
	ep, err := clientCall(handler)
	if err != nil {
		return err
	}
	if err := checkRemote(dest, offset, len(payload)); err != nil {
		return err
	}
	return ep.RequestLong(dest, handler, payload, offset, args...)
}

// checkRemote checks a range of dest's segment against the sizes exchanged
// at Attach, which must have run.
func checkRemote(dest int, offset uint64, n int) error {
	if !st.attached.Load() {
		return ErrNotAttached
	}
	if dest < 0 || dest >= len(st.segs) {
		return nil // amudp reports a bad rank
	}
	if offset > st.segs[dest] || uint64(n) > st.segs[dest]-offset {
		return fmt.Errorf("%w: %d bytes at offset %d of rank %d's segment of %d", ErrOutOfSegment, n, offset, dest, st.segs[dest])
	}
	return nil
}

// Poll handles pending messages and due retransmissions.
func Poll() error { return mustInit().Poll() }

// WaitUntil services the network until cond returns true.
func WaitUntil(cond func() bool) error { return wait(mustInit(), cond) }

// Collectives (Barrier, BarrierNotify/BarrierWait, AllGather, Attach) are
// matched across ranks by their order: the k-th barrier of one rank
// completes with the k-th barrier of every other. They may be called from
// several goroutines of a rank without a data race, but each call then takes
// the next number in the order the calls reach the library, so a program
// that wants them to match makes them from one goroutine per rank. When a
// collective stays incomplete for GASNET_HANG_WARN, the console says which
// ranks are in which collective.

// BarrierNotify enters the next barrier without waiting.
func BarrierNotify() error {
	mustInit()
	st.coll.Lock()
	defer st.coll.Unlock()
	st.barrier++
	return st.w.BarrierNotify()
}

// BarrierWait waits, servicing the network, until every rank has entered
// the barrier this rank last notified. Everything the program's handlers did
// before the other ranks entered happens before BarrierWait returns.
func BarrierWait() error {
	ep := mustInit()
	st.coll.Lock()
	target := st.barrier
	st.coll.Unlock()
	return waitBarrier(ep, target)
}

func waitBarrier(ep *amudp.Endpoint, target uint64) error {
	if err := wait(ep, func() bool { return st.w.BarriersDone() >= target }); err != nil {
		return err
	}
	ep.Fence()
	return nil
}

// Barrier waits until every rank has reached it. Everything the program's
// handlers did on this rank before every rank entered (a Put's data written
// into the segment, say) happens before Barrier returns.
func Barrier() error {
	ep := mustInit()
	st.coll.Lock()
	st.barrier++
	target := st.barrier
	err := st.w.BarrierNotify()
	st.coll.Unlock()
	if err != nil {
		return err
	}
	return waitBarrier(ep, target)
}

// AllGather contributes data and returns every rank's contribution, indexed
// by rank. Concurrent calls of one rank's goroutines run one after another.
func AllGather(data []byte) ([][]byte, error) {
	ep := mustInit()
	st.coll.Lock()
	defer st.coll.Unlock()
	st.gathers++
	target := st.gathers
	if err := st.w.GatherSend(data); err != nil {
		return nil, err
	}
	var parts [][]byte
	err := wait(ep, func() bool {
		n, p := st.w.GathersDone()
		parts = p
		return n >= target
	})
	ep.Fence()
	return parts, err
}

// Exit ends the job: the first rank to call Exit sets the console's exit
// code, and every other rank is told to exit, even one that is computing
// without polling. It does not return.
func Exit(code int) {
	mustInit()
	st.w.Exit(code, st.cfg.ExitTimeout)
}
