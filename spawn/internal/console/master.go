package console

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/launch"
	"github.com/udpconduit/udpconduit/spawn/internal/verdict"
)

// reportEvery is how often the console reports missing workers at startup.
const reportEvery = 5 * time.Second

// checkJob checks, before anything is spawned, what the console can know
// of a job of n workers under spawner name: settings that only make sense
// for some spawners, and this host's limits.
func checkJob(cfg *envconf.Config, src map[string]envconf.Source, name string, n int, routed bool, lim hostLimits) error {
	if cfg.WorkerRank != "" {
		v := envconf.DisplayName(src, "GASNET_WORKER_RANK")
		if name == "L" {
			return fmt.Errorf("%s=%s: the L spawner numbers its workers itself; accepted under L: unset (it is for workers a launcher starts: GASNET_SPAWNFN=C)", v, cfg.WorkerRank)
		}
		if k, err := envconf.ParseInt(cfg.WorkerRank, false); err == nil && (k >= int64(n) || n > 1) {
			return fmt.Errorf("%s=%s: every worker would ask for rank %d; accepted with N=%d: the name of a variable that holds each worker's rank, such as SLURM_PROCID", v, cfg.WorkerRank, k, n)
		}
	}
	if cfg.WorkerIP != "" && name == "L" {
		if _, err := envconf.AddrOnSubnet(cfg.WorkerIP); err != nil {
			return err
		}
	}
	return capacityError(n, lim, name == "L", routed)
}

type event struct {
	rank int
	typ  byte
	body []byte
	err  error
}

type peerConn struct {
	conn  net.Conn
	out   *ctl.Sender // the console's frames to it, once serving
	join  ctl.Join
	udp   netip.AddrPort // join.UDP
	rank  int
	heard time.Time // the last frame from it (see checkLive)
}

// who names a rank for messages.
func (p *peerConn) who() string {
	return fmt.Sprintf("rank %d (pid %d on %s)", p.rank, p.join.PID, p.join.Name)
}

// Run runs a job as its console: it spawns n workers running this
// program with args, serves them, and returns the job's exit code. Messages
// go to stderr prefixed with the program name.
func Run(cfg *envconf.Config, src map[string]envconf.Source, n int, program string, args []string) (code int) {
	prefix := filepath.Base(program) + ": "
	say := func(format string, a ...any) { fmt.Fprintf(os.Stderr, prefix+format+"\n", a...) }
	name, why := launch.Choose(cfg, os.Getenv)
	verbose := describe(cfg, src, name, why, say)
	sp, err := launch.For(name, cfg, src, n, verbose)
	if err != nil {
		say("%v", err)
		return 1
	}
	routed := cfg.RouteOutput && (name != "C" || cfg.CSpawnRoute)
	if err := checkJob(cfg, src, name, n, routed, readLimits()); err != nil {
		say("%v", err)
		return 1
	}
	warnSettings(cfg, src, routed, say)
	ln, err := listen(cfg, sp, name, verbose != nil, say)
	if err != nil {
		say("%v", err)
		return 1
	}
	defer ln.Close()
	var sb [16]byte
	rand.Read(sb[:])
	secret := hex.EncodeToString(sb[:])

	fwd, err := launch.ForwardEnv(cfg.ForwardEnv, envconf.DisplayName(src, "GASNET_FORWARD_ENV"), os.LookupEnv)
	if err != nil {
		say("%v", err)
		return 1
	}
	spec := &launch.Spec{Count: n, Program: program, Args: args,
		Env: append([]string{ctl.EnvMaster + "=" + ln.Addr().String(), ctl.EnvSecret + "=" + secret}, fwd...)}
	spec.Dir, _ = os.Getwd()
	spec.Bind = cfg.CPUBind
	outs := newOutputs(&console{out: [3]io.Writer{nil, os.Stdout, os.Stderr}}, cfg.LineBufSize)
	outs.label, outs.dir = cfg.OutputLabel, cfg.OutputDir
	if outs.dir != "" {
		if err := os.MkdirAll(outs.dir, 0o755); err != nil {
			say("GASNET_OUTPUT_DIR=%s: %v", outs.dir, err)
			return 1
		}
	}
	switch {
	case routed && name == "L":
		spec.Output = outs.pipe // pipes from the start, cheaper than TCP
	case routed:
		spec.Env = append(spec.Env, ctl.EnvRoute+"=1")
	}
	// Workers of this host get their control connection as a socket they
	// inherit (no TCP connection, handshake or accept); those of other
	// hosts connect to ln.
	joins := make(chan *peerConn)
	if name == "L" {
		if spec.Control, err = localControl(cfg, src, fwd, joins); err != nil {
			say("%v", err)
			return 1
		}
	}
	// Routed output still in flight when the job ends is delivered, at
	// the pace of whoever reads the console's output. A reader that went
	// away (a closed pipe) makes writes fail with EPIPE, which the console
	// counts and reports, instead of killing it with SIGPIPE.
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	defer signal.Stop(pipes)
	defer func() { code = outs.finish(code, cfg.ExitTimeout, say) }()

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, stopSignals...)
	signal.Notify(sigs, forwardSignals...)
	defer signal.Stop(sigs)

	started, err := startSaying(sp, spec, say)
	if err != nil {
		say("%v", err)
		return 1
	}
	go accept(ln, acceptConfig{secret: secret, auth: min(authTimeout, cfg.ConnectTimeout), join: cfg.ConnectTimeout, say: say}, joins, outs)

	j := &job{cfg: cfg, src: src, n: n, say: say, launch: started, sigs: sigs, listed: name == "S", levels: 1, outs: outs}
	if r, ok := sp.(launch.Remote); ok {
		j.levels = r.TreeLevels(n)
	}
	return j.run(joins)
}

type job struct {
	listed  bool // ranks follow the spawn index (the S spawner's list)
	levels  int  // of the spawn tree: 1 without one
	cfg     *envconf.Config
	src     map[string]envconf.Source
	n       int
	say     func(string, ...any)
	launch  launch.Launch
	sigs    chan os.Signal
	peers   []*peerConn // by rank
	byIndex map[int]*peerConn
	outs    *outputs // routed output: told the ranks once assigned
	// v decides the job's end (package verdict); serve carries out what
	// it asks for. returnTimer and killTimer are its timers.
	v           *verdict.Machine
	returnTimer <-chan time.Time
	killTimer   <-chan time.Time
	coll        collectives
	lastLive    time.Time // the last liveness check
}

// checkLive aborts the job when a rank that still runs has not been heard
// from for GASNET_LIVENESS_TIMEOUT (its process stopped, its host hung or
// cut off), and pings the others. A console that was itself stopped or
// starved (the ticks came late) first forgives the time it was away.
func (j *job) checkLive(now time.Time) {
	if now.Sub(j.lastLive) > j.cfg.Liveness/2 {
		for _, p := range j.peers {
			p.heard = now
		}
	}
	j.lastLive = now
	if j.v.Ended() {
		return
	}
	ping := ctl.EncodeFrame(ctl.FramePing, ctl.NoBody{})
	for _, p := range j.peers {
		if !j.v.Heard(p.rank) {
			continue
		}
		if d := now.Sub(p.heard); d >= j.cfg.Liveness {
			j.step(verdict.Abort{Code: 1, Kill: true, Why: fmt.Sprintf("%s has not answered the console for %v (GASNET_LIVENESS_TIMEOUT=%v): its process is stopped or its host is unreachable; aborting the job",
				p.who(), d.Round(time.Millisecond), j.cfg.Liveness)})
			return
		}
		p.out.SendFrame(ping)
	}
}

func (j *job) run(joins <-chan *peerConn) int {
	var joined []*peerConn
	// Each level of a spawn tree may take the connect timeout to start the
	// next.
	wait := j.cfg.ConnectTimeout * time.Duration(j.levels)
	deadline := time.After(wait)
	tick := time.NewTicker(reportEvery)
	defer tick.Stop()
	exits := j.launch.Exits()
	for len(joined) < j.n {
		select {
		case p := <-joins:
			joined = append(joined, p)
		case <-tick.C:
			j.say("%d of %d workers joined; missing: %s", len(joined), j.n, missing(joined, j.n))
		case <-deadline:
			j.say("only %d of %d workers joined within GASNET_CONNECT_TIMEOUT=%v%s; missing: %s", len(joined), j.n, j.cfg.ConnectTimeout, levelsNote(j.levels), missing(joined, j.n))
			return j.abort(1, joined)
		case e, ok := <-exits:
			if !ok {
				j.say("every worker ended before the job started")
				return 1
			}
			if e.Index < 0 {
				j.say("the launcher ended with %s before all workers joined (%d of %d); missing: %s", e.Status, len(joined), j.n, missing(joined, j.n))
				return j.abort(max(e.Code, 1), joined)
			}
			hint := ""
			if e.Clean {
				hint = " (is it a program built on udpconduit that calls conduit.Init?)"
			}
			j.say("%s ended before joining: %s%s", e.Who(), e.Status, hint)
			return j.abort(max(e.Code, 1), joined)
		case s := <-j.sigs:
			if !j.forward(s) {
				return j.abort(signalCode(s), joined)
			}
		}
	}
	js := make([]ctl.Join, len(joined))
	for i, p := range joined {
		js[i] = p.join
	}
	ranks, err := assignRanks(js, j.n, j.listed)
	if err != nil {
		j.say("%v", err)
		return j.abort(1, joined)
	}
	j.peers = make([]*peerConn, j.n)
	byIndex, seen := map[int]int{}, map[int]int{}
	for i, p := range joined {
		key := outputKey(p.join.Index, p.join.PID)
		seen[key]++
		byIndex[key] = ranks[i]
	}
	for key, n := range seen {
		if n > 1 || key == -1 { // one PID on two hosts, or none: no rank
			delete(byIndex, key)
		}
	}
	if j.outs != nil {
		j.outs.setRanks(byIndex)
	}
	j.byIndex = map[int]*peerConn{}
	tab := ctl.Table{Addrs: make([]netip.AddrPort, j.n), Hosts: make([]string, j.n), Inboxes: make([]string, j.n), Nets: make([][]ctl.Net, j.n)}
	cpus, masks := make([]int, j.n), make([]string, j.n)
	for i, p := range joined {
		p.rank = ranks[i]
		j.peers[p.rank] = p
		if p.join.Index >= 0 {
			j.byIndex[p.join.Index] = p
		}
		tab.Addrs[p.rank], tab.Hosts[p.rank], tab.Inboxes[p.rank] = p.udp, p.join.Host, p.join.Inbox
		tab.Nets[p.rank] = p.join.Nets
		cpus[p.rank], masks[p.rank] = p.join.CPUs, p.join.Mask
	}
	shmSet := j.src["GASNET_SUPERNODE_MAXSIZE"].Var != ""
	ws := welcomes(tab, cpus, masks, consoleEnv(), func(ranks, cpus int) bool {
		return ctl.SharesMemory(j.cfg.SupernodeMax, shmSet, ranks, cpus)
	})
	// Every frame is encoded before the first goes out: a welcomed worker
	// starts working at once, and on an oversubscribed host it takes CPU
	// from the console, which should only have writes left to do.
	frames := make([][]byte, j.n)
	for r := range frames {
		frames[r] = ctl.EncodeFrame(ctl.FrameWelcome, ws[r])
	}
	vc := verdict.Config{Who: make([]string, j.n), Host: make([]string, j.n), PerWorker: j.launch.PerWorker()}
	for _, p := range j.peers {
		vc.Who[p.rank], vc.Host[p.rank] = p.who(), p.join.Name
	}
	j.v = verdict.New(vc)
	events := make(chan event, 4*j.n)
	for _, p := range j.peers {
		if _, err := p.conn.Write(frames[p.rank]); err != nil {
			j.say("rank %d on %s: sending its welcome: %v", p.rank, p.join.Name, err)
			return j.abort(1, joined)
		}
	}
	for _, p := range j.peers {
		p.out = ctl.NewSender(p.conn)
		go readEvents(p, events)
	}
	return j.serve(events, exits)
}

func missing(joined []*peerConn, n int) string {
	have := map[int]bool{}
	for _, p := range joined {
		have[p.join.Index] = true
	}
	var m []string
	for i := 0; i < n && len(m) < 16; i++ {
		if !have[i] {
			m = append(m, "worker "+strconv.Itoa(i))
		}
	}
	if len(joined) > 0 && joined[0].join.Index < 0 {
		return fmt.Sprintf("%d workers (their launcher does not name them)", n-len(joined))
	}
	return strings.Join(m, ", ")
}

// consoleEnv is the console's GASNET_*/AMUDP_* settings, passed to workers.
func consoleEnv() map[string]string {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if (strings.HasPrefix(k, "GASNET_") || strings.HasPrefix(k, "AMUDP_")) && !strings.HasPrefix(k, "GASNET_SPAWN_") {
			env[k] = v
		}
	}
	return env
}

// frameReadBuf is the read buffer of a connection to a worker: control
// frames are small (and a long read bypasses the buffer), and a console of
// 16384 workers holds two buffers each (the second reads the first).
const frameReadBuf = 256

func readEvents(p *peerConn, out chan<- event) {
	r := bufio.NewReaderSize(p.conn, frameReadBuf)
	for {
		typ, body, err := ctl.ReadFrame(r)
		out <- event{rank: p.rank, typ: typ, body: body, err: err}
		if err != nil {
			return
		}
	}
}

// Signals at the console, as mpirun treats them: the stop signals end the
// job (every worker gets SIGTERM, then SIGKILL after GASNET_EXIT_TIMEOUT;
// the console exits with 128+signal; a second one kills at once); SIGQUIT
// among them, without a goroutine dump. The forwarded ones go to every
// worker and the job goes on.
var (
	stopSignals    = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}
	forwardSignals = []os.Signal{syscall.SIGUSR1, syscall.SIGUSR2}
)

// forward delivers a forwarded signal to every worker, and reports whether
// s was one.
func (j *job) forward(s os.Signal) bool {
	for _, f := range forwardSignals {
		if s != f {
			continue
		}
		if r, ok := j.launch.(launch.SignalRelay); ok && r.SignalsThroughConsole() {
			// Remote workers raise it themselves, when they have joined.
			j.broadcast(ctl.FrameSignal, ctl.Code{Code: int(s.(syscall.Signal))})
		} else {
			j.launch.Signal(s.(syscall.Signal))
		}
		return true
	}
	return false
}

func levelsNote(levels int) string {
	if levels == 1 {
		return ""
	}
	return fmt.Sprintf(" for each of the spawn tree's %d levels", levels)
}

func signalCode(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok {
		return 128 + int(sig)
	}
	return 1
}

// serve runs the job's services until every process has ended, and returns
// the job's exit code, as j.v decides it (package verdict): the code of the
// first Exit, unless that is 0 and a rank ended otherwise than the job
// told it to, whose status then wins. A crash is never reported as
// success.
func (j *job) serve(events <-chan event, exits <-chan launch.ProcExit) int {
	j.coll = collectives{waiting: make([]ctl.Coll, j.n)}
	var hangC <-chan time.Time
	if j.cfg.HangWarn > 0 {
		hang := time.NewTicker(max(min(j.cfg.HangWarn/4, time.Second), 10*time.Millisecond))
		defer hang.Stop()
		hangC = hang.C
	}
	var liveC <-chan time.Time
	if j.cfg.Liveness > 0 {
		live := time.NewTicker(j.cfg.Liveness / 4)
		defer live.Stop()
		liveC = live.C
		now := time.Now()
		for _, p := range j.peers {
			p.heard = now
		}
		j.lastLive = now
	}
	for exits != nil {
		select {
		case now := <-hangC:
			j.checkHang(now)
		case now := <-liveC:
			j.checkLive(now)
		case ev := <-events:
			p := j.peers[ev.rank]
			p.heard = time.Now()
			if ev.err != nil {
				j.step(verdict.Closed{Rank: ev.rank})
				continue
			}
			switch ev.typ {
			case ctl.FrameColl:
				var c ctl.Coll
				if ctl.DecodeBody(ev.body, &c) == nil && ctl.ValidColl(c) {
					j.coll.note(ev.rank, c)
				}
			case ctl.FrameExit:
				c := ctl.DecodeExit(ev.body)
				j.step(verdict.Exit{Rank: ev.rank, Code: c.Code, Why: c.Why})
			case ctl.FrameFinalize:
				j.step(verdict.Finalize{Rank: ev.rank, Code: ctl.DecodeExit(ev.body).Code})
			}
		case e, ok := <-exits:
			if !ok {
				exits = nil
				continue
			}
			if p := j.byIndex[e.Index]; p != nil {
				j.step(verdict.Ended{Rank: p.rank, Code: e.Code, Status: e.Status})
				continue
			}
			// The launcher, or a worker the console never met.
			j.step(verdict.Stray{Launcher: e.Index < 0, Who: e.Who(), Code: e.Code, Status: e.Status, Clean: e.Clean})
		case s := <-j.sigs:
			if !j.forward(s) {
				j.step(verdict.Signal{Code: signalCode(s), Name: s.String()})
			}
		case <-j.returnTimer:
			j.returnTimer = nil
			j.step(verdict.ReturnTimeout{})
		case <-j.killTimer:
			j.killTimer = nil
			j.step(verdict.KillTimeout{})
		}
	}
	// A process's end may come before the last frames of its connection.
	for deadline := time.After(j.cfg.ExitTimeout); j.v.Unjudged() > 0; {
		select {
		case ev := <-events:
			if ev.err != nil {
				j.step(verdict.Closed{Rank: ev.rank})
			} else if ev.typ == ctl.FrameExit {
				c := ctl.DecodeExit(ev.body)
				j.step(verdict.Exit{Rank: ev.rank, Code: c.Code, Why: c.Why})
			}
		case <-deadline:
			j.step(verdict.Drained{})
		}
	}
	for _, p := range j.peers {
		p.out.Stop()
		p.conn.Close()
	}
	return j.v.Code()
}

// step passes ev to the job's verdict and carries out the actions it
// returns.
func (j *job) step(ev any) {
	for _, a := range j.v.Step(ev) {
		j.act(a)
	}
}

// act carries out one of the verdict's actions.
func (j *job) act(a any) {
	switch a := a.(type) {
	case verdict.Say:
		j.say("%s", a.Text)
	case verdict.End:
		j.broadcast(ctl.FrameTerminate, ctl.Code{Code: a.Code, Why: a.By})
		j.killTimer = time.After(j.cfg.ExitTimeout)
	case verdict.Answer:
		j.peers[a.Rank].out.Send(ctl.FrameTerminate, ctl.Code{Code: a.Code})
	case verdict.Kill:
		if a.Now {
			j.launch.Kill(0) // a second signal: no more grace
		} else {
			j.launch.Kill(j.cfg.ExitTimeout)
		}
	case verdict.WaitReturns:
		j.returnTimer = time.After(j.cfg.ExitTimeout)
	}
}

func (j *job) broadcast(typ byte, v ctl.Body) {
	f := ctl.EncodeFrame(typ, v)
	for _, p := range j.peers {
		if p != nil && p.out != nil {
			p.out.SendFrame(f)
		}
	}
}

// abort ends a job that never started serving.
func (j *job) abort(code int, joined []*peerConn) int {
	for _, p := range joined {
		ctl.WriteFrame(p.conn, ctl.FrameTerminate, ctl.Code{Code: code})
		p.conn.Close()
	}
	j.launch.Kill(j.cfg.ExitTimeout)
	for range j.launch.Exits() {
	}
	return code
}
