package launch

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/cmdtmpl"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// Custom is the C spawner: it runs a launcher command (srun, mpirun,
// mpiexec...) once, from the GASNET_CSPAWN_CMD template, and the launcher
// starts the N workers (DESIGN.md §9). The job's marker and secret reach the
// workers through the launcher's environment, never its command line.
type Custom struct {
	// Template is GASNET_CSPAWN_CMD; Servers the list for %M.
	Template string
	Servers  []string
	// Say prints the expanded command line when set (GASNET_VERBOSEENV).
	Say func(format string, a ...any)
	// Env is added to the launcher's environment after the job's marker
	// (GASNET_WORKER_RANK under the SLURM auto-detection, say).
	Env []string
}

var _ Spawner = Custom{}

// Name returns "C".
func (Custom) Name() string { return "C" }

// Start expands the template and starts the launcher through /bin/sh in a
// process group of its own, so that a terminal's Ctrl-C reaches only the
// console, which stops the launcher (and so its tasks) in order.
func (c Custom) Start(spec *Spec) (Launch, error) {
	line, err := cmdtmpl.Expand(c.Template, cmdtmpl.Vars{N: spec.Count, Command: append([]string{spec.Program}, spec.Args...),
		Dir: spec.Dir, Program: spec.Program, Servers: c.Servers})
	if err != nil {
		return nil, err
	}
	if err := checkLauncher(c.Template, exec.LookPath); err != nil {
		return nil, err
	}
	if c.Say != nil {
		c.Say("C spawner: /bin/sh -c %s", cmdtmpl.Quote(line))
	}
	if simpleCommand(line) {
		line = "exec " + line // the launcher itself is the console's child
	}
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Dir = spec.Dir
	cmd.Env = launcherEnv(os.Environ(), append(append([]string(nil), spec.Env...), c.Env...))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// If the console dies, even by SIGKILL, the launcher gets SIGTERM and
	// stops its tasks (srun cancels the step, mpirun and mpiexec kill their
	// ranks); the workers also end when their control connection closes.
	cmd.SysProcAttr = launcherAttr()
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("spawn C: starting the launcher (%s): %w", line, err)
	}
	l := &customLaunch{cmd: cmd, exits: make(chan ProcExit, 1), done: make(chan struct{})}
	host, _ := os.Hostname()
	go func() {
		ws, err := waitCmd(cmd)
		close(l.done)
		e := procExit(-1, cmd.Process.Pid, host, ws, err)
		l.exits <- e
		close(l.exits)
	}()
	return l, nil
}

// shellWords are the words that /bin/sh, which runs the template, takes
// as its own at the start of a command: reserved words and the builtins
// that have no program of their name.
var shellWords = map[string]bool{
	"!": true, "{": true, "case": true, "for": true, "if": true, "until": true, "while": true,
	".": true, ":": true, "break": true, "cd": true, "command": true, "continue": true, "eval": true,
	"exec": true, "exit": true, "export": true, "getopts": true, "hash": true, "read": true,
	"readonly": true, "return": true, "set": true, "shift": true, "times": true, "trap": true,
	"type": true, "ulimit": true, "umask": true, "unset": true, "wait": true,
}

// checkLauncher fails early, with a clear message, when the template's
// first word is a command that is not installed: the shell's own message
// would come later and say less.
func checkLauncher(tmpl string, lookPath func(string) (string, error)) error {
	f := strings.Fields(tmpl)
	if len(f) == 0 {
		return fmt.Errorf("GASNET_CSPAWN_CMD is empty; for example 'srun -n %%N %%C' or 'mpirun -np %%N %%C'")
	}
	w := f[0]
	if strings.ContainsAny(w, "%=$`'\"\\(){}<>|&;*?[]~") || shellWords[w] {
		return nil // a shell construct: let the shell judge it
	}
	if _, err := lookPath(w); err != nil {
		return fmt.Errorf("GASNET_CSPAWN_CMD: the launcher %q is not installed or not in PATH (%v)", w, err)
	}
	return nil
}

// simpleCommand reports whether a shell command line is one simple
// command of a program (no lists, pipes, redirections, subshells or
// substitutions outside quotes, no leading assignment, no shell word such
// as exec or eval first), so that prefixing it with exec keeps its
// meaning.
func simpleCommand(line string) bool {
	f := strings.Fields(line)
	if len(f) == 0 || strings.Contains(f[0], "=") || shellWords[f[0]] {
		return false
	}
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\':
			i++
		case quote == '"':
			if c == '"' {
				quote = 0
			} else if c == '`' || c == '$' && i+1 < len(line) && line[i+1] == '(' {
				return false
			}
		case c == '\'' || c == '"':
			quote = c
		case strings.IndexByte(";&|<>()`\n", c) >= 0, c == '$' && i+1 < len(line) && line[i+1] == '(':
			return false
		}
	}
	return quote == 0
}

// launcherEnv returns the launcher's environment: base (the console's own),
// then the job's variables (the worker marker and secret). Launchers that
// forward the environment to their tasks (srun, MPICH's mpiexec, a local
// Open MPI mpirun) pass them on as they are. For a remote Open MPI launch,
// which forwards only what it is told, their names are added to
// OMPI_MCA_mca_base_env_list (the environment form of mpirun -x), so the
// values stay off every command line. SLURM_KILL_BAD_EXIT=1 (srun -K) makes
// srun end the step when a task fails, as mpirun and mpiexec do, unless
// the user set it.
func launcherEnv(base, job []string) []string {
	env := append(append([]string(nil), base...), job...)
	var names []string
	for _, kv := range job {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	list := strings.Join(names, ";")
	if v, ok := lookup(env, "OMPI_MCA_mca_base_env_list"); ok && v != "" {
		list = v + ";" + list
	}
	env = append(env, "OMPI_MCA_mca_base_env_list="+list)
	if _, ok := lookup(env, "SLURM_KILL_BAD_EXIT"); !ok {
		env = append(env, "SLURM_KILL_BAD_EXIT=1")
	}
	return env
}

// lookup returns the last value of key in env, as exec does.
func lookup(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

// customLaunch is a running launcher.
type customLaunch struct {
	cmd   *exec.Cmd
	exits chan ProcExit
	done  chan struct{}
}

func (l *customLaunch) Exits() <-chan ProcExit { return l.exits }
func (l *customLaunch) PerWorker() bool        { return false }

// Kill sends SIGTERM to the launcher's process group (srun, mpirun and
// mpiexec then stop their tasks), and SIGKILL after grace.
func (l *customLaunch) Kill(grace time.Duration) { termThenKill(grace, l.signal) }

// Signal delivers sig to every worker.
func (l *customLaunch) Signal(sig syscall.Signal) { l.signal(sig) }

func (l *customLaunch) signal(sig syscall.Signal) {
	select {
	case <-l.done:
		return
	default:
	}
	_ = syscall.Kill(-l.cmd.Process.Pid, sig)
}

// Launcher rank variables, in the order they are consulted: SLURM's srun,
// Open MPI's mpirun, PMIx, and MPICH's Hydra (PMI).
var launcherVars = []struct{ rank, size, launcher, template string }{
	{"SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "srun", "srun -n %N %C"},
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun", "mpirun -np %N %C"},
	{"PMIX_RANK", "", "a PMIx launcher", "mpirun -np %N %C"},
	{"PMI_RANK", "PMI_SIZE", "mpiexec", "mpiexec.hydra -n %N %C"},
}

// hintTemplate is template as a machine of cpus CPUs needs it for size
// tasks, run by root or not: Open MPI's mpirun refuses root without
// --allow-run-as-root, and more tasks than cores without --oversubscribe.
func hintTemplate(template string, size int, root bool, cpus int) string {
	rest, ok := strings.CutPrefix(template, "mpirun ")
	if !ok {
		return template
	}
	if size > cpus {
		rest = "--oversubscribe " + rest
	}
	if root {
		rest = "--allow-run-as-root " + rest
	}
	return "mpirun " + rest
}

// LauncherRank returns the rank a launcher gave this process (-1: none).
func LauncherRank(getenv func(string) string) int {
	for _, v := range launcherVars {
		if n, err := strconv.Atoi(getenv(v.rank)); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// DirectLaunch recognises a program that a launcher started as several
// tasks without a console (`srun -n 4 ./prog 4`): no worker marker, and a
// launcher's rank and task count (more than one) in the environment. It
// returns the one-line explanation, and whether this task should print it
// (only the launcher's rank 0 does); off says that the launcher serves PMI
// and GASNET_DIRECT_LAUNCH turned direct launch off.
func DirectLaunch(getenv func(string) string, prog string, off bool) (msg string, speak, ok bool) {
	if getenv(ctl.EnvMaster) != "" {
		return "", false, false
	}
	if filepath.IsAbs(prog) {
		prog = filepath.Clean(prog) // srun passes ./prog as /cwd/./prog
	}
	for _, v := range launcherVars {
		rank, err1 := strconv.Atoi(getenv(v.rank))
		size, err2 := strconv.Atoi(getenv(v.size))
		if v.size == "" || err1 != nil || err2 != nil || size < 2 {
			continue
		}
		direct := fmt.Sprintf("or start it directly, without N, under a launcher that serves PMI: srun --mpi=pmi2 -n %d %s args, or mpiexec.hydra -n %d %s args", size, prog, size, prog)
		if off {
			direct = "or unset GASNET_DIRECT_LAUNCH (and AMUDP_DIRECT_LAUNCH), set to 0 here, to run these tasks as the job's ranks"
		}
		msg = fmt.Sprintf("started by %s as task %d of %d without a console: a udpconduit program starts its own workers, so run it once, not under the launcher: GASNET_SPAWNFN=C GASNET_CSPAWN_CMD='%s' %s N args (inside a SLURM allocation plain `%s N args` uses srun by itself); %s",
			v.launcher, rank, size, hintTemplate(v.template, size, os.Geteuid() == 0, runtime.NumCPU()), prog, prog, direct)
		return msg, rank == 0, true
	}
	return "", false, false
}
