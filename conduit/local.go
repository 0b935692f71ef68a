package conduit

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/spawn"
)

// RunLocal runs a job of n ranks on goroutines of this process, each with its
// own Job over loopback UDP, and returns its exit code, for examples and
// tests. The job ends as a spawned one does.
func RunLocal(n int, program func(j *Job)) (int, error) {
	if n < 1 || n > amudp.MaxPeers {
		return 0, fmt.Errorf("conduit: RunLocal: n=%d: accepted: 1 to %d ranks", n, amudp.MaxPeers)
	}
	secret := make([]byte, 32)
	rand.Read(secret)
	listen := func(int) (amudp.Transport, error) {
		return amudp.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), amudp.DefaultSocketBufferInitial)
	}
	// As in a job of processes: polite waits when the ranks outnumber the
	// CPUs, where spinners would take the CPU the others need.
	spin, polite, _ := progressMode(amudp.DefaultSpin, false, n, runtime.NumCPU())
	lj, err := newLocalJob(n, listen, amudp.Config{Secret: secret, Spin: spin, Polite: polite}, 2*time.Second)
	if err != nil {
		return 0, fmt.Errorf("conduit: RunLocal: %w", err)
	}
	algo, _ := chooseBarrier("", polite)
	lj.setBarrier(algo)
	lj.c.endLate = true
	<-lj.start(program)
	lj.close()
	return lj.c.code, nil
}

// setBarrier sets every rank's barrier algorithm.
func (lj *localJob) setBarrier(algo barrierAlgo) {
	for _, j := range lj.jobs {
		j.setPlan(algo, nil)
	}
}

// localJob is an in-process job: RunLocal's, and the package tests'.
type localJob struct {
	c    *localConsole
	jobs []*Job
}

// newLocalJob opens n endpoints with listen, configured by cfg (its Rank
// and Reserved set here), and makes their Jobs under one localConsole.
func newLocalJob(n int, listen func(i int) (amudp.Transport, error), cfg amudp.Config, exitTimeout time.Duration) (*localJob, error) {
	c := &localConsole{n: n, ends: make([]string, n), finalized: make([]bool, n), exitTimeout: exitTimeout}
	lj := &localJob{c: c, jobs: make([]*Job, n)}
	addrs := make([]netip.AddrPort, n)
	for i := range n {
		conn, err := listen(i)
		if err != nil {
			lj.close()
			return nil, err
		}
		cfg.Rank, cfg.Reserved, cfg.ReservedErr = i, FirstClientHandler, ErrHandlerIndex
		ep, err := amudp.NewEndpoint(conn, cfg)
		if err != nil {
			conn.Close()
			lj.close()
			return nil, err
		}
		addrs[i] = conn.LocalAddr()
		c.eps = append(c.eps, ep)
		lj.jobs[i] = newJob(ep, localRank{c, i}, i, n, exitTimeout)
	}
	for _, ep := range c.eps {
		if err := ep.SetPeers(addrs); err != nil {
			lj.close()
			return nil, err
		}
	}
	return lj, nil
}

// start runs program on every rank's goroutine; the channel closes when
// all have ended.
func (lj *localJob) start(program func(j *Job)) <-chan struct{} {
	var wg sync.WaitGroup
	for i, j := range lj.jobs {
		wg.Go(func() {
			program(j)
			lj.c.returned(i)
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// close releases every rank's socket.
func (lj *localJob) close() {
	for _, ep := range lj.c.eps {
		ep.Close()
	}
}

// localConsole is the console of an in-process job: it ends the job as a
// worker process would end, except that a rank's "process" is its
// goroutine: Exit and ExitNow end it with runtime.Goexit. (An in-process
// job starts with every address known: nothing is relayed.)
type localConsole struct {
	n   int
	eps []*amudp.Endpoint

	mu      sync.Mutex
	code    int
	codeSet bool
	ends    []string // how each rank ended
	why     string   // why the first abort aborted the job
	by      string   // the first Exit, when it was Exit(0) ("rank 3's Exit(0)")
	// finalized says which ranks called Finalize, and final is the
	// highest code they passed; done counts those that finalized or
	// returned.
	finalized   []bool
	final, done int
	terminating atomic.Bool
	// exitTimeout is as a job's GASNET_EXIT_TIMEOUT, after which, with
	// endLate set (RunLocal's), a job whose ranks did not all return ends
	// (lateOthers); the package tests' jobs, some on a fake clock, wait.
	exitTimeout time.Duration
	endLate     bool
}

func (c *localConsole) wakeAll() {
	for _, e := range c.eps {
		e.Wake()
	}
}

// end records how rank ended (the first way only).
func (c *localConsole) end(rank int, how string) {
	c.mu.Lock()
	c.endLocked(rank, how)
	c.mu.Unlock()
}

func (c *localConsole) endLocked(rank int, how string) {
	if c.ends[rank] == "" {
		c.ends[rank] = how
	}
}

// returned records that rank's program returned. When every other rank
// is in Finalize, that can never end the job by their rule: it ends with
// 1, said on stderr, as a worker returning from main while others run
// ends it.
func (c *localConsole) returned(rank int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLocked(rank, "returned")
	if c.finalized[rank] {
		return
	}
	c.done++
	if c.done == 1 && c.n > 1 && c.endLate {
		time.AfterFunc(c.exitTimeout, c.lateOthers)
	}
	c.settleLocked()
}

// lateOthers ends the job with 1 when, an exit timeout after the first
// rank returned, others still neither returned nor are all in Finalize
// (waiting in a collective that the returned rank will never enter, say),
// as a worker returning from main while others run ends a job of
// processes, said on stderr.
func (c *localConsole) lateOthers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.codeSet || c.done == c.n {
		return
	}
	r := slices.Index(c.ends, "returned")
	fmt.Fprintf(os.Stderr, "%s: rank %d returned without calling Finalize or Exit while %d other ranks still run; ending the job with 1\n", progName(), r, c.n-c.done)
	c.code, c.codeSet = 1, true
	c.terminating.Store(true)
	c.wakeAll()
}

// settleLocked ends the job once every rank has finalized or returned and
// some finalized: with the highest code passed to Finalize, or, when a
// rank returned instead, with 1, said on stderr (its Finalize would never
// come). c.mu held.
func (c *localConsole) settleLocked() {
	if c.done < c.n || c.codeSet || !slices.Contains(c.finalized, true) {
		return
	}
	c.code, c.codeSet = c.final, true
	if r := slices.Index(c.finalized, false); r >= 0 {
		fmt.Fprintf(os.Stderr, "%s: rank %d returned without calling Finalize or Exit while the other ranks were in Finalize; ending the job with 1\n", progName(), r)
		c.code = 1
	}
	c.terminating.Store(true)
	c.wakeAll()
}

// localRank is one rank's link to a localConsole: the control of its Job.
type localRank struct {
	c    *localConsole
	rank int
}

func (r localRank) Terminating() *atomic.Bool { return &r.c.terminating }

func (r localRank) ExitNow(in string) {
	r.c.mu.Lock()
	by := r.c.by
	r.c.mu.Unlock()
	if in != "" && by != "" {
		fmt.Fprintf(os.Stderr, "%s: rank %d was ended in %s by %s\n", progName(), r.rank, in, by)
	}
	r.c.end(r.rank, "terminated")
	runtime.Goexit()
}

// Finalize ends the job, with the highest code passed, once every rank
// has called it (a rank's second call counts once); the rank then waits
// for Terminating.
func (r localRank) Finalize(code int) error {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finalized[r.rank] || c.ends[r.rank] == "returned" {
		return nil
	}
	c.finalized[r.rank] = true
	c.final = max(c.final, code)
	c.endLocked(r.rank, fmt.Sprintf("finalize %d", code))
	c.done++
	c.settleLocked()
	return nil
}

// Abort makes code the job's, over a 0 that an Exit set before, and tells
// every rank to exit; the Job has said why on stderr (abortJob), or leaves
// it to the console's line (fatal), kept here as the job's why. It
// returns: it runs in a handler, whose goroutine it cannot end, and the
// rank ends at its next call (Job.abort).
func (r localRank) Abort(code int, why string, _ time.Duration) {
	r.c.mu.Lock()
	if r.c.why == "" {
		r.c.why = why
	}
	r.c.mu.Unlock()
	r.c.setCode(code, true)
	r.c.end(r.rank, fmt.Sprintf("abort %d", code))
	r.c.terminating.Store(true)
	r.c.wakeAll()
}

func (r localRank) Exit(code int, _ time.Duration) {
	r.c.mu.Lock()
	if !r.c.codeSet {
		// As the console's rule: an Exit(0) keeps a failure that a
		// rank's Finalize reported before it.
		r.c.code, r.c.codeSet = code, true
		if code == 0 {
			r.c.code = r.c.final
		}
		if r.c.code == 0 {
			r.c.by = fmt.Sprintf("rank %d's Exit(0)", r.rank)
		}
	}
	r.c.mu.Unlock()
	r.c.end(r.rank, fmt.Sprintf("exit %d", code))
	r.c.terminating.Store(true)
	r.c.wakeAll()
	runtime.Goexit()
}

// setCode sets the job's code: the first one set, except that an abort's
// replaces a 0.
func (c *localConsole) setCode(code int, abort bool) {
	c.mu.Lock()
	if !c.codeSet || abort && c.code == 0 {
		c.code, c.codeSet = code, true
	}
	c.mu.Unlock()
}

func (r localRank) Report(spawn.Coll) error { return nil }
