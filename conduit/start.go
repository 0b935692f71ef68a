package conduit

// This file is a worker's start: its endpoint, its transport (UDP, shared
// memory) and the waits' modes, chosen from its host and the settings.

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/ifmatch"
	"github.com/udpconduit/udpconduit/retransmit"
	"github.com/udpconduit/udpconduit/spawn"
)

// start starts this process's part of the job. In a worker it returns the
// Job; otherwise the process must end, with code, after saying err (nil:
// nothing to say): the console's job ended, -h was asked for, or the
// process could not take its part.
func start() (*Job, int, error) {
	direct, isDirect, err := spawn.LauncherPMI(os.Getenv)
	if err != nil {
		return nil, 1, err
	}
	directOff := false // the launcher serves PMI, and GASNET_DIRECT_LAUNCH=0
	if isDirect {
		cfg, _, err := spawn.LoadConfig()
		if err != nil {
			return nil, 1, err
		}
		isDirect, directOff = cfg.DirectLaunch, !cfg.DirectLaunch // else the trap below
	}
	if !spawn.IsWorker() && !isDirect {
		code, err := startConsole(directOff)
		return nil, code, err
	}
	// A worker of the console, or one of the tasks that a launcher serving
	// PMI started directly: then it has no console, and the launcher gives
	// its rank and carries the ranks' addresses (DESIGN.md §9).
	connect := spawn.Connect
	if isDirect {
		connect = func() (*spawn.Worker, *spawn.Config, map[string]spawn.Source, error) { return spawn.DialPMI(direct) }
	}
	w, cfg, src, err := connect()
	if err != nil {
		return nil, 1, err
	}
	tp, err := openTransport(w, cfg, src)
	if err != nil {
		return nil, 1, err
	}
	udp, tr, shared, shmWhy, bind, nets := tp.udp, tp.tr, tp.shared, tp.shmWhy, tp.bind, tp.nets
	inbox := ""
	if shared != nil {
		inbox = shared.Inbox()
	}
	if err := w.Join(cfg, udp.LocalAddr(), inbox, nets); err != nil {
		return nil, spawn.ExitCode(err), err
	}
	// The console's settings are now in force: read them again if they
	// were not those this process started with.
	if w.EnvChanged {
		if cfg, src, err = spawn.LoadConfig(); err != nil {
			return nil, 1, err
		}
	}
	// say tells, in verbose mode, why rank 0 runs as it does ("": nothing
	// to tell).
	say := func(why string) {
		if cfg.VerboseEnv && w.Rank() == 0 && why != "" {
			fmt.Fprintf(os.Stderr, "%s: rank 0: %s\n", progName(), why)
		}
	}
	spin, polite, firstRTO, maxRTO := hostModes(w, cfg, src, say)
	hostRanks, hostCPUs := w.Host()
	w.SetGrace(cfg.ExitTimeout / 2)
	w.SetLiveness(cfg.Liveness)
	// The console's settings, read again after Join, and this host decide
	// (spawn.SharesMemory, the rule by which the console left this host's
	// inboxes out of the address table or kept them).
	if !spawn.SharesMemory(cfg.SupernodeMax, src["GASNET_SUPERNODE_MAXSIZE"].Var != "", hostRanks, hostCPUs) {
		if cfg.SupernodeMax != 1 {
			shmWhy = fmt.Sprintf("no shared memory between ranks: %d ranks share this host's %d CPUs, more than %d to a CPU, beyond what its default was measured at (set GASNET_SUPERNODE_MAXSIZE to use it)", hostRanks, hostCPUs, spawn.ShmRanksPerCPU)
		}
		if shared != nil {
			tr, shared = shared.Unwrap(), nil
		}
	}
	say(shmWhy)
	addrs, err := w.Addrs()
	if err != nil {
		return nil, 1, err
	}
	ep, err := newEndpoint(w, cfg, tr, spin, polite, firstRTO, maxRTO)
	if err != nil {
		return nil, 1, err
	}
	if err := ep.SetPeers(addrs); err != nil {
		return nil, 1, err
	}
	j := newJob(ep, w, w.Rank(), w.Size(), cfg.ExitTimeout)
	j.hangWarn = cfg.HangWarn
	algo, barrierWhy := chooseBarrier(cfg.Barrier, w.Crowded())
	j.setPlan(algo, nil)
	w.OnEvent(ep.Wake)
	j.reportAtExit(w, cfg, shared, bind, nets)
	if err := j.takeTable(w, cfg); err != nil {
		return nil, 1, err
	}
	j.setHosts(w.Hosts())
	if barrierWhy, err = j.shareGroup(w, cfg, shared, polite, say, algo, barrierWhy); err != nil {
		return nil, 1, err
	}
	say(barrierWhy)
	if cfg.RcvThread {
		go progress(ep)
	}
	return j, 0, nil
}

// progressMode chooses how blocking waits poll: they spin for spin
// (GASNET_POLL_SPIN) before they sleep, unless this host is oversubscribed
// (spawn.Oversubscribed: its ranks outnumber the cpus they may run on
// together) and the user did not set the spin, in
// which case they sleep at once (polite): a spinning rank would take the
// CPU that the rank it waits for needs. why says which, for verbose mode.
func progressMode(spin time.Duration, set bool, ranks, cpus int) (time.Duration, bool, string) {
	switch {
	case set:
		return spin, spin == 0, fmt.Sprintf("blocking waits spin %v before they sleep (GASNET_POLL_SPIN as set)", spin)
	case spawn.Oversubscribed(ranks, cpus):
		return 0, true, fmt.Sprintf("polite progress: %d ranks share this host's %d CPUs, so blocking waits sleep at once (set GASNET_POLL_SPIN to spin)", ranks, cpus)
	}
	return spin, spin == 0, fmt.Sprintf("blocking waits spin %v before they sleep (%d ranks on this host's %d CPUs)", spin, ranks, cpus)
}

// procsMode chooses how many threads run this rank's Go code at once
// (GOMAXPROCS): one when this host is oversubscribed (spawn.Oversubscribed)
// and the user did not set GOMAXPROCS, else the runtime's default (0:
// leave it), which follows the rank's own affinity mask: a rank that a
// launcher binds to one core runs one P there without being crowded. Where ranks already outnumber cores, a second thread buys a
// rank no parallelism, while the runtime, with a second P idle, leaves a
// rank blocked in the kernel holding its P for up to 10 ms, its monitor
// thread (sysmon) waking every 20 µs or more meanwhile; with one P it hands
// the P off within two of its ticks and sleeps (DESIGN.md §7). why says
// which, for verbose mode.
func procsMode(set bool, ranks, cpus int) (int, string) {
	if set || !spawn.Oversubscribed(ranks, cpus) {
		return 0, ""
	}
	return 1, fmt.Sprintf("GOMAXPROCS=1: %d ranks share this host's %d CPUs (set GOMAXPROCS to choose)", ranks, cpus)
}

// crowdedWaitPerRank is how long a request's first retransmission waits
// per rank that shares a CPU with others, on a crowded host.
const crowdedWaitPerRank = 2 * time.Millisecond

// firstWait chooses the first retransmission wait, before a peer's round
// trip is known (GASNET_REQUESTTIMEOUT_INITIAL, initial, at most max unless
// max is 0). Where a host is oversubscribed, a peer answers only
// once the scheduler runs it, which takes longer the more ranks wait for
// each CPU, and a retransmission meanwhile only wakes both ranks for a
// duplicate: unless the user set it, the wait is then at least
// crowdedWaitPerRank per rank per CPU (1 s for 1024 ranks on 2 CPUs,
// where a flat 100 ms retransmits much of hello's traffic). why says
// so, for verbose mode ("" when initial stands).
func firstWait(initial, max time.Duration, set bool, ranks, cpus int) (time.Duration, string) {
	if set || !spawn.Oversubscribed(ranks, cpus) {
		return initial, ""
	}
	want := time.Duration(int64(ranks) * int64(crowdedWaitPerRank) / int64(cpus))
	if max > 0 {
		want = min(want, max)
	}
	if want <= initial {
		return initial, ""
	}
	return want, fmt.Sprintf("first retransmission after %v: %d ranks share this host's %d CPUs and wait their turn for one (set GASNET_REQUESTTIMEOUT_INITIAL to choose)", want, ranks, cpus)
}

// progress services the network in the background for GASNET_RCV_THREAD
// until the endpoint closes (amudp's Endpoint.Progress: it polls while no
// goroutine of the program waits, and leaves the polling to one that
// does).
func progress(ep *amudp.Endpoint) { ep.Progress() }

// startConsole runs the console of a job (./prog N args), or says why it
// cannot, and returns the process's code. directOff says that the
// launcher serves PMI and GASNET_DIRECT_LAUNCH=0 refused direct launch.
func startConsole(directOff bool) (int, error) {
	cfg, src, err := spawn.LoadConfig()
	if err != nil {
		return 1, err
	}
	// srun -n 4 ./prog 4 would start four consoles of four workers
	// each: stop every task, with one line from the first.
	if msg, speak, ok := spawn.DirectLaunch(os.Getenv, os.Args[0], directOff); ok {
		if speak {
			return 1, errors.New(msg)
		}
		return 1, nil
	}
	if len(os.Args) > 1 && spawn.IsHelp(os.Args[1]) {
		fmt.Print(spawn.Help(os.Args[0], Usage))
		return 0, nil
	}
	n, err := spawn.ParseN(os.Args, Usage)
	if err != nil {
		return 1, err
	}
	prog, err := os.Executable()
	if err != nil {
		return 1, fmt.Errorf("cannot find this program's path: %w", err)
	}
	return spawn.Console(cfg, src, n, prog, os.Args[2:]), nil
}

// transport is a worker's way to its peers (openTransport).
type transport struct {
	udp    *amudp.UDP
	tr     amudp.Transport // udp, or shared over it
	shared *amudp.Shared   // nil: no shared memory
	shmWhy string          // why not, for verbose mode
	bind   netip.Addr      // the address the socket is bound to
	nets   []spawn.Net     // the addresses it publishes
}

// openTransport opens a worker's UDP socket and, where its ranks may
// share memory, its inbox.
func openTransport(w *spawn.Worker, cfg *spawn.Config, src map[string]spawn.Source) (*transport, error) {
	// A worker on a host of several networks binds them all and
	// publishes their addresses (DESIGN.md §7.2); the L spawner's share
	// the console's host and need only the one.
	bind, nets := w.LocalIP, []spawn.Net(nil)
	if !w.SpawnedLocal {
		ifaces, err := ifmatch.Interfaces()
		if err != nil {
			return nil, err
		}
		bind, nets = workerNets(w.LocalIP, ifaces, spawn.OnSubnets(cfg.WorkerIP))
	}
	udp, err := amudp.ListenUDP(netip.AddrPortFrom(bind, 0), cfg.SockBufInit)
	if err != nil {
		return nil, err
	}
	if bind != w.LocalIP {
		// Known to its peers by the address that reaches the console.
		udp.SetLocalAddr(netip.AddrPortFrom(w.LocalIP, udp.LocalAddr().Port()))
	}
	// Ranks of one host exchange datagrams through shared memory
	// (amudp.Shared) unless GASNET_SUPERNODE_MAXSIZE=1; a host without
	// memfd uses UDP alone. A worker that the L spawner started on a host
	// of more than 512 ranks per CPU makes no inbox: spawn.SharesMemory
	// would have it release the inbox after Join (DESIGN.md §6a).
	var tr amudp.Transport = udp
	var shared *amudp.Shared
	var shmWhy string
	shmSet := src["GASNET_SUPERNODE_MAXSIZE"].Var != ""
	if cfg.SupernodeMax != 1 && (shmSet || !w.SpawnedCrowded) {
		if shared, err = amudp.NewShared(udp, amudp.InboxSize(cfg.PSHMDepth)); err != nil {
			shmWhy = fmt.Sprintf("no shared memory between ranks (%v)", err)
		} else {
			tr = shared
		}
	}
	return &transport{udp: udp, tr: tr, shared: shared, shmWhy: shmWhy, bind: bind, nets: nets}, nil
}

// shareGroup sets what this rank shares with the ranks of its
// shared-memory group (shmGroup of the table's leaders): the inboxes it
// sends to, the segments it maps, the barrier's words and, in a job that
// is one group, every area mapped before Init returns (shareAreas). It
// returns why the barrier runs as it does, for verbose mode: barrierWhy,
// or the reason for the words.
func (j *Job) shareGroup(w *spawn.Worker, cfg *spawn.Config, shared *amudp.Shared, polite bool, say func(string), algo barrierAlgo, barrierWhy string) (string, error) {
	ep := j.ep
	leaders := shmLeaders(w.Hosts(), w.Inboxes(), cfg.SupernodeMax)
	group := shmGroup(leaders, w.Rank())
	// The barrier: in two levels where ranks share memory (the same
	// choice on every rank, made from the same table), before this rank
	// enters one. An algorithm set (GASNET_BARRIER) keeps the shared
	// words where every rank shares memory with every other, in its
	// shape there (words.setWay); across groups it runs over messages
	// among all the ranks, in one level.
	pshm := cfg.PSHMBarrierHier && (cfg.Barrier == "" || len(group) == w.Size())
	if pshm {
		// Collectives over messages run over trees in two levels where
		// hosts hold several ranks and the job several hosts.
		j.setPlan(algo, leaders)
		if hierarchical(leaders) {
			barrierWhy = "barrier in two levels, gathered and released: the ranks of each shared-memory group at its leader, the leaders over a binomial tree among themselves, as every collective's tree (GASNET_PSHM_BARRIER_HIER=0 or GASNET_BARRIER to choose)"
		}
	}
	var gw *words
	if shared != nil {
		all, err := w.Addrs()
		if err != nil {
			return "", err
		}
		inboxes := make([]amudp.Inbox, len(group))
		for i, r := range group {
			inboxes[i] = amudp.Inbox{Addr: all[r], Path: w.Inboxes()[r]}
		}
		shared.SetInboxes(inboxes)
		shared.SetAllShared(len(group) == w.Size())
		j.nb.group = group
		ep.SetPeerSegments(j.peerView)
		if len(group) > 1 {
			gw = newWords(shared, all, group, w.Rank())
			gw.yield = polite
		}
		say(fmt.Sprintf("shared memory among the ranks of a host, in groups of %s (GASNET_SUPERNODE_MAXSIZE): rank 0 shares it with %d of its host's %d ranks; an inbox of %d KiB per rank",
			groupSize(cfg.SupernodeMax), len(group)-1, len(j.hostRank), amudp.InboxSize(cfg.PSHMDepth)>>10))
	}
	if pshm && gw != nil {
		gw.fatal = j.fatal
		if gw.whole {
			gw.setWay(algo)
			j.words = gw
			if err := j.shareAreas(gw); err != nil {
				return "", fmt.Errorf("rank %d: %w", w.Rank(), err)
			}
			how := "gathered and released"
			switch {
			case gw.counted:
				how = "counted (the last rank to arrive releases the others)"
			case gw.dissem:
				how = "by dissemination"
			}
			prefix, choose := "barrier", " (GASNET_PSHM_BARRIER_HIER=0 or GASNET_BARRIER to choose)"
			if cfg.Barrier != "" {
				prefix, choose = "barrier "+cfg.Barrier+" (GASNET_BARRIER as set),", " (GASNET_PSHM_BARRIER_HIER=0: over messages)"
			}
			barrierWhy = prefix + " on shared words, " + how + ", as every collective of World, each one exchange of posts there: every rank shares memory with every other"
			if gw.dissem && cfg.Barrier == "" {
				barrierWhy += ", and they fit their host's CPUs"
			}
			if polite {
				barrierWhy += fmt.Sprintf("; a waiting rank yields its CPU to the host's other ranks for up to %v before it sleeps", yieldFor)
			}
			barrierWhy += choose
		}
	}
	return barrierWhy, nil
}

// reportAtExit has the rank print, as it ends, what the settings ask for:
// its statistics (GASNET_STATS) and its routes (GASNET_VERBOSE_ROUTE);
// it prints the addresses it bound and publishes now.
func (j *Job) reportAtExit(w *spawn.Worker, cfg *spawn.Config, shared *amudp.Shared, bind netip.Addr, nets []spawn.Net) {
	ep := j.ep
	var atExit []func()
	j.nb.counted = cfg.Stats
	if cfg.Stats {
		atExit = append(atExit, func() {
			line := ep.Stats().String()
			if shared != nil {
				line += fmt.Sprintf("; %v shm-put %d shm-get %d shm-atomic %d", shared.Stats(), j.nb.puts.Load(), j.nb.gets.Load(), j.nb.atomics.Load())
			}
			fmt.Fprintf(os.Stderr, "%s: rank %d stats: %s\n", progName(), w.Rank(), line)
		})
	}
	if cfg.VerboseRoute || cfg.VerboseEnv && len(nets) > 0 {
		fmt.Fprintf(os.Stderr, "%s: %s\n", progName(), describeNets(w.Rank(), bind, nets))
	}
	if cfg.VerboseRoute {
		atExit = append(atExit, func() {
			if r := j.router.Load(); r != nil {
				fmt.Fprintf(os.Stderr, "%s: %s\n", progName(), r.report(ep))
			}
		})
	}
	if len(atExit) > 0 {
		w.AtExit(func() {
			for _, f := range atExit {
				f()
			}
		})
	}
}

// newEndpoint makes the rank's endpoint over tr, configured by the
// settings and the waits chosen for its host.
func newEndpoint(w *spawn.Worker, cfg *spawn.Config, tr amudp.Transport, spin time.Duration, polite bool, firstRTO, maxRTO time.Duration) (*amudp.Endpoint, error) {
	return amudp.NewEndpoint(tr, amudp.Config{
		Rank: w.Rank(), Secret: w.Secret, NetworkDepth: cfg.NetworkDepth, SendDepth: cfg.SendDepth,
		RecvDepth: cfg.RecvDepth, SocketBufferMax: cfg.SockBufMax, Spin: spin, Polite: polite,
		HeaderOnlyAuth: !cfg.AuthPayload, Encrypt: cfg.Encrypt,
		Reserved:    FirstClientHandler,
		ReservedErr: ErrHandlerIndex,
		Retransmit: retransmit.Config{
			Initial: firstRTO,
			Backoff: cfg.ReqTimeoutBackoff,
			Max:     maxRTO,
			MinRTO:  time.Millisecond,
			// A crowded host's first wait may exceed the probe interval
			// (see firstWait): waits do not go below it.
			Probe: max(retransmit.DefaultProbe, firstRTO),
		},
	})
}

// takeTable has this rank take the address table: from rank 0's hub
// under direct launch, else through the relay tree (relayTable).
func (j *Job) takeTable(w *spawn.Worker, cfg *spawn.Config) error {
	ep := j.ep
	// Once the address table is here, and before this rank checks its
	// relay neighbours' addresses against it, a router takes datagrams
	// from every address a peer published and chooses where to send
	// (DESIGN.md §7.2); with nothing published, the table's addresses
	// alone serve.
	j.onTable = func() error {
		all := w.Nets()
		if all == nil {
			return nil
		}
		addrs, err := w.Addrs()
		if err != nil {
			return err
		}
		r := newRouter(w.Rank(), addrs, all, cfg.VerboseRoute)
		j.router.Store(r)
		ep.SetRouter(r)
		return nil
	}
	if w.Direct() {
		// Every rank has the whole table from rank 0's hub.
		if err := j.tableHere(); err != nil {
			return fmt.Errorf("rank %d: %w", w.Rank(), err)
		}
	} else if err := j.relayTable(w); err != nil {
		return fmt.Errorf("rank %d: %w", w.Rank(), err)
	}
	return nil
}

// hostModes chooses, for this rank's host, how waits spin or sleep, the
// Go runtime's Ps and the first retransmission timeout, saying why in
// verbose mode (say).
func hostModes(w *spawn.Worker, cfg *spawn.Config, src map[string]spawn.Source, say func(string)) (spin time.Duration, polite bool, firstRTO, maxRTO time.Duration) {
	hostRanks, hostCPUs := w.Host()
	spin, polite, why := progressMode(cfg.PollSpin, src["GASNET_POLL_SPIN"].Var != "", hostRanks, hostCPUs)
	say(why)
	// The runtime ignores an empty GOMAXPROCS; so does this.
	procs, why := procsMode(os.Getenv("GOMAXPROCS") != "", hostRanks, hostCPUs)
	switch {
	case procs > 0 && runtime.GOMAXPROCS(0) != procs:
		runtime.GOMAXPROCS(procs)
	case procs == 0 && w.ProcsSet:
		runtime.SetDefaultGOMAXPROCS() // the spawner's guess was wrong
	}
	say(why)
	maxRTO = time.Duration(cfg.ReqTimeoutMax) * time.Microsecond
	firstRTO, why = firstWait(time.Duration(cfg.ReqTimeoutInitial)*time.Microsecond, maxRTO,
		src["GASNET_REQUESTTIMEOUT_INITIAL"].Var != "", hostRanks, hostCPUs)
	say(why)
	return spin, polite, firstRTO, maxRTO
}
