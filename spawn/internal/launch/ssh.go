//go:build !udpconduit_nossh

package launch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/sys/unix"

	"github.com/udpconduit/udpconduit/spawn/internal/cmdtmpl"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/sshc"
)

// SSH is the S spawner (DESIGN.md §9): one worker per entry of the server
// list, started over ssh with the built-in client (golang.org/x/crypto/ssh),
// several ranks of one host sharing its connection. The remote command is
//
//	cd DIR && exec ENV_CMD SETTINGS... PROGRAM ARGS...
//
// with the console's GASNET_*/AMUDP_* settings, the worker marker and the
// forwarded user variables as ENV_CMD's assignments. The job secret is not
// among them: it goes down the session's stdin, which the worker then
// watches, so that it ends as soon as its ssh session does (the console
// ended, even by kill -9, or killed the job).
type SSH struct {
	// Targets holds the resolved host of each rank, and Servers its entry
	// as listed.
	Targets []sshc.Target
	Servers []sshc.Server
	// Command is the external client (GASNET_SSH_CMD) as words, with the
	// options it gets; nil selects the built-in client.
	Command []string
	Options sshc.Options
	Dialer  *sshc.Dialer
	// RemotePath is the remote working directory ("" for the console's);
	// EnvCmd the command that sets the environment (GASNET_ENV_CMD).
	RemotePath, EnvCmd string
	// Env holds the NAME=VALUE assignments every worker gets besides the
	// marker: the console's settings and the forwarded user variables.
	Env []string
	// MasterIPs, when set, holds for each rank the console address its host
	// reaches (the console then listens on every interface).
	MasterIPs []netip.Addr
	// Say prints notes in verbose mode (nil: quiet).
	Say func(format string, a ...any)
	// First is the spawn index of the first worker this spawner starts
	// (a worker of a spawn tree starts its children, not ranks 0..).
	First int
	// Local is the file staged on hosts that lack the program ("": the
	// program itself; a tree worker stages its own executable).
	Local string
	// Tree, when set, makes the started workers start their own children
	// (GASNET_SSH_OUT_DEGREE); it goes down their stdin after the secret.
	Tree *TreeInfo
	// Cache is where programs are staged on hosts that lack the console's
	// (GASNET_SSH_CACHE; relative to the remote home).
	Cache string
	// Stdout and Stderr receive what a worker prints before it routes its
	// output to the console (and a remote shell's own errors).
	Stdout, Stderr io.Writer

	progOnce sync.Once
	prog     *sshc.Program
	progErr  error
	placed   sync.Map // host → *placement
}

var (
	_ Remote      = (*SSH)(nil)
	_ SignalRelay = (*sshLaunch)(nil)
	_ SignalRelay = extLaunch{}
)

// maxDials bounds the ssh connections being opened at once.
const maxDials = 32

// maxSessionsPerConn keeps the sessions of one connection under OpenSSH's
// default MaxSessions (10); more ranks on a host open more connections.
const maxSessionsPerConn = 8

// Name returns "S".
func (*SSH) Name() string { return "S" }

// remoteCommand is rank i's command line for the remote shell, which runs
// the program at prog.
func (s *SSH) remoteCommand(i int, spec *Spec, prog string) string {
	dir := s.RemotePath
	if dir == "" {
		dir = spec.Dir
	}
	env, _ := withoutSecret(spec.Env)
	words := []string{"exec", s.EnvCmd}
	if s.EnvCmd == "" {
		words[1] = "env"
	}
	words = append(words, s.Env...)
	for _, kv := range env {
		if s.MasterIPs != nil && strings.HasPrefix(kv, ctl.EnvMaster+"=") {
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(kv, ctl.EnvMaster+"="))
			kv = ctl.EnvMaster + "=" + net.JoinHostPort(s.MasterIPs[i].String(), port)
		}
		words = append(words, kv)
	}
	words = append(words, ctl.EnvSecretFD+"=0", ctl.EnvIndex+"="+strconv.Itoa(s.First+i))
	if s.Tree != nil {
		words = append(words, ctl.EnvTree+"=1")
	}
	words = append(words, prog)
	words = append(words, spec.Args...)
	return "cd " + cmdtmpl.Quote(dir) + " && " + cmdtmpl.Join(words)
}

// Start opens one connection per host (several for a host with many
// ranks), at most maxDials at once, and starts every rank's session. The
// first failure ends what was started and is returned, naming the host.
func (s *SSH) Start(spec *Spec) (Launch, error) {
	if len(s.Targets) < spec.Count {
		return nil, fmt.Errorf("spawn S: %d hosts for %d workers", len(s.Targets), spec.Count)
	}
	if s.Command != nil {
		return s.startExternal(spec)
	}
	if s.Tree != nil && s.First == 0 {
		// The console starts the first level of the tree only.
		spec = &Spec{Count: min(spec.Count, s.Tree.Degree), Program: spec.Program, Args: spec.Args, Env: spec.Env, Dir: spec.Dir}
		s.Tree.Program, s.Tree.Args, s.Tree.Dir = spec.Program, spec.Args, cmp.Or(s.RemotePath, spec.Dir)
	}
	_, secret := withoutSecret(spec.Env)
	if s.Tree != nil {
		secret += "\n" + treeLine(s.Tree) // the second line of the workers' stdin
	}
	l := &sshLaunch{exits: make(chan ProcExit, spec.Count), ranks: make([]*sshRank, spec.Count)}
	// Group the ranks by host, in groups a connection can carry.
	type group struct {
		t     *sshc.Target
		ranks []int
	}
	var groups []*group
	open := map[string]*group{}
	for i := 0; i < spec.Count; i++ {
		t := &s.Targets[i]
		key := t.User + "@" + t.Addr() + "/" + t.ProxyJump
		g := open[key]
		if g == nil || len(g.ranks) == maxSessionsPerConn {
			g = &group{t: t}
			open[key] = g
			groups = append(groups, g)
		}
		g.ranks = append(g.ranks, i)
	}
	sem := make(chan struct{}, maxDials)
	errs := make(chan error, len(groups))
	var wg sync.WaitGroup
	for _, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if l.failed() {
				return
			}
			c, err := s.Dialer.Dial(g.t)
			if err != nil {
				l.fail()
				errs <- err
				return
			}
			l.addClient(c)
			prog, err := s.place(c, g.t, spec.Program)
			if err != nil {
				l.fail()
				errs <- fmt.Errorf("ssh %s: %w", g.t.Dest(), err)
				return
			}
			for _, i := range g.ranks {
				if err := l.startRank(s, c, i, s.remoteCommand(i, spec, prog), secret); err != nil {
					l.fail()
					errs <- fmt.Errorf("ssh %s: starting worker %d: %w", g.t.Dest(), s.First+i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		l.Kill(0)
		return nil, err
	}
	go func() { l.wg.Wait(); close(l.exits); l.closeClients() }()
	if s.Tree != nil && s.First == 0 {
		return newTreeLaunch(l), nil
	}
	return l, nil
}

// place returns the path of the program on t's host, staging it there when
// the host lacks it (once per host and job).
func (s *SSH) place(c *ssh.Client, t *sshc.Target, program string) (string, error) {
	s.progOnce.Do(func() {
		s.prog, s.progErr = sshc.LocalProgram(cmp.Or(s.Local, program))
		if s.prog != nil {
			s.prog.Path = program
		}
	})
	if s.progErr != nil {
		return "", s.progErr
	}
	key := t.User + "@" + t.Addr() + "/" + t.ProxyJump
	v, _ := s.placed.LoadOrStore(key, &placement{})
	pl := v.(*placement)
	pl.once.Do(func() {
		var how string
		pl.path, how, pl.err = s.prog.Place(c, key, s.Cache)
		if pl.err == nil && s.Say != nil {
			switch how {
			case "present":
			case "cached":
				s.Say("S spawner: %s lacks %s: running the copy staged there by an earlier job, %s", t.Dest(), program, pl.path)
			case "staged":
				s.Say("S spawner: %s lacks %s: staged it to %s", t.Dest(), program, pl.path)
			default:
				s.Say("S spawner: %s: running %s %s", t.Dest(), program, how)
			}
		}
	})
	return pl.path, pl.err
}

// placement is where the program is on one host.
type placement struct {
	once sync.Once
	path string
	err  error
}

// sshLaunch is the running sessions of a job's workers.
type sshLaunch struct {
	exits   chan ProcExit
	mu      sync.Mutex
	ranks   []*sshRank
	clients []*ssh.Client
	bad     bool
	wg      sync.WaitGroup
}

// sshRank is one worker's session.
type sshRank struct {
	sess  *ssh.Session
	stdin io.WriteCloser
	done  bool
}

func (l *sshLaunch) failed() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.bad }
func (l *sshLaunch) fail()        { l.mu.Lock(); l.bad = true; l.mu.Unlock() }

func (l *sshLaunch) addClient(c *ssh.Client) {
	l.mu.Lock()
	l.clients = append(l.clients, c)
	l.mu.Unlock()
}

func (l *sshLaunch) closeClients() {
	l.mu.Lock()
	cs := l.clients
	l.clients = nil
	l.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

// startRank starts worker i's session on c and writes the secret down its
// stdin, which stays open for the worker's life.
func (l *sshLaunch) startRank(s *SSH, c *ssh.Client, i int, cmd, secret string) error {
	sess, err := c.NewSession()
	if err != nil {
		return err
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return err
	}
	sess.Stdout, sess.Stderr = s.Stdout, s.Stderr
	if s.Say != nil {
		s.Say("S spawner: worker %d on %s: %s", s.First+i, s.Targets[i].Dest(), cmd)
	}
	if err := sess.Start(cmd); err != nil {
		sess.Close()
		return err
	}
	if _, err := io.WriteString(stdin, secret+"\n"); err != nil {
		sess.Close()
		return fmt.Errorf("sending the job secret: %w", err)
	}
	r := &sshRank{sess: sess, stdin: stdin}
	l.mu.Lock()
	l.ranks[i] = r
	l.mu.Unlock()
	host := s.Targets[i].Alias
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := sess.Wait()
		l.mu.Lock()
		r.done = true
		l.mu.Unlock()
		stdin.Close()
		l.exits <- sessionExit(s.First+i, host, err)
	}()
	return nil
}

// sessionExit describes the end of worker i's session.
func sessionExit(i int, host string, err error) ProcExit {
	e := ProcExit{Index: i, Host: host}
	var ee *ssh.ExitError
	var missing *ssh.ExitMissingError
	switch {
	case err == nil:
		e.Status = "exit status 0"
	case errors.As(err, &ee) && ee.Signal() != "":
		e.Code, e.Status = 128+signalNumber(ee.Signal()), "killed by signal SIG"+ee.Signal()
	case errors.As(err, &ee):
		e.Code, e.Status = ee.ExitStatus(), "exit status "+strconv.Itoa(ee.ExitStatus())
	case errors.As(err, &missing):
		e.Code, e.Status = 255, "its ssh connection ended without an exit status"
	default:
		e.Code, e.Status = 255, "ssh: "+err.Error()
	}
	e.Clean = e.Code == 0
	return e
}

// signalNumber is the number of a signal named as ssh names them ("TERM").
func signalNumber(name string) int {
	if s := unix.SignalNum("SIG" + name); s != 0 {
		return int(s)
	}
	return 0
}

func (l *sshLaunch) Exits() <-chan ProcExit      { return l.exits }
func (l *sshLaunch) SignalsThroughConsole() bool { return true }
func (l *sshLaunch) PerWorker() bool             { return true }

// Kill sends SIGTERM down every running session, and after grace closes
// the sessions' stdin and the connections: the workers, which watch their
// stdin, then end at once.
func (l *sshLaunch) Kill(grace time.Duration) {
	l.Signal(syscall.SIGTERM)
	hangUp := func() {
		l.mu.Lock()
		for _, r := range l.ranks {
			if r != nil && !r.done {
				r.stdin.Close()
			}
		}
		l.mu.Unlock()
		l.closeClients()
	}
	if grace <= 0 {
		hangUp()
		return
	}
	time.AfterFunc(grace, hangUp)
}

// Signal delivers sig to every running worker as an ssh signal request.
func (l *sshLaunch) Signal(sig syscall.Signal) {
	name := ssh.Signal(strings.TrimPrefix(unix.SignalName(sig), "SIG"))
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.ranks {
		if r != nil && !r.done {
			_ = r.sess.Signal(name)
		}
	}
}

func (s *SSH) ConsoleAddr() (listen string, err error) {
	listen, s.MasterIPs, err = consoleAddrs(s.Targets)
	return listen, err
}

func (s *SSH) TreeLevels(n int) int {
	if s.Tree == nil {
		return 1
	}
	return treeDepth(s.Tree.Degree, n)
}

// consoleAddrs returns the address the console listens on for an ssh job,
// and when its hosts reach it by different addresses, each rank's: the
// address of this host's interface that routes to the rank's host (never a
// name the remote host would have to resolve).
func consoleAddrs(targets []sshc.Target) (listen string, perRank []netip.Addr, err error) {
	byHost := map[string]netip.Addr{}
	perRank = make([]netip.Addr, len(targets))
	for i := range targets {
		t := &targets[i]
		if t.ProxyJump != "" {
			return "", nil, fmt.Errorf("GASNET_MASTERIP is needed: %s is reached through ProxyJump %s, so this host cannot tell which of its addresses that host reaches; set GASNET_MASTERIP to one", t.Alias, t.ProxyJump)
		}
		a, ok := byHost[t.HostName]
		if !ok {
			if a, err = routeSource(t.HostName, t.Port); err != nil {
				if e := t.NameError(err); e != nil {
					return "", nil, e
				}
				return "", nil, fmt.Errorf("ssh %s: finding the console's address for it: %w; set GASNET_MASTERIP", t.Dest(), err)
			}
			byHost[t.HostName] = a
		}
		perRank[i] = a
	}
	if len(perRank) == 0 {
		return "127.0.0.1", nil, nil
	}
	for _, a := range perRank {
		if a != perRank[0] {
			return "", perRank, nil // every interface
		}
	}
	return perRank[0].String(), nil, nil
}

// routeSource returns the local address the kernel would use to reach
// host: a UDP socket connected to it (no datagram is sent).
func routeSource(host string, port int) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, err
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(ips[0].Unmap(), uint16(port))))
	if err != nil {
		return netip.Addr{}, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), nil
}

// localUser returns what the ssh resolution needs of this user.
func localUser() sshc.Local {
	home, _ := os.UserHomeDir()
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil {
		name = u.Username
		if home == "" {
			home = u.HomeDir
		}
	}
	return sshc.Local{Home: home, User: name}
}

// NewSSH makes the S spawner of a job of n workers from the settings: the
// hosts of GASNET_SSH_SERVERS or GASNET_SSH_NODEFILE, resolved through
// GASNET_SSH_OPTIONS and the ssh_config files.
func NewSSH(cfg *envconf.Config, src map[string]envconf.Source, n int, say func(string, ...any)) (*SSH, error) {
	list, from, err := sshServers(cfg, src)
	if err != nil {
		return nil, err
	}
	if list, err = sshc.ForRanks(list, n, from); err != nil {
		return nil, err
	}
	if cfg.SSHOutDegree > 0 && cfg.SSHCmd != "" {
		return nil, fmt.Errorf("%s=%d: the spawn tree needs the built-in ssh client; accepted with GASNET_SSH_CMD set: 0", envconf.DisplayName(src, "GASNET_SSH_OUT_DEGREE"), cfg.SSHOutDegree)
	}
	s, err := sshFor(cfg, src, list, say)
	if err != nil {
		return nil, err
	}
	if cfg.SSHCmd != "" {
		if s.Command, err = externalCommand(envconf.DisplayName(src, "GASNET_SSH_CMD"), cfg.SSHCmd); err != nil {
			return nil, err
		}
	}
	if d := cfg.SSHOutDegree; d > 0 && n > d {
		s.Tree = &TreeInfo{Degree: d}
		for _, sv := range list {
			s.Tree.Servers = append(s.Tree.Servers, sv.String())
		}
	}
	return s, nil
}

// sshFor makes the S spawner of the hosts in list (one per worker), with
// the options and ssh_config files of this host.
func sshFor(cfg *envconf.Config, src map[string]envconf.Source, list []sshc.Server, say func(string, ...any)) (*SSH, error) {
	optName := envconf.DisplayName(src, "GASNET_SSH_OPTIONS")
	opts, err := sshc.ParseOptions(optName, cfg.SSHOptions, cfg.SSHCmd != "")
	if err != nil {
		return nil, err
	}
	loc := localUser()
	files, err := sshc.LoadConfigFiles(opts.ConfigFile, loc)
	if err != nil {
		return nil, err
	}
	s := &SSH{Servers: list, Options: opts, RemotePath: cfg.SSHRemotePath, EnvCmd: cfg.EnvCmd, Cache: cfg.SSHCache, Say: say, Stdout: os.Stdout, Stderr: os.Stderr,
		Dialer: &sshc.Dialer{Timeout: cfg.ConnectTimeout, Say: say, AgentSocket: os.Getenv("SSH_AUTH_SOCK")}}
	s.Dialer.Jump = func(hop string) (sshc.Target, error) {
		hs, err := sshc.ParseServers("ProxyJump", hop)
		if err != nil || len(hs) != 1 {
			return sshc.Target{}, fmt.Errorf("accepted: [user@]host[:port]")
		}
		return sshc.Resolve(hs[0], sshc.Options{Set: map[string]string{}}, files, loc)
	}
	resolved := map[sshc.Server]sshc.Target{}
	for _, sv := range list {
		t, ok := resolved[sv]
		if !ok {
			if t, err = sshc.Resolve(sv, opts, files, loc); err != nil {
				return nil, err
			}
			resolved[sv] = t
		}
		s.Targets = append(s.Targets, t)
	}
	s.Env = consoleSettings(os.Environ())
	return s, nil
}

// sshServers reads the server list: GASNET_SSH_SERVERS, else the node
// file. It returns the list and where it came from, for messages.
func sshServers(cfg *envconf.Config, src map[string]envconf.Source) ([]sshc.Server, string, error) {
	if cfg.SSHServers != "" {
		name := envconf.DisplayName(src, "GASNET_SSH_SERVERS")
		list, err := sshc.ParseServers(name, cfg.SSHServers)
		return list, name, err
	}
	name := envconf.DisplayName(src, "GASNET_SSH_NODEFILE")
	if cfg.SSHNodeFile == "" {
		return nil, "", fmt.Errorf("the S spawner needs its hosts: GASNET_SSH_SERVERS=\"h1 h2 ...\" or GASNET_SSH_NODEFILE=FILE (one host per line)")
	}
	f, err := os.Open(cfg.SSHNodeFile)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	list, err := sshc.ParseNodeFile(cfg.SSHNodeFile, f)
	return list, name + "=" + cfg.SSHNodeFile, err
}

// consoleSettings returns the console's GASNET_* and AMUDP_* variables
// that a remote worker needs from its first instruction (the rest come
// with the Welcome): all of them but the worker marker.
func consoleSettings(env []string) []string {
	var out []string
	for _, kv := range env {
		if (strings.HasPrefix(kv, "GASNET_") || strings.HasPrefix(kv, "AMUDP_")) && !strings.HasPrefix(kv, "GASNET_SPAWN_") {
			out = append(out, kv)
		}
	}
	return out
}
