package console

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// outputs is the console's side of routed output: one line buffer per
// worker stream, written to the console.
type outputs struct {
	cons  *console
	size  int
	label bool                         // GASNET_OUTPUT_LABEL
	dir   string                       // GASNET_OUTPUT_DIR
	ranks *atomic.Pointer[map[int]int] // spawn index → rank, once assigned
	mu    sync.Mutex
	open  map[io.Closer]bool
}

func newOutputs(cons *console, size int) *outputs {
	return &outputs{cons: cons, size: size, open: map[io.Closer]bool{}, ranks: new(atomic.Pointer[map[int]int])}
}

// outputKey is the key of a worker's streams among the console's outputs
// (serve, setRanks): its spawn index, or for a worker that its launcher
// started unnamed (C) -1-PID, so that the streams of different workers
// never share a label or a file.
func outputKey(index, pid int) int {
	if index < 0 && pid > 0 {
		return -1 - pid
	}
	return index
}

// setRanks records the rank of each output key (outputKey), for labels
// and file names.
func (o *outputs) setRanks(m map[int]int) { o.ranks.Store(&m) }

// rankOf returns the rank of the worker of spawn index i, once known.
func (o *outputs) rankOf(i int) (int, bool) {
	if o.ranks == nil {
		return 0, false
	}
	m := o.ranks.Load()
	if m == nil {
		return 0, false
	}
	r, ok := (*m)[i]
	return r, ok
}

// pipe serves a stream that the L spawner gave a pipe, in a goroutine of
// its own (launch.Spec.Output).
func (o *outputs) pipe(index, stream int, r *os.File) {
	o.mu.Lock()
	o.open[r] = true // before Start returns: drain waits for it
	o.mu.Unlock()
	go o.serve(r, r, stream, index)
}

// serve copies one stream of the worker of spawn index index, read from r,
// until the worker closes it, and then closes c: a TCP connection the
// worker routed the stream over, or the read end of the pipe the L
// spawner gave it (pipe).
func (o *outputs) serve(c io.Closer, r io.Reader, stream, index int) {
	o.mu.Lock()
	o.open[c] = true
	o.mu.Unlock()
	lw := newLineWriter(o.cons, stream, o.size)
	lw.o, lw.index = o, index
	io.Copy(lw, r)
	lw.Close()
	c.Close()
	o.mu.Lock()
	delete(o.open, c)
	o.mu.Unlock()
}

// drain waits for every stream to end (a worker's streams end when it
// exits, but what it wrote before may still sit in the sockets when the
// console's own reader is slow): it waits as long as output is being
// delivered, however slowly, and cuts off the streams still open only
// once none has delivered a byte for timeout (a stream that some process
// the worker started keeps open). It returns how many it cut off.
func (o *outputs) drain(timeout time.Duration) int {
	last, idle := o.cons.written.Load(), time.Now()
	for {
		o.mu.Lock()
		n := len(o.open)
		o.mu.Unlock()
		if n == 0 {
			return 0
		}
		if w := o.cons.written.Load(); w != last || o.cons.busy.Load() > 0 {
			last, idle = w, time.Now()
		} else if time.Since(idle) >= timeout {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	for c := range o.open {
		c.Close()
	}
	return len(o.open)
}

// finish drains the routed output once the job has ended (see drain) and
// returns the console's exit code: code, or 1 in place of 0 when output
// was lost (a reader that went away: the console's stdout or stderr is a
// closed pipe) or streams had to be cut off, which say reports.
func (o *outputs) finish(code int, timeout time.Duration, say func(string, ...any)) int {
	if cut := o.drain(timeout); cut > 0 {
		say("%d routed output streams were still open, with nothing written, %v (GASNET_EXIT_TIMEOUT) after the job ended: cut off (a process the worker started may hold them)", cut, timeout)
	}
	if lost := o.cons.losses(); lost != "" {
		say("routed output lost: %s could not be written", lost)
		return max(code, 1)
	}
	return code
}
