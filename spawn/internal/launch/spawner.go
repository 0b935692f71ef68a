package launch

import (
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
)

// Spec says what every worker of a job runs.
type Spec struct {
	// Count is the number of workers, N.
	Count int
	// Program is the absolute path of the program; Args its arguments.
	Program string
	Args    []string
	// Env holds KEY=VALUE pairs every worker must receive in its environment
	// (the worker marker with the job secret). Spawners never put them on a
	// command line where the launcher can forward the environment instead.
	Env []string
	// Dir is the workers' working directory.
	Dir string
	// Output, when set, asks a spawner that starts its workers itself on
	// this host (L) to give each worker's stdout (stream 1) and stderr
	// (stream 2) a pipe of its own and to hand the pipe's read end to
	// Output, which owns it from then on. Spawners whose workers run
	// elsewhere ignore it: their workers route their output over TCP
	// when Env asks them to.
	Output func(index, stream int, r *os.File)
	// Control is how a spawner that starts its workers itself on this
	// host (L, which requires it) gives each worker its control
	// connection: an inherited socket, the other end of which goes to
	// Control (which owns it from then on), instead of a TCP connection to
	// the console; the secret goes to the worker as the socket's first
	// frame, a Hello (ctl.EnvConnFD). Spawners whose workers run elsewhere
	// ignore it.
	Control func(index int, c net.Conn)
	// Bind asks L to bind each worker to one CPU in turn where the
	// workers outnumber the CPUs (GASNET_CPU_BIND, bindOrder).
	Bind bool
}

// ProcExit reports that a process a spawner started has ended.
type ProcExit struct {
	Index  int    // spawn index of the worker, or -1 for a launcher
	PID    int    // process id on the console's host, 0 if remote
	Host   string // where it ran
	Code   int    // exit code, or 128+signal
	Status string // as the OS says it ("exit status 3", "signal: killed")
	Clean  bool   // exited with code 0
}

// Who names the worker for messages: "worker 3 (pid 1234 on h)", or
// "worker 3 on h" when it ran on another host.
func (e *ProcExit) Who() string {
	if e.PID == 0 {
		return fmt.Sprintf("worker %d on %s", e.Index, e.Host)
	}
	return fmt.Sprintf("worker %d (pid %d on %s)", e.Index, e.PID, e.Host)
}

// Launch is a running set of processes a Spawner started.
type Launch interface {
	// Exits reports each started process's end, and is closed once all have
	// ended.
	Exits() <-chan ProcExit
	// PerWorker reports whether Exits names every worker process (L, S), or
	// only a launcher that runs them (C).
	PerWorker() bool
	// Kill asks every started process to end (SIGTERM), and forces them
	// (SIGKILL) after grace. It does not wait.
	Kill(grace time.Duration)
	// Signal delivers sig to every worker that still runs (under a
	// launcher: to the launcher, which forwards it to its tasks).
	Signal(sig syscall.Signal)
}

// Spawner starts the workers of a job: L, S or C (DESIGN.md §9). Start
// returns once every process is started, or an error naming what failed,
// having ended whatever it had started.
type Spawner interface {
	Name() string
	Start(spec *Spec) (Launch, error)
}

// Remote is a spawner whose workers run on other hosts (S).
type Remote interface {
	Spawner
	// ConsoleAddr returns the address the console listens on when
	// GASNET_MASTERIP is unset ("" for every interface) and records for
	// each worker the address it reaches the console at.
	ConsoleAddr() (string, error)
	// TreeLevels is the number of levels of its spawn tree of n workers
	// (1 when the console starts every worker).
	TreeLevels(n int) int
}

// SignalRelay is a Launch whose workers the console cannot signal (ssh:
// OpenSSH's sshd refuses signal requests in root sessions, and an external
// client passes none): forwarded signals go down the control connections.
type SignalRelay interface{ SignalsThroughConsole() bool }
