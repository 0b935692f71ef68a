package launch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// Local is the L spawner: it forks and execs N copies of the program on this
// host. Each child has its own process group (so a terminal's Ctrl-C reaches
// only the console, which stops the job in order) and dies with the console
// (Pdeathsig), so no worker outlives a killed console.
type Local struct{}

var _ Spawner = Local{}

// Name returns "L".
func (Local) Name() string { return "L" }

type localLaunch struct {
	exits chan ProcExit
	mu    sync.Mutex
	pids  []int  // of the started processes
	idx   []int  // their workers
	done  []bool // by worker
}

// Start starts spec.Count children.
func (Local) Start(spec *Spec) (Launch, error) {
	if spec.Control == nil {
		return nil, errors.New("spawn L: no control connections (Spec.Control) for the workers")
	}
	l := &localLaunch{exits: make(chan ProcExit, spec.Count), done: make([]bool, spec.Count)}
	host, _ := os.Hostname()
	var wg sync.WaitGroup
	env, secret := withoutSecret(spec.Env)
	procs := localProcs(spec.Count, runtime.NumCPU(), func(k string) bool {
		return os.Getenv(k) != "" || slices.ContainsFunc(env, func(kv string) bool {
			return strings.HasPrefix(kv, k+"=") && kv != k+"="
		})
	})
	order := bindOrder(spec.Count, spec.Bind, allowedCPUs(), os.Getpid())
	if spec.Output != nil && ForkServed(spec.Count, true) {
		if order != nil {
			procs = append(procs, ctl.EnvBind+"="+formatCPUs(order)) // the server's, not its workers'
		}
		if err := l.startServed(spec, env, procs, ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: secret})); err != nil {
			return nil, err
		}
		return l, nil
	}
	for i := 0; i < spec.Count; i++ {
		cmd := exec.Command(spec.Program, spec.Args...)
		cmd.Dir = spec.Dir
		cmd.Env = append(append(os.Environ(), env...), ctl.EnvIndex+"="+strconv.Itoa(i))
		cmd.Env = append(cmd.Env, procs...)
		// The secret goes through file descriptor 3, not the
		// environment, which stays readable in /proc/PID/environ for the
		// worker's whole life: the first frame of its control connection.
		pr, conn, err := controlSocket(secret)
		if err != nil {
			l.Kill(0)
			return nil, fmt.Errorf("spawn L: worker %d: its control connection: %w", i, err)
		}
		cmd.Env = append(cmd.Env, ctl.EnvConnFD+"=3")
		cmd.ExtraFiles = []*os.File{pr}
		// Routed, the worker's stdout and stderr are pipes whose read ends
		// go to spec.Output; else its output goes straight to the
		// console's.
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		var out outPipes
		if spec.Output != nil {
			if out, err = newOutPipes(); err != nil {
				pr.Close()
				conn.Close()
				l.Kill(0)
				return nil, fmt.Errorf("spawn L: worker %d: pipes for its output: %w", i, err)
			}
			cmd.Stdout, cmd.Stderr = out.w[0], out.w[1]
		}
		cmd.SysProcAttr = childAttr()
		cmd.WaitDelay = time.Second
		err = startOn(cpuFor(order, i), cmd.Start)
		pr.Close()
		out.closeWriters() // the worker has its own
		if err != nil {
			out.closeReaders()
			conn.Close()
			l.Kill(0)
			return nil, fmt.Errorf("spawn L: starting worker %d (%s): %w", i, spec.Program, err)
		}
		if spec.Output != nil {
			spec.Output(i, 1, out.r[0])
			spec.Output(i, 2, out.r[1])
		}
		spec.Control(i, conn)
		l.add(i, cmd, host, &wg, nil)
	}
	go func() { wg.Wait(); close(l.exits) }()
	return l, nil
}

// controlSocket returns the two ends of a worker's control connection: the
// worker's, to inherit, and the console's, on which a Hello carrying secret
// is already written (far below a socket's buffer: the worker reads it
// whenever it starts).
func controlSocket(secret string) (*os.File, net.Conn, error) {
	// Close-on-exec before any other fork can see them, as package net
	// makes its sockets where SOCK_CLOEXEC is not portable.
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, os.NewSyscallError("socketpair", err)
	}
	mine := os.NewFile(uintptr(fds[0]), "control")
	conn, err := net.FileConn(mine)
	mine.Close()
	theirs := os.NewFile(uintptr(fds[1]), "control")
	if err == nil {
		if _, err = conn.Write(ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: secret})); err != nil {
			conn.Close()
		}
	}
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return theirs, conn, nil
}

// outPipes are a worker's stdout and stderr pipes: r the read ends, w the
// write ends.
type outPipes struct{ r, w [2]*os.File }

// newOutPipes makes a worker's output pipes.
func newOutPipes() (outPipes, error) {
	var p outPipes
	for k := range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			p.closeReaders()
			p.closeWriters()
			return outPipes{}, err
		}
		p.r[k], p.w[k] = r, w
	}
	return p, nil
}

func (p *outPipes) closeReaders() { closeAll(p.r[:]) }
func (p *outPipes) closeWriters() { closeAll(p.w[:]) }

// closeAll closes the files of fs that are set.
func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// localProcs returns the settings that start each of count workers on one
// host of cpus CPUs where they outnumber the CPUs, for those of them that
// the user did not set (set; an empty value, which the runtime and glibc
// ignore, is not set):
//   - one P (GOMAXPROCS=1), as each worker would choose after its welcome
//     anyway (see conduit's procsMode): set at the start, the runtime
//     never sets up the second P, which saves the job CPU (BENCHMARKS.md,
//     Scale);
//   - no restartable-sequences area (GLIBC_TUNABLES=glibc.pthread.rseq=0)
//     in a program linked with glibc, which registers one for each thread
//     that the kernel then updates at every return to the thread after a
//     switch: a crowded rank takes a turn on its CPU at each wait, and the
//     update made every turn dearer (BENCHMARKS.md, Crowded hosts). Go
//     uses none; a C library of the program's that does (tcmalloc, say)
//     works without one, more slowly.
//
// ctl.EnvProcs and ctl.EnvTunables tell the worker to take them out of its
// environment again, so the program, and what it starts, sees the
// environment its user gave.
func localProcs(count, cpus int, set func(string) bool) []string {
	var env []string
	if ctl.ShmCrowded(count, cpus) {
		env = append(env, ctl.EnvNoInbox+"=1") // see Worker.SpawnedCrowded
	}
	if !ctl.Oversubscribed(count, cpus) {
		return env
	}
	if !set("GOMAXPROCS") {
		env = append(env, "GOMAXPROCS=1", ctl.EnvProcs+"=1")
	}
	if !set("GLIBC_TUNABLES") {
		env = append(env, "GLIBC_TUNABLES=glibc.pthread.rseq=0", ctl.EnvTunables+"=1")
	}
	return env
}

// add tracks the started process cmd of worker i until it ends; then
// ended, if set, runs before its end is reported.
func (l *localLaunch) add(i int, cmd *exec.Cmd, host string, wg *sync.WaitGroup, ended func()) {
	pid := cmd.Process.Pid
	l.mu.Lock()
	l.pids = append(l.pids, pid)
	l.idx = append(l.idx, i)
	l.mu.Unlock()
	wait := watch(cmd)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ws, err := wait()
		l.mu.Lock()
		l.done[i] = true
		l.mu.Unlock()
		if ended != nil {
			ended()
		}
		l.exits <- procExit(i, pid, host, ws, err)
	}()
}

// withoutSecret splits the job secret from a worker environment.
func withoutSecret(env []string) (rest []string, secret string) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, ctl.EnvSecret+"="); ok {
			secret = v
			continue
		}
		rest = append(rest, kv)
	}
	return rest, secret
}

// waitCmd waits for cmd with os/exec, which holds a thread while it
// waits.
func waitCmd(cmd *exec.Cmd) (syscall.WaitStatus, error) {
	err := cmd.Wait()
	var ee *exec.ExitError
	if cmd.ProcessState == nil || (err != nil && !errors.As(err, &ee)) {
		return 0, err
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ws, nil
}

// procExit describes the end of worker i from its wait status.
func procExit(i, pid int, host string, ws syscall.WaitStatus, err error) ProcExit {
	e := ProcExit{Index: i, PID: pid, Host: host}
	switch {
	case err != nil:
		e.Code, e.Status = 1, err.Error()
	case ws.Exited():
		e.Code, e.Status = ws.ExitStatus(), "exit status "+strconv.Itoa(ws.ExitStatus())
	case ws.Signaled():
		e.Code, e.Status = 128+int(ws.Signal()), "killed by signal "+ws.Signal().String()
	default:
		e.Code, e.Status = 1, "ended with wait status "+strconv.Itoa(int(ws))
	}
	e.Clean = e.Code == 0
	return e
}

func (l *localLaunch) Exits() <-chan ProcExit { return l.exits }
func (l *localLaunch) PerWorker() bool        { return true }

// Kill signals every child's process group.
func (l *localLaunch) Kill(grace time.Duration) { termThenKill(grace, l.signal) }

// termThenKill sends SIGTERM through signal, and SIGKILL after grace (at
// once when grace <= 0): the Kill of every Launch.
func termThenKill(grace time.Duration, signal func(syscall.Signal)) {
	signal(syscall.SIGTERM)
	if grace <= 0 {
		signal(syscall.SIGKILL)
		return
	}
	time.AfterFunc(grace, func() { signal(syscall.SIGKILL) })
}

// Signal delivers sig to every worker.
func (l *localLaunch) Signal(sig syscall.Signal) { l.signal(sig) }

func (l *localLaunch) signal(sig syscall.Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, pid := range l.pids {
		if !l.done[l.idx[k]] {
			_ = syscall.Kill(-pid, sig) // the child's whole group
		}
	}
}
