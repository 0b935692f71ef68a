package worker

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/pmi"
)

// DialPMI makes this task a worker of a job that a launcher serving PMI
// started directly (srun --mpi=pmi2, mpiexec.hydra; DESIGN.md §9.1): there
// is no console. Its rank and the job's size are the launcher's; Join
// finds rank 0's hub (and the job secret) through the launcher's
// key-value store and takes the whole address table from it. Its
// configuration is its environment, which the launcher passes on.
func DialPMI(e pmi.Env) (*Worker, *envconf.Config, map[string]envconf.Source, error) {
	cfg, src, err := envconf.Load()
	if err != nil {
		return nil, nil, nil, err
	}
	// Hydra gives its tasks no PMI_JOBID and serves PMI-1, or PMI-2 when
	// the init line asks for it (its job id in fullinit is not checked):
	// PMI-2's node attributes name a task that never starts (watchNode).
	hydra := e.JobID == ""
	if hydra {
		e.JobID = "hydra"
	}
	c, err := pmi.Dial(e, cfg.ConnectTimeout)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("rank %d of %d: the launcher's PMI: %w", e.Rank, e.Size, err)
	}
	w := &Worker{pmi: c, hydra: hydra, shmSet: src["GASNET_SUPERNODE_MAXSIZE"].Var != ""}
	go w.stopOnSignal()
	if cfg.WorkerIP != "" {
		if w.LocalIP, err = envconf.AddrOnSubnet(cfg.WorkerIP); err != nil {
			return nil, nil, nil, err
		}
	} else {
		w.LocalIP = defaultAddr()
	}
	return w, cfg, src, nil
}

// defaultAddr is the address a directly launched worker is known by in
// the table when GASNET_WORKERIP is not set (it publishes its host's
// others too, DESIGN.md §7.2): the source of the host's default route,
// else its first address of global scope, else loopback.
func defaultAddr() netip.Addr {
	for _, probe := range []string{"192.0.2.1:9", "[2001:db8::1]:9"} { // documentation addresses: a route lookup, nothing sent
		if c, err := net.Dial("udp", probe); err == nil {
			a, _ := netip.ParseAddrPort(c.LocalAddr().String())
			c.Close()
			if ip := a.Addr().Unmap(); ip.IsGlobalUnicast() {
				return ip
			}
		}
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok && ip.Unmap().IsGlobalUnicast() {
					return ip.Unmap()
				}
			}
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// Direct reports whether the worker runs without a console, started by a
// launcher that serves PMI: every rank has the whole table from Join, and
// rank 0 keeps the job's end (hub.go).
func (w *Worker) Direct() bool { return w.pmi != nil }

// joinPMI is Join under direct launch. Rank 0 publishes, through the
// launcher's store, where its hub listens and the job secret; after the
// launcher's fence every rank reads that one value, connects to the hub
// and sends it its Join, and the hub, once every rank has joined, sends
// each its Welcome with the whole table (DESIGN.md §9.1): one fence and
// one read of the store a rank, the joins and the table over TCP.
func (w *Worker) joinPMI(cfg *envconf.Config, udp netip.AddrPort, inbox string, nets []ctl.Net) error {
	c := w.pmi
	rank, size := c.Rank(), c.Size()
	extra, err := w.watchNode(cfg, rank, size)
	if err != nil {
		return err
	}
	if extra > 0 {
		c.SetTimeout(cfg.ConnectTimeout + extra)
		defer c.SetTimeout(cfg.ConnectTimeout)
	}
	var ln net.Listener
	if rank == 0 {
		var sb [16]byte
		rand.Read(sb[:])
		secret := []byte(hex.EncodeToString(sb[:]))
		if ln, err = net.Listen("tcp", netip.AddrPortFrom(w.LocalIP, 0).String()); err != nil {
			return fmt.Errorf("rank 0: listening for the ranks' connections on %v: %w", w.LocalIP, err)
		}
		host, _ := os.Hostname()
		if err := c.Put("hub", []byte(ln.Addr().String()+" "+strconv.Itoa(os.Getpid())+" "+host+" "+string(secret))); err != nil {
			ln.Close()
			return fmt.Errorf("rank 0: publishing its address through the launcher: %w", err)
		}
		w.hub = newHub(ln, secret, size, cfg.ExitTimeout, cfg.ConnectTimeout, cfg.Liveness, say,
			func(joins []ctl.Join) ([]ctl.Welcome, error) { return w.welcomes(cfg, joins) },
			w.killJob)
		// Hydra's PMI-2 fence does not wait for the other tasks (a
		// get waits for its key instead): the hub may start while
		// another node's ranks still watch for one that never
		// started, and leaves them the time to name it.
		w.hub.margin = watchMargin(cfg.ConnectTimeout)
	}
	if err := c.Fence(); err != nil {
		if ln != nil {
			ln.Close()
		}
		return fmt.Errorf("rank %d of %d: waiting for every task at the launcher's fence (GASNET_CONNECT_TIMEOUT=%v): %w; a task of the job did not start, or did not reach conduit.Init", rank, size, cfg.ConnectTimeout, err)
	}
	if w.hub != nil {
		go w.hub.serve() // the ranks connect from here on
	}
	hubVal, err := c.Get("hub")
	hub := strings.Fields(string(hubVal))
	if err == nil && len(hub) != 4 {
		err = fmt.Errorf("malformed: %q", hubVal)
	}
	if err != nil {
		return fmt.Errorf("rank %d: reading rank 0's address from the launcher: %w", rank, err)
	}
	w.hub0.PID, _ = strconv.Atoi(hub[1])
	w.hub0.Name = hub[2]
	w.Secret = []byte(hub[3])
	w.exitTimeout = cfg.ExitTimeout
	name, _ := os.Hostname()
	jn := ctl.Join{Rank: rank, Index: rank, Host: hostIdentity(cfg.HostDetect, udp.Addr()), Name: name, PID: os.Getpid(),
		UDP: udp.String(), CPUs: runtime.NumCPU(), Mask: cpuMask(), Inbox: inbox, Nets: nets[:min(len(nets), ctl.MaxNets)]}
	if err := w.dialHub(hub[0], cfg.ConnectTimeout, jn); err != nil {
		return fmt.Errorf("rank %d: %w", rank, err)
	}
	// The hub sends the welcome once every rank has joined, or ends the
	// job GASNET_CONNECT_TIMEOUT after the fence when one has not.
	w.conn.SetReadDeadline(time.Now().Add(2*cfg.ConnectTimeout + watchMargin(cfg.ConnectTimeout) + cfg.ExitTimeout))
	typ, body, err := ctl.ReadFrame(w.r)
	for err == nil && typ == ctl.FramePing {
		if err = ctl.WriteFrame(w.conn, ctl.FramePong, ctl.NoBody{}); err == nil {
			typ, body, err = ctl.ReadFrame(w.r)
		}
	}
	w.conn.SetReadDeadline(time.Time{})
	switch {
	case rank != 0 && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		// Rank 0 ended first: it says why, if it could.
		return w.endBeforeWelcome(fmt.Errorf("rank %d: rank 0 (pid %s on %s) ended before it sent the address table", rank, hub[1], hub[2]))
	case err != nil:
		return w.endBeforeWelcome(fmt.Errorf("rank %d: waiting for the address table from rank 0 at %s: %w", rank, hub[0], err))
	case typ == ctl.FrameTerminate:
		return w.endBeforeWelcome(&EndedError{Code: ctl.DecodeExit(body).Code})
	case typ != ctl.FrameWelcome || ctl.DecodeBody(body, &w.wel) != nil || w.wel.Rank != rank || w.wel.Size != size:
		return w.endBeforeWelcome(fmt.Errorf("rank %d: malformed welcome from rank 0 at %s", rank, hub[0]))
	}
	w.blob = w.wel.Table
	if w.tab, err = ctl.DecodeTable(w.blob, size); err != nil {
		return fmt.Errorf("rank %d: the address table from rank 0: %w", rank, err)
	}
	if w.hydra {
		// Hydra kills every task at the first that closes its PMI
		// session without finalizing it, whatever its status: a rank
		// returning from main, which no library call sees, would end
		// the job. The hub judges the ranks' ends from here on.
		w.pmi.Finalize()
		w.finalized = true
	}
	w.hubbed.Store(true)
	go w.readLoop()
	return nil
}

// endBeforeWelcome returns err, on rank 0 once its hub has ended the job
// (a rank never joined, or one ended before the table): the others told
// its code and gone, or handed to killJob GASNET_EXIT_TIMEOUT after the
// end (which ends this process), as exit waits for them.
func (w *Worker) endBeforeWelcome(err error) error {
	if w.hub != nil {
		select {
		case <-w.hub.Drained():
		case <-time.After(drainWait(w.exitTimeout)):
		}
	}
	return err
}

// welcomes is rank 0's hub's table, once every rank has joined: each
// rank's Welcome, with the whole table placed by host (ctl.Place, with
// this rank's GASNET_SUPERNODE_MAXSIZE for all, as the console's), or an
// error naming the first rank whose Join is malformed.
func (w *Worker) welcomes(cfg *envconf.Config, joins []ctl.Join) ([]ctl.Welcome, error) {
	size := len(joins)
	tab := ctl.Table{Addrs: make([]netip.AddrPort, size), Hosts: make([]string, size), Inboxes: make([]string, size), Nets: make([][]ctl.Net, size)}
	cpus, masks := make([]int, size), make([]string, size)
	for r, o := range joins {
		a, err := netip.ParseAddrPort(o.UDP)
		if err != nil || a.Port() == 0 {
			return nil, fmt.Errorf("rank %d (pid %d on %s) sent rank 0 a malformed UDP address %q; aborting the job", r, o.PID, o.Name, o.UDP)
		}
		tab.Addrs[r], tab.Hosts[r], tab.Inboxes[r], tab.Nets[r] = a, o.Host, o.Inbox, o.Nets
		cpus[r], masks[r] = o.CPUs, o.Mask
	}
	tab, place := ctl.Place(tab, cpus, masks, func(ranks, cpus int) bool {
		return ctl.SharesMemory(cfg.SupernodeMax, w.shmSet, ranks, cpus)
	})
	blob := ctl.EncodeTable(tab)
	wels := make([]ctl.Welcome, size)
	for r := range wels {
		wels[r] = place.Welcome(tab, r)
		wels[r].Table = blob
	}
	return wels, nil
}

// watchNode names the ranks of this node that never reach Init, where
// the launcher keeps node attributes (PMI-2: srun, Hydra). A task missing stops
// every other at the first fence, where none can tell which is missing
// (the launcher shows a task's puts only after a fence that every task
// joined); a node attribute is visible to the node's tasks at once. Each
// rank says it is up in its node's attributes and, before the fence, which
// it could not pass without the missing, watches its node (nodeMissing):
// the rank up just above a run of missing ranks names them when
// GASNET_CONNECT_TIMEOUT passes, and ends the job. The others wait extra
// longer at the first fence, so that the line naming a rank comes first.
func (w *Worker) watchNode(cfg *envconf.Config, rank, size int) (extra time.Duration, err error) {
	c := w.pmi
	if !c.NodeAttrs() || size < 2 {
		return 0, nil
	}
	key := func(r int) string { return "udpc-up-" + strconv.Itoa(r) }
	if err := c.PutNodeAttr(key(rank), "1"); err != nil {
		// Left out, this rank would be named missing.
		return 0, fmt.Errorf("rank %d: saying it is up in its node's attributes (PMI-2): %w", rank, err)
	}
	up := func(r int) bool {
		_, up, err := c.NodeAttr(key(r))
		return up || err != nil
	}
	local := nodeRanks(c, rank, size)
	i := slices.Index(local, rank)
	if i < 0 || len(local) < 2 {
		return 0, nil
	}
	missing := nodeMissing(local, i, cfg.ConnectTimeout, up)
	if len(missing) == 0 {
		// A rank of the node names a missing task GASNET_CONNECT_TIMEOUT
		// after it starts: the others' fence waits watchMargin longer,
		// so that the line naming it comes first.
		return watchMargin(cfg.ConnectTimeout), nil
	}
	host, _ := os.Hostname()
	names := make([]string, len(missing))
	for i, r := range missing {
		names[i] = strconv.Itoa(r)
	}
	what := "rank " + names[0]
	if len(names) > 1 {
		what = "ranks " + strings.Join(names, ", ")
	}
	msg := fmt.Sprintf("rank %d of %d: %s on this host (%s) did not start, or did not reach conduit.Init, within GASNET_CONNECT_TIMEOUT=%v; aborting the job", rank, size, what, host, cfg.ConnectTimeout)
	say(msg)
	w.endJob(1, msg, nil)
	return 0, nil
}

// watchMargin is how much longer than GASNET_CONNECT_TIMEOUT (connect) the
// ranks that name no missing task wait at the fence, and rank 0's hub for
// the ranks' connections, so that the line naming a missing task comes
// first, from a host that started its tasks later than rank 0's: a
// second, or a quarter of connect when that is longer.
func watchMargin(connect time.Duration) time.Duration { return max(time.Second, connect/4) }

// nodeMissing returns the ranks of a node (local, in order) that its rank
// local[i] is to name missing, nil when it names none. Each rank but the
// node's lowest waits for the rank just below it, and the lowest for the
// node's last: one question at a time (waitRanks), which the rank asked
// about usually answers at once. When the one waited for is not up within
// timeout, the rank names the run of missing ranks that ends there (below
// it, or the node's last ranks): each gap is named once, by the rank up
// just above it. The lowest rank up also names the node's last ranks
// missing: when the node's lowest is missing, no one else would.
func nodeMissing(local []int, i int, timeout time.Duration, up func(int) bool) []int {
	last := len(local) - 1
	// run returns the ranks not up from local[j] down, stopping at the
	// first up or at local[stop].
	run := func(j, stop int) []int {
		var gap []int
		for ; j >= stop && !up(local[j]); j-- {
			gap = append(gap, local[j])
		}
		slices.Reverse(gap)
		return gap
	}
	if i == 0 {
		if last == 0 || len(waitRanks(local[last:], timeout, up)) == 0 {
			return nil
		}
		return run(last, 1)
	}
	if len(waitRanks(local[i-1:i], timeout, up)) == 0 {
		return nil
	}
	gap := run(i-1, 0)
	if len(gap) == i && i < last { // the lowest rank up
		gap = append(gap, run(last, i+1)...)
	}
	return gap
}

// nodeRanks returns the ranks on this task's node: SLURM_GTIDS, the task
// ids slurmstepd started on the node, where set; else those the launcher's
// PMI_process_mapping places with rank; nil when neither says.
func nodeRanks(c *pmi.Client, rank, size int) []int {
	if g := os.Getenv("SLURM_GTIDS"); g != "" {
		var local []int
		for _, f := range strings.Split(g, ",") {
			r, err := strconv.Atoi(f)
			if err != nil || r < 0 || r >= size {
				return nil
			}
			local = append(local, r)
		}
		if !slices.Contains(local, rank) {
			return nil
		}
		slices.Sort(local)
		return local
	}
	m, ok, err := c.JobAttr("PMI_process_mapping")
	if err != nil || !ok {
		return nil
	}
	nodes, err := pmi.ParseMapping(m, size)
	if err != nil {
		return nil
	}
	var local []int
	for r, n := range nodes {
		if n == nodes[rank] {
			local = append(local, r)
		}
	}
	return local
}

// waitRanks asks up about the ranks in order, each until it is up, and
// when timeout passes returns those not up then, asked once more each. It
// asks again about the same rank after 0.5 ms, then 1 ms, then every 2 ms:
// one question at a time however many are missing (500 a second at most,
// to the node's PMI server), and a node whose last rank comes up is seen
// within 2 ms (waits doubling up to 64 ms made a job of 64 tasks under
// Hydra slower; BENCHMARKS.md, Direct launch).
func waitRanks(ranks []int, timeout time.Duration, up func(int) bool) []int {
	deadline := time.Now().Add(timeout)
	const first, most = 500 * time.Microsecond, 2 * time.Millisecond
	wait := first
	for len(ranks) > 0 && time.Now().Before(deadline) {
		if up(ranks[0]) {
			ranks, wait = ranks[1:], first
			continue
		}
		time.Sleep(min(wait, time.Until(deadline)))
		wait = min(2*wait, most)
	}
	var missing []int
	for _, r := range ranks {
		if !up(r) {
			missing = append(missing, r)
		}
	}
	return missing
}

// stopOnSignal ends the job when the launcher passes this rank a stop
// signal (srun's Ctrl-C Ctrl-C, scancel's SIGTERM, mpiexec's Ctrl-C), as
// the console ends a job it is signalled to stop: the rank aborts with
// 128+the signal's number, which the hub makes every rank's code. A rank
// killed by the signal instead would leave the code to the launcher,
// which Hydra gives as 0 for a task that finalized its PMI session at
// startup, one run in three. Before the rank is connected to rank 0's
// hub it just ends with that code: the others then end at their fence or
// at the hub.
func (w *Worker) stopOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	s := (<-sigs).(syscall.Signal)
	if !w.hubbed.Load() {
		exitProcess(128 + int(s))
	}
	w.Abort(128+int(s), fmt.Sprintf("rank %d was signalled to stop (%v)", w.wel.Rank, s), time.Duration(w.grace.Load()))
}

// killJob is rank 0's hub's last resort, for the ranks left (the Joins of
// those whose connections have not ended) GASNET_EXIT_TIMEOUT after the job's end
// (stopped, or stuck in an AtExit function) or not answering pings: under
// srun the PMI abort, which ends every task of the step; under Hydra,
// whose PMI session each rank ended at startup, SIGKILL to those on rank
// 0's host (their connections are open: the pids are theirs), on whose
// deaths Hydra ends every task left, and rank 0's own end (endJob).
func (w *Worker) killJob(code int, left []ctl.Join) {
	var procs []ctl.Join
	for _, j := range left {
		if j.Rank != 0 {
			procs = append(procs, j)
		}
	}
	w.endJob(code, "udpconduit: the job's end", procs)
}

// endJob ends what is left of a directly launched job, this rank last,
// with code: while this rank's session is open, through the PMI abort
// (srun) or this rank's exit (Hydra, whose PMI-2 has no abort and ends
// every task when one ends unfinalized); after it (Hydra), by SIGKILL to
// those of procs (their Name and PID) that run on this host: their
// connections to the hub are open, so the pids are still theirs. When
// some of procs run on another host, this rank then ends by SIGKILL
// too: Hydra ends every task when one dies of a signal, but not when one
// exits with a code after finalizing its PMI session, as every rank did
// at startup, and a task left on another host that neither answers nor
// ends (stopped) would hold the job for ever. The launcher's code is
// then the job's (Hydra's for a task killed).
func (w *Worker) endJob(code int, why string, procs []ctl.Join) {
	switch {
	case !w.finalized && w.hydra:
		// Hydra's PMI-2 has no abort; this rank ending with its session
		// open makes Hydra end every task, as an abort would.
	case !w.finalized:
		w.pmi.Abort(code, why)
	default:
		host, err := os.Hostname()
		elsewhere := false // or on a host this one cannot tell
		for _, p := range procs {
			switch {
			case err != nil || p.Name != host:
				elsewhere = true
			case p.PID > 0:
				syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
		if elsewhere {
			os.Stdout.Sync()
			os.Stderr.Sync()
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	}
	exitProcess(code)
}

// say prints a line of a directly launched job's own, as the console
// does, prefixed with the program's name.
func say(text string) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", filepath.Base(os.Args[0]), text)
}

// dialHub connects this rank to rank 0's hub at addr: a Hello that proves
// the job secret, then, sealed, its Join.
func (w *Worker) dialHub(addr string, timeout time.Duration, jn ctl.Join) error {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return fmt.Errorf("connecting to rank 0 at %s: %w", addr, err)
	}
	hello := ctl.NewHello(w.Secret)
	if err := ctl.WriteFrame(c, ctl.FrameHello, hello); err != nil {
		c.Close()
		return fmt.Errorf("greeting rank 0 at %s: %w", addr, err)
	}
	c = ctl.Seal(c, c, w.Secret, hello.Nonce, false)
	if err := ctl.WriteFrame(c, ctl.FrameJoin, jn); err != nil {
		c.Close()
		return fmt.Errorf("greeting rank 0 at %s: %w", addr, err)
	}
	w.conn, w.r = c, bufio.NewReader(c)
	return nil
}

// hubLost ends a directly launched rank whose connection to rank 0 ended
// without the job's Terminate: rank 0 ended by itself (a crash, a signal,
// a return from main). Unless this rank ends too within
// GASNET_EXIT_TIMEOUT (every rank returning from main), it aborts the job
// with 1 (each rank sees its own connection end, and the launcher's code
// is then rank 0's status or 1: an abort would make it SLURM's kill).
func (w *Worker) hubLost(err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// Rank 0 lives but does not answer: end the job, not just this
		// rank, or the launcher waits for rank 0 for ever.
		say(fmt.Sprintf("rank %d: no word from rank 0 for %v (GASNET_LIVENESS_TIMEOUT): its process is stopped or its host is unreachable; aborting the job", w.wel.Rank, time.Duration(w.liveness.Load())))
		w.endJob(1, "udpconduit: rank 0 does not answer", []ctl.Join{w.hub0})
	}
	time.Sleep(w.exitTimeout)
	how := "a crash, a signal or a return from main"
	if !errors.Is(err, io.EOF) {
		how = err.Error()
	}
	say(fmt.Sprintf("rank %d: rank 0 ended without calling conduit.Exit (%s), and this rank still ran GASNET_EXIT_TIMEOUT=%v later; ending with 1", w.wel.Rank, how, w.exitTimeout))
	exitProcess(1)
}
