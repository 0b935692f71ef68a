package spawn

import (
	"github.com/udpconduit/udpconduit/spawn/internal/console"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/launch"
	"github.com/udpconduit/udpconduit/spawn/internal/pmi"
	"github.com/udpconduit/udpconduit/spawn/internal/worker"
)

// Console runs a job as its console: it spawns n workers running program
// with args, serves them, and returns the job's exit code. Messages go to
// stderr prefixed with the program's name (spawn/internal/console).
func Console(cfg *Config, src map[string]Source, n int, program string, args []string) int {
	return console.Run(cfg, src, n, program, args)
}

// IsWorker reports whether this process was started as a worker of a job
// (the worker marker is in its environment).
func IsWorker() bool { return worker.IsWorker() }

// Worker is a worker's link to its console (spawn/internal/worker).
type Worker = worker.Worker

// Net is an address a worker publishes besides its UDP address, with its
// interface's prefix length and MTU (Worker.Join, Worker.Nets).
type Net = ctl.Net

// MaxNets bounds the addresses a worker publishes.
const MaxNets = ctl.MaxNets

// PMIEnv is what a launcher that serves PMI gives its tasks (package
// spawn/internal/pmi).
type PMIEnv = pmi.Env

// LauncherPMI reports whether this process is one of several tasks that a
// launcher serving PMI started directly, without a console (srun
// --mpi=pmi2, mpiexec.hydra): not a worker of a console, with the
// launcher's PMI variables and at least two tasks. A variable that is
// malformed is an error naming it.
func LauncherPMI(getenv func(string) string) (PMIEnv, bool, error) {
	if getenv(ctl.EnvMaster) != "" {
		return PMIEnv{}, false, nil
	}
	e, ok, err := pmi.FromEnv(getenv)
	if err != nil || !ok || e.Size < 2 {
		return PMIEnv{}, false, err
	}
	return e, true, nil
}

// DialPMI makes this task a worker of the job its launcher started
// directly (LauncherPMI), with its configuration from its environment;
// Worker.Join then exchanges the ranks' addresses through the launcher.
func DialPMI(e PMIEnv) (*Worker, *Config, map[string]Source, error) { return worker.DialPMI(e) }

// Connect reads a worker's configuration and connects it to the console
// named by the worker marker (over TCP, retrying until the configuration's
// ConnectTimeout), or takes the connection and the configuration that the
// L spawner gave it; Worker.Join then bootstraps its rank.
func Connect() (*Worker, *Config, map[string]Source, error) { return worker.Connect() }

// EndedError is returned by Worker.Join when the console ended the job
// before this worker joined it: the worker should end with its Code,
// saying nothing.
type EndedError = worker.EndedError

// ExitCode returns the code a process ends with after err, the error of
// starting a worker or a console: an EndedError's code, else 1.
func ExitCode(err error) int { return worker.ExitCode(err) }

// DirectLaunch recognises a program that a launcher started as several
// tasks without a console (`srun -n 4 ./prog 4`). It returns the one-line
// explanation, and whether this task should print it (only the launcher's
// rank 0 does). off says that the launcher serves PMI and
// GASNET_DIRECT_LAUNCH turned direct launch off.
func DirectLaunch(getenv func(string) string, prog string, off bool) (msg string, speak, ok bool) {
	return launch.DirectLaunch(getenv, prog, off)
}

// Coll says that a rank waits long in a collective, or has left it (see
// Worker.Report and GASNET_HANG_WARN).
type Coll = ctl.Coll

// Oversubscribed is the one rule by which udpconduit judges a host
// crowded: its ranks outnumber the CPUs they may run on together (cpus;
// 0: unknown, never crowded). The console counts those CPUs as the union
// of the ranks' affinity masks, so ranks a launcher binds to one core each
// are not crowded, while ranks all bound to one core are. On a crowded
// host a rank polls politely, runs one P (GOMAXPROCS=1), waits longer
// before its first retransmission, and the job uses the barrier that
// wakes each rank least.
func Oversubscribed(ranks, cpus int) bool { return ctl.Oversubscribed(ranks, cpus) }

// ShmRanksPerCPU is how many ranks per CPU a host may have and still share
// memory by default (SharesMemory).
const ShmRanksPerCPU = ctl.ShmRanksPerCPU

// SharesMemory is the one rule by which the ranks of a host (ranks ranks,
// cpus CPUs) exchange messages through shared memory: never with
// GASNET_SUPERNODE_MAXSIZE=1 (max), and on a host with more than 512
// ranks per CPU (ctl.ShmRanksPerCPU) only when the variable is set (set):
// up to there, shared memory was measured to gain more in the collectives
// than it costs in start-up and memory (DESIGN.md §6a). The console leaves the inboxes of the
// other hosts' ranks out of the address table, and those ranks release
// theirs.
func SharesMemory(max int, set bool, ranks, cpus int) bool {
	return ctl.SharesMemory(max, set, ranks, cpus)
}
