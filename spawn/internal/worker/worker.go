package worker

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/launch"
	"github.com/udpconduit/udpconduit/spawn/internal/pmi"
)

// IsWorker reports whether this process was started as a worker of a job
// (the worker marker is in its environment).
func IsWorker() bool { return os.Getenv(ctl.EnvMaster) != "" }

// Worker is a worker's connection to its console: bootstrap (join and
// welcome; the rest of the address table comes down the relay tree, see
// conduit's relayTable), output, hang reports, liveness and the end of the
// job (DESIGN.md §7); the program's collectives run among the workers
// (package conduit). Under direct launch (DialPMI) the launcher's PMI
// does the bootstrap, and the connection is to rank 0's hub, which keeps
// the end of the job.
type Worker struct {
	wel ctl.Welcome // the console's welcome
	// tab is the address table once it is complete (SetTable), and blob
	// its wire form, as it came.
	tab  ctl.Table
	blob []byte
	// Secret is the job secret, from which datagram tags are derived.
	Secret []byte
	// LocalIP is the address of the interface that reaches the console; the
	// worker's UDP socket binds it.
	LocalIP netip.Addr
	// EnvChanged says whether Join changed this process's environment: the
	// console's settings differed from those the worker started with (as
	// under a launcher that does not pass the environment on), so the
	// configuration must be read again.
	EnvChanged bool
	// ProcsSet says that the L spawner started this worker with
	// GOMAXPROCS=1 (see launch.Local), which Join took out of the
	// environment: the user did not set it.
	ProcsSet bool
	// SpawnedCrowded says, from Dial on, that the L spawner started this
	// worker among more workers than its host shares memory for by
	// default (ctl.ShmCrowded, ctl.EnvNoInbox): a guess of what Host will
	// say, for what must be decided before Join (whether to make an inbox).
	SpawnedCrowded bool
	// SpawnedLocal says that the L spawner started this worker, on the
	// console's host like every other: it needs no address but LocalIP.
	SpawnedLocal bool

	// Under direct launch (DialPMI): the launcher's PMI session, whether
	// GASNET_SUPERNODE_MAXSIZE was set, rank 0's hub (the others' is at
	// the other end of conn) and GASNET_EXIT_TIMEOUT.
	pmi         *pmi.Client
	shmSet      bool
	hub         *hub
	exitTimeout time.Duration
	finalized   bool        // the PMI session ended at startup (Hydra)
	hydra       bool        // started by mpiexec.hydra (no PMI_JOBID), not srun
	hub0        ctl.Join    // rank 0's pid and host name, from its hub's key (hubLost)
	hubbed      atomic.Bool // connected to rank 0's hub, its reader started

	conn    net.Conn
	wmu     sync.Mutex
	r       *bufio.Reader
	wake    atomic.Pointer[func()]
	exiting atomic.Bool
	// The console's Terminate: the job's code, whether it came, what
	// ended the job when another rank's Exit did ("rank 3's Exit(0)"), and
	// whether this rank said where that ended it (sayEnded).
	termCode    atomic.Int32
	terminating atomic.Bool
	termBy      atomic.Pointer[string]
	endSaid     atomic.Bool
	grace       atomic.Int64    // time.Duration; see SetGrace
	liveness    atomic.Int64    // time.Duration; see SetLiveness
	children    *launch.Subtree // the workers this one started (spawn tree)
	atExit      atomic.Pointer[func()]
	exitOnce    sync.Once
}

// Rank returns this worker's rank, and Size the job's number of ranks.
func (w *Worker) Rank() int { return w.wel.Rank }

// Size returns the job's number of ranks.
func (w *Worker) Size() int { return w.wel.Size }

// Hosts returns every rank's host identity, once the table is complete
// (HasTable).
func (w *Worker) Hosts() []string { return w.tab.Hosts }

// Host returns how many ranks share this worker's host, itself included,
// and how many CPUs they may run on together (see Oversubscribed).
func (w *Worker) Host() (ranks, cpus int) { return w.wel.HostCount, w.wel.HostCPUs }

// Crowded reports whether some host of the job is oversubscribed: the same
// on every rank (see Welcome.Crowded).
func (w *Worker) Crowded() bool { return w.wel.Crowded }

// Connect reads this worker's configuration and connects it to its
// console: through the connection the L spawner made, with the console's
// configuration (ctl.EnvConnFD), or else from the environment, then over
// TCP (Dial).
func Connect() (*Worker, *envconf.Config, map[string]envconf.Source, error) {
	if v := os.Getenv(ctl.EnvConnFD); v != "" {
		return inherited(v)
	}
	cfg, src, err := envconf.Load()
	if err != nil {
		return nil, nil, nil, err
	}
	w, err := Dial(cfg)
	return w, cfg, src, err
}

// Dial connects to the console named by the worker marker, retrying until
// cfg.ConnectTimeout.
func Dial(cfg *envconf.Config) (*Worker, error) {
	addr := os.Getenv(ctl.EnvMaster)
	secret, err := ReadSecret()
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(cfg.ConnectTimeout)
	var c net.Conn
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
		c, err = net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			break
		}
		// The console listens before it starts any worker and until the
		// job ends: a refusal means it has ended (killed, say), and a
		// worker a launcher started late must not wait for it.
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("the console at %s refused the connection: it has ended", addr)
		}
		if time.Now().Add(delay).After(deadline) {
			return nil, fmt.Errorf("cannot reach the console at %s within GASNET_CONNECT_TIMEOUT=%v: %w", addr, cfg.ConnectTimeout, err)
		}
		time.Sleep(delay)
	}
	hexSecret := []byte(hex.EncodeToString(secret))
	hello := ctl.NewHello(hexSecret)
	if err := ctl.WriteFrame(c, ctl.FrameHello, hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("greeting the console at %s: %w", addr, err)
	}
	// The rest of the connection is sealed (it is not the socket pair of
	// an L worker, which stays on this host).
	c = ctl.Seal(c, c, hexSecret, hello.Nonce, false)
	w := &Worker{conn: c, r: bufio.NewReader(c), Secret: hexSecret, SpawnedCrowded: os.Getenv(ctl.EnvNoInbox) != ""}
	if os.Getenv(ctl.EnvRoute) != "" {
		if err := routeOutput(addr, w.Secret, deadline); err != nil {
			c.Close()
			return nil, err
		}
	}
	if session.tree != nil {
		if w.children, err = launch.StartSubtree(cfg, session.tree, secret, exitProcess); err != nil {
			c.Close()
			return nil, err
		}
	}
	local, _ := netip.ParseAddrPort(c.LocalAddr().String())
	w.LocalIP = local.Addr().Unmap()
	if cfg.WorkerIP != "" {
		ip, err := envconf.AddrOnSubnet(cfg.WorkerIP)
		if err != nil {
			c.Close()
			return nil, err
		}
		w.LocalIP = ip
	}
	return w, nil
}

// settingsWait bounds the wait for the first frames of a connection the
// L spawner made, which the console writes as it starts the worker.
const settingsWait = time.Minute

// inherited returns the worker whose control connection is the socket on
// descriptor fd (a decimal string), with the configuration the console
// sent on it: its first frame, the console's Hello, carries the job
// secret, and the second, Settings, the console's configuration, which is
// this worker's (its environment is the console's). Its UDP socket binds
// the console's address, on this host (as a TCP connection to it would:
// loopback for a console listening on every address), or GASNET_WORKERIP's.
func inherited(fd string) (*Worker, *envconf.Config, map[string]envconf.Source, error) {
	n, err := strconv.Atoi(fd)
	master, perr := netip.ParseAddrPort(os.Getenv(ctl.EnvMaster))
	if err != nil || n < 3 || perr != nil {
		return nil, nil, nil, fmt.Errorf("%s=%q with %s=%q: accepted: a file descriptor >= 3 and the console's address", ctl.EnvConnFD, fd, ctl.EnvMaster, os.Getenv(ctl.EnvMaster))
	}
	f := os.NewFile(uintptr(n), "control")
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("the control connection on file descriptor %d: %w", n, err)
	}
	local := master.Addr().Unmap()
	switch {
	case local == netip.IPv4Unspecified():
		local = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case local == netip.IPv6Unspecified():
		local = netip.IPv6Loopback()
	}
	w := &Worker{conn: c, r: bufio.NewReader(c), SpawnedCrowded: os.Getenv(ctl.EnvNoInbox) != "", SpawnedLocal: true, LocalIP: local}
	fail := func(err error) (*Worker, *envconf.Config, map[string]envconf.Source, error) {
		c.Close()
		return nil, nil, nil, fmt.Errorf("reading the control connection from the console: %w", err)
	}
	c.SetReadDeadline(time.Now().Add(settingsWait))
	var h ctl.Hello
	if err := readFrame(w.r, ctl.FrameHello, ctl.MaxFirstFrame, &h); err != nil {
		return fail(err)
	}
	if secret, err := hex.DecodeString(h.Secret); err != nil || len(secret) == 0 {
		return fail(errors.New("malformed job secret"))
	}
	var s ctl.Settings
	if err := readFrame(w.r, ctl.FrameSettings, ctl.MaxFrame, &s); err != nil {
		return fail(err)
	}
	cfg, src, err := envconf.DecodeBinary(s.Config)
	if err != nil {
		return fail(err)
	}
	c.SetReadDeadline(time.Time{})
	w.Secret = []byte(h.Secret)
	if cfg.WorkerIP != "" {
		if w.LocalIP, err = envconf.AddrOnSubnet(cfg.WorkerIP); err != nil {
			c.Close()
			return nil, nil, nil, err
		}
	}
	return w, cfg, src, nil
}

// readFrame reads a frame of type typ, of at most limit bytes, into v.
func readFrame(r *bufio.Reader, typ byte, limit uint32, v ctl.BodyReader) error {
	t, body, err := ctl.ReadFrameMax(r, limit)
	switch {
	case err != nil:
		return err
	case t != typ:
		return fmt.Errorf("frame %d instead of %d", t, typ)
	}
	return ctl.DecodeBody(body, v)
}

// ReadSecret returns the job secret: from the ssh session of a remote
// worker (S, ctl.EnvSecretFD=0: the secret is its first line, and the rest
// of it is watched, see watchStdin), or else from ctl.EnvSecret.
func ReadSecret() ([]byte, error) {
	text := os.Getenv(ctl.EnvSecret)
	switch v := os.Getenv(ctl.EnvSecretFD); v {
	case "":
	case "0":
		if session.err != nil {
			return nil, fmt.Errorf("reading the job secret from the ssh session: %w", session.err)
		}
		text = session.secret
	default:
		return nil, fmt.Errorf("%s=%q: accepted: 0 (the ssh session)", ctl.EnvSecretFD, v)
	}
	secret, err := hex.DecodeString(text)
	if err != nil || len(secret) == 0 {
		return nil, fmt.Errorf("%s: missing or malformed job secret", ctl.EnvSecret)
	}
	return secret, nil
}

// session is what a remote worker (S) read from its ssh session when it
// started: the job secret, its first line.
var session struct {
	secret string
	err    error
	tree   *launch.TreeInfo // a spawn tree worker's second line
}

// init reads a remote worker's secret from its ssh session and starts
// watching the session (watchStdin) as the process starts, before the
// program's main: a worker that the job's end catches before it calls
// conduit.Init still ends with its session. It does so only in a process
// that the S spawner started (both its markers, ctl.EnvMaster and
// ctl.EnvSecretFD=0, in the environment): any other program or test that
// imports the package keeps its stdin.
func init() {
	if os.Getenv(ctl.EnvSecretFD) != "0" || os.Getenv(ctl.EnvMaster) == "" {
		return
	}
	r := bufio.NewReader(os.Stdin)
	line, err := r.ReadString('\n')
	session.secret, session.err = strings.TrimSpace(line), err
	if err == nil && os.Getenv(ctl.EnvTree) == "1" {
		line, err = r.ReadString('\n')
		if err == nil {
			session.tree, err = launch.ParseTreeLine(line)
		}
		if err != nil {
			session.err = fmt.Errorf("the spawn tree's line: %w", err)
		}
	}
	if err == nil {
		go watchStdin(r)
	}
}

// watchStdin ends a remote worker when its ssh session ends: the console
// keeps the session's stdin open for the worker's life, so its end means
// that the console is gone (even by kill -9, and before the worker joined)
// or has ended the job. Nothing is printed: nobody is left to read it.
func watchStdin(r io.Reader) {
	io.Copy(io.Discard, r)
	exitProcess(128 + int(syscall.SIGHUP))
}

// requestedRank reads GASNET_WORKER_RANK, a decimal integer or the name of
// a variable holding one (envconf.ParseInt reads both); -1 when unset.
func requestedRank(cfg *envconf.Config) (int, error) {
	v := cfg.WorkerRank
	if v == "" {
		return -1, nil
	}
	if n, err := envconf.ParseInt(v, false); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("GASNET_WORKER_RANK=%s: accepted: a rank >= 0 or a variable name", v)
		}
		return int(n), nil
	}
	val, ok := os.LookupEnv(v)
	if !ok {
		return 0, fmt.Errorf("GASNET_WORKER_RANK=%s: no variable %s in this worker's environment; accepted: a decimal integer or a variable such as SLURM_PROCID, PMIX_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK", v, v)
	}
	n, err := envconf.ParseInt(val, false)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("GASNET_WORKER_RANK=%s: %s=%q is not a rank; accepted: a decimal integer >= 0", v, v, val)
	}
	return int(n), nil
}

// hostIdentity returns the identity that groups ranks by host.
func hostIdentity(mode string, udp netip.Addr) string {
	switch mode {
	case "conduit":
		return udp.String()
	case "hostid":
		if b, err := os.ReadFile("/etc/hostid"); err == nil && len(b) > 0 {
			return hex.EncodeToString(b)
		}
		if b, err := os.ReadFile("/etc/machine-id"); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	h, _ := os.Hostname()
	return h
}

// Join sends this worker's Join, with udp, its UDP address, inbox, the
// path of its shared-memory inbox ("" for none), and nets, the addresses
// at which its socket may also be reached (the first ctl.MaxNets of them),
// and waits for the Welcome. Afterwards the console's settings are in this process's
// environment.
func (w *Worker) Join(cfg *envconf.Config, udp netip.AddrPort, inbox string, nets []ctl.Net) error {
	if w.pmi != nil {
		return w.joinPMI(cfg, udp, inbox, nets)
	}
	rank, err := requestedRank(cfg)
	if err != nil {
		return err
	}
	idx := -1
	if v := os.Getenv(ctl.EnvIndex); v != "" {
		idx, _ = strconv.Atoi(v)
	} else {
		idx = launch.LauncherRank(os.Getenv) // started by srun, mpirun or mpiexec
	}
	name, _ := os.Hostname()
	jn := ctl.Join{Rank: rank, Index: idx, Host: hostIdentity(cfg.HostDetect, udp.Addr()),
		Name: name, PID: os.Getpid(), UDP: udp.String(), CPUs: runtime.NumCPU(), Mask: cpuMask(), Inbox: inbox,
		Nets: nets[:min(len(nets), ctl.MaxNets)]}
	if err := ctl.WriteFrame(w.conn, ctl.FrameJoin, jn); err != nil {
		return fmt.Errorf("joining the console: %w", err)
	}
	typ, body, err := ctl.ReadFrame(w.r)
	if err != nil {
		return fmt.Errorf("waiting for the console's welcome: %w", err)
	}
	if typ == ctl.FrameTerminate {
		var c ctl.Code
		ctl.DecodeBody(body, &c)
		return &EndedError{Code: c.Code}
	}
	if typ != ctl.FrameWelcome || ctl.DecodeBody(body, &w.wel) != nil {
		return fmt.Errorf("malformed welcome from the console (is it, or amudprun, built from another version of udpconduit than this program? they must match)")
	}
	if w.wel.Protocol != ctl.Protocol {
		return fmt.Errorf("the console speaks control protocol %d, this program %d: build the console (or amudprun) and the program from the same version of udpconduit", w.wel.Protocol, ctl.Protocol)
	}
	if len(w.wel.Table) > 0 { // rank 0's
		if err := w.SetTable(w.wel.Table); err != nil {
			return fmt.Errorf("the console's welcome: %w", err)
		}
	}
	w.children.Welcomed()
	for k, v := range w.wel.Env {
		if old, ok := os.LookupEnv(k); !ok || old != v {
			os.Setenv(k, v)
			w.EnvChanged = true
		}
	}
	if os.Getenv(ctl.EnvProcs) != "" {
		os.Unsetenv("GOMAXPROCS") // the L spawner's, not the user's
		w.ProcsSet = true
	}
	if os.Getenv(ctl.EnvTunables) != "" {
		os.Unsetenv("GLIBC_TUNABLES") // likewise
	}
	for _, k := range []string{ctl.EnvMaster, ctl.EnvSecret, ctl.EnvSecretFD, ctl.EnvConnFD, ctl.EnvIndex, ctl.EnvRoute, ctl.EnvProcs, ctl.EnvTunables, ctl.EnvNoInbox} {
		os.Unsetenv(k) // children of this worker are not workers
	}
	go w.readLoop()
	return nil
}

// Addrs returns the UDP address of every rank known so far: all of them
// once the table is complete (HasTable), else those of this rank and its
// relay-tree neighbours, the others being the zero AddrPort. Once the table
// is complete, every call returns the same slice: callers must not modify
// it.
func (w *Worker) Addrs() ([]netip.AddrPort, error) {
	if w.HasTable() {
		return w.tab.Addrs, nil
	}
	return w.peers()
}

// peers returns the addresses of the welcome's Peers, by rank.
func (w *Worker) peers() ([]netip.AddrPort, error) {
	out := make([]netip.AddrPort, w.wel.Size)
	for r, s := range w.wel.Peers {
		a, err := netip.ParseAddrPort(s)
		if err != nil || r < 0 || r >= w.wel.Size {
			return nil, fmt.Errorf("console sent a bad address for rank %d: %q", r, s)
		}
		out[r] = a
	}
	return out, nil
}

// HasTable reports whether this worker has every rank's address and host.
func (w *Worker) HasTable() bool { return w.wel.Size > 0 && len(w.tab.Addrs) == w.wel.Size }

// EncodedTable returns the complete table in its wire form, as it came,
// for relaying it on (ctl.EncodeTable).
func (w *Worker) EncodedTable() []byte { return w.blob }

// SetTable completes this worker's address table with blob, the table in
// its wire form (rank 0's welcome, or relayed by its tree parent), which
// must agree with the addresses the welcome gave.
func (w *Worker) SetTable(blob []byte) error {
	t, err := ctl.DecodeTable(blob, w.wel.Size)
	if err != nil {
		return err
	}
	for r, s := range w.wel.Peers {
		if a, err := netip.ParseAddrPort(s); err != nil || r < 0 || r >= len(t.Addrs) || t.Addrs[r] != a {
			return fmt.Errorf("relayed address table disagrees with the console on rank %d", r)
		}
	}
	w.tab, w.blob = t, blob
	return nil
}

// Inboxes returns every rank's shared-memory inbox ("" for none), once the
// table is complete (HasTable).
func (w *Worker) Inboxes() []string { return w.tab.Inboxes }

// Nets returns every rank's published addresses (Join's nets; nil for a
// rank with its UDP address alone, or for all when none published), once
// the table is complete (HasTable).
func (w *Worker) Nets() [][]ctl.Net { return w.tab.Nets }

// OnEvent sets a function called after each service completion (a barrier
// or gather), to wake a goroutine blocked in the network.
func (w *Worker) OnEvent(f func()) { w.wake.Store(&f) }

func (w *Worker) event() {
	if f := w.wake.Load(); f != nil {
		(*f)()
	}
}

// readLoop handles the console's frames. A Terminate ends the process at
// the program's next library call or after the grace period, even while the
// program computes without polling (GASNet's testexit 5 and 9 hang there;
// DESIGN.md §12); the console's end exits at once.
func (w *Worker) readLoop() {
	for {
		live := time.Duration(w.liveness.Load())
		if live > 0 {
			w.conn.SetReadDeadline(time.Now().Add(live))
		}
		typ, body, err := ctl.ReadFrame(w.r)
		if err != nil {
			if w.exiting.Load() || w.terminating.Load() {
				// Exit is about to end the process, or the grace
				// period after the job's end (terminate) will, with
				// the job's code.
				select {}
			}
			if w.pmi != nil {
				w.hubLost(err)
			}
			if errors.Is(err, os.ErrDeadlineExceeded) {
				err = fmt.Errorf("no word from it for %v, GASNET_LIVENESS_TIMEOUT", live)
			}
			fmt.Fprintf(os.Stderr, "udpconduit: rank %d: lost the console (%v); exiting\n", w.wel.Rank, err)
			w.exit(1)
		}
		switch typ {
		case ctl.FrameTerminate:
			var c ctl.Code
			ctl.DecodeBody(body, &c)
			w.terminate(c.Code, c.Why)
		case ctl.FrameSignal:
			// A signal the console forwards to a worker it cannot signal
			// itself (remote): only the forwarded ones.
			var c ctl.Code
			ctl.DecodeBody(body, &c)
			if sig := syscall.Signal(c.Code); sig == syscall.SIGUSR1 || sig == syscall.SIGUSR2 {
				syscall.Kill(os.Getpid(), sig)
			}
		case ctl.FramePing:
			// Answered here, not by the program's goroutines: a rank that
			// computes without calling the library is alive; only one
			// whose process is stopped or whose host is gone is not.
			w.send(ctl.FramePong, ctl.NoBody{})
		}
	}
}

func (w *Worker) send(typ byte, v ctl.Body) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return ctl.WriteFrame(w.conn, typ, v)
}

// Report tells the console that this rank waits in a collective (c.In),
// or no longer does (see Coll).
func (w *Worker) Report(c ctl.Coll) error {
	if w.pmi != nil {
		return nil // no console to tell
	}
	return w.send(ctl.FrameColl, c)
}
