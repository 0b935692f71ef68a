package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// launcher is a real launcher the C spawner is tested with.
type launcher struct {
	name     string
	template string         // GASNET_CSPAWN_CMD
	labelled string         // the same with the launcher's rank labels on output
	label    *regexp.Regexp // a labelled line: rank, text
	rankVar  string         // the launcher's rank variable
	env      []string       // what this machine needs (root, 2 cores)
	setup    func(t *testing.T)
}

var launchers = []launcher{
	{
		// -O -s: more tasks than CPUs, and CPUs shared with the steps of
		// earlier tests that SLURM is still cleaning up (else a step may
		// queue for them).
		name: "srun", template: "srun -O -s -n %N %C", labelled: "srun -O -s -l -n %N %C",
		label: regexp.MustCompile(`^ *(\d+): (.*)$`), rankVar: "SLURM_PROCID", setup: needSlurm,
	},
	{
		name: "openmpi", template: "mpirun.openmpi -np %N %C", labelled: "mpirun.openmpi --tag-output -np %N %C",
		label: regexp.MustCompile(`^\[1,(\d+)\]<stdout>:(.*)$`), rankVar: "OMPI_COMM_WORLD_RANK",
		// As root, and with more ranks than cores (NOTES in DESIGN.md §9).
		env:   []string{"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1", "OMPI_MCA_rmaps_base_oversubscribe=1"},
		setup: needCommand("mpirun.openmpi", "openmpi-bin"),
	},
	{
		name: "mpich", template: "mpiexec.hydra -n %N %C", labelled: "mpiexec.hydra -prepend-rank -n %N %C",
		label: regexp.MustCompile(`^\[(\d+)\] (.*)$`), rankVar: "PMI_RANK", setup: needCommand("mpiexec.hydra", "mpich"),
	},
}

// needCommand fails the test (never skips it) when a launcher is missing.
func needCommand(cmd, pkg string) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		if _, err := exec.LookPath(cmd); err != nil {
			t.Fatalf("%s is not installed (Debian package %s; make deps installs it): %v", cmd, pkg, err)
		}
	}
}

var slurm struct {
	once sync.Once
	err  error
}

// needSlurm starts a one-node SLURM (scripts/slurm-local.sh) unless one
// answers already, and stops it after the tests if it started it.
func needSlurm(t *testing.T) {
	t.Helper()
	needCommand("srun", "slurm-client")(t)
	slurm.once.Do(func() {
		if exec.Command("sinfo", "-h").Run() == nil && exec.Command("srun", "-n", "1", "--immediate=5", "true").Run() == nil {
			return
		}
		out, err := exec.Command("../scripts/slurm-local.sh", "up").CombinedOutput()
		if err != nil {
			slurm.err = fmt.Errorf("starting SLURM with scripts/slurm-local.sh up: %v\n%s", err, out)
			return
		}
		cleanups = append(cleanups, func() { exec.Command("../scripts/slurm-local.sh", "down").Run() })
	})
	if slurm.err != nil {
		t.Fatal(slurm.err)
	}
}

// slurmIdle waits (at most 30 s) until SLURM runs no job: the node of a
// cancelled job stays COMPLETING for a while, and a new srun queues behind
// it.
func slurmIdle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("squeue", "-h").CombinedOutput()
		if err == nil && len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SLURM still has jobs after 30 s: %v\n%s", err, out)
		}
	}
}

func (l launcher) run(t *testing.T, marker string, env []string, prog string, args ...string) result {
	t.Helper()
	env = append(append([]string{"GASNET_SPAWNFN=C", "GASNET_CSPAWN_CMD=" + l.template}, l.env...), env...)
	return run(t, marker, env, prog, args...)
}

func forEachLauncher(t *testing.T, f func(t *testing.T, l launcher)) {
	for _, l := range launchers {
		t.Run(l.name, func(t *testing.T) {
			l.setup(t)
			f(t, l)
		})
	}
}

// TestLauncherHello: hello on 4 workers through each launcher, with
// arguments that a shell or a launcher could mangle; all ranks report the
// same argv, and nothing of the job is left.
func TestLauncherHello(t *testing.T) {
	args := []string{"a b", `it's "q"`, "$HOME", `back\slash`, "*"}
	forEachLauncher(t, func(t *testing.T, l launcher) {
		marker := t.Name()
		r := l.run(t, marker, nil, "hello", append([]string{"4"}, args...)...)
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		host, _ := os.Hostname()
		var want []string
		for i := range 4 {
			want = append(want, fmt.Sprintf(`hello from rank %d of 4 on %s args=["a b" "it's \"q\"" "$HOME" "back\\slash" "*"]`, i, host))
		}
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		sort.Strings(got)
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
		}
		checkNoSurvivors(t, marker, 2*time.Second)
	})
}

// TestLauncherRanks: GASNET_WORKER_RANK naming the launcher's rank
// variable makes every rank the launcher's, as the launcher's own output
// labels show.
func TestLauncherRanks(t *testing.T) {
	forEachLauncher(t, func(t *testing.T, l launcher) {
		l.template = l.labelled
		r := l.run(t, t.Name(), []string{"GASNET_WORKER_RANK=" + l.rankVar}, "hello", "4")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 4 {
			t.Fatalf("%d lines, want 4:\n%s", len(lines), r.stdout)
		}
		for _, line := range lines {
			m := l.label.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("line without the launcher's label: %q", line)
				continue
			}
			if !strings.HasPrefix(m[2], "hello from rank "+m[1]+" of 4") {
				t.Errorf("launcher rank %s printed %q", m[1], m[2])
			}
		}
	})
}

// TestLauncherTestcore: the exactly-once test program through each
// launcher, its 4 tasks on this one node sharing memory: each rank's
// messages went through the inboxes, and its Puts and Gets to all four
// (itself included), and its strided Put and indexed Get to the next, were
// copies.
func TestLauncherTestcore(t *testing.T) {
	forEachLauncher(t, func(t *testing.T, l launcher) {
		r := l.run(t, t.Name(), []string{"GASNET_SUPERNODE_MAXSIZE=0", "GASNET_STATS=1"}, "testcore", "4", "-msgs", "1000")
		if r.code != 0 || !strings.Contains(r.stdout, "testcore: rank 0 shares its segment with ranks [0 1 2 3]\n") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		for rank, st := range jobStats(t, r.stderr, 4) {
			if st["shm-sent"] == 0 || st["shm-received"] == 0 || st["shm-put"] != 5 || st["shm-get"] != 5 {
				t.Errorf("rank %d did not share memory with the node's other tasks: %v", rank, st)
			}
		}
	})
}

// TestLauncherExitCodes: through each launcher, Exit(3) on one rank gives
// 3; a rank that dies by os.Exit(16) without conduit.Exit fails the job
// naming the rank; all ranks returning from main give 0; and nothing of the
// job is left.
func TestLauncherExitCodes(t *testing.T) {
	forEachLauncher(t, func(t *testing.T, l launcher) {
		for _, tc := range []struct {
			scenario string
			want     int
		}{{"3", 3}, {"16", -1}, {"2", 0}} {
			marker := t.Name() + "/" + tc.scenario
			r := l.run(t, marker, nil, "testexit", "4", tc.scenario)
			switch {
			case tc.want >= 0 && r.code != tc.want:
				t.Errorf("scenario %s: exit %d, want %d\nstderr:\n%s", tc.scenario, r.code, tc.want, r.stderr)
			case tc.want < 0 && (r.code == 0 || !strings.Contains(r.stderr, "rank 0 ")):
				// The console sees the launcher's status, not the rank's:
				// non-zero, and the rank named.
				t.Errorf("scenario %s: exit %d, want non-zero naming rank 0\nstderr:\n%s", tc.scenario, r.code, r.stderr)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		}
	})
}

// TestLauncherSignals: while the job runs, its secret is on no process's
// command line; Ctrl-C (SIGINT) at the console gives 130; kill -9 of the
// console ends the launcher and every task within 2 s.
func TestLauncherSignals(t *testing.T) {
	forEachLauncher(t, func(t *testing.T, l launcher) {
		env := append([]string{"GASNET_SPAWNFN=C", "GASNET_CSPAWN_CMD=" + l.template}, l.env...)
		marker := t.Name() + "/int"
		cmd, out := startWaitingJob(t, marker, env...)
		checkSecretOffCommandLines(t, marker)
		cmd.Process.Signal(syscall.SIGINT)
		waitEnd(t, cmd, out, 10*time.Second)
		if got := cmd.ProcessState.ExitCode(); got != 130 {
			t.Errorf("SIGINT: exit %d, want 130\n%s", got, out.String())
		}
		checkNoSurvivors(t, marker, 2*time.Second)
		if l.name == "srun" {
			slurmIdle(t) // a cancelled step holds the node while it completes
		}

		marker = t.Name() + "/kill"
		cmd, _ = startWaitingJob(t, marker, env...)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		checkNoSurvivors(t, marker, 2*time.Second)
	})
}

// TestCustomSpawnerErrors: what a user gets wrong about the template or
// the launcher is one line naming it, and a non-zero exit.
func TestCustomSpawnerErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no %C", []string{"GASNET_CSPAWN_CMD=srun -n %N"}, "has no %C"},
		{"unknown code", []string{"GASNET_CSPAWN_CMD=srun -n %N %C %x"}, "unknown %x"},
		{"not installed", []string{"GASNET_CSPAWN_CMD=no-such-launcher -n %N %C"}, `the launcher "no-such-launcher" is not installed`},
		{"too few servers", []string{"GASNET_CSPAWN_CMD=x %M %C", "GASNET_CSPAWN_SERVERS=h1 h2"}, "GASNET_CSPAWN_SERVERS lists 2 hosts, but %M of GASNET_CSPAWN_CMD needs 3"},
		{"launcher fails", []string{"GASNET_CSPAWN_CMD=sh -c 'echo launcher says no >&2; exit 7' %C"}, "the launcher ended with exit status 7 before all workers joined (0 of 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := t.Name()
			r := run(t, marker, append([]string{"GASNET_SPAWNFN=C"}, tc.env...), "hello", "3")
			if r.code == 0 || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want non-zero and %q", r.code, r.stderr, tc.want)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
}

// TestCustomServers: %M expands to the first N servers, and the verbose
// mode prints the expanded command line.
func TestCustomServers(t *testing.T) {
	needSlurm(t)
	r := run(t, t.Name(), []string{"GASNET_SPAWNFN=C", "GASNET_VERBOSEENV=1", "GASNET_CSPAWN_SERVERS=h1,h2 h3;h4",
		"GASNET_CSPAWN_CMD=echo hosts: %M >&2; srun -n %N %C"}, "hello", "3")
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{"hosts: h1 h2 h3\n", "C spawner: /bin/sh -c 'echo hosts: h1 h2 h3 >&2; srun -n 3 "} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

// TestSlurmAllocation: inside an allocation (salloc), a plain ./prog N
// starts its workers with srun, ranks = SLURM_PROCID, and says so in
// verbose mode.
func TestSlurmAllocation(t *testing.T) {
	needSlurm(t)
	cmd := exec.Command("salloc", "-n", "4", "--immediate=20", bin+"/hello", "4", "x")
	cmd.Env = append(os.Environ(), "UDPCONDUIT_TEST_MARKER="+t.Name(), "GASNET_VERBOSEENV=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("salloc: %v\nstderr:\n%s", err, stderr.String())
	}
	host, _ := os.Hostname()
	var want []string
	for i := range 4 {
		want = append(want, fmt.Sprintf(`hello from rank %d of 4 on %s args=["x"]`, i, host))
	}
	got := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	sort.Strings(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, stderr.String())
	}
	if !strings.Contains(stderr.String(), "spawner C (inside SLURM allocation") {
		t.Errorf("verbose mode does not say that srun was chosen:\n%s", stderr.String())
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestDirectLaunchTrap: a program started by a launcher as several tasks,
// without a console and without PMI (srun without --mpi=pmi2 here, Open
// MPI's mpirun, which speaks PMIx), or with GASNET_DIRECT_LAUNCH=0 (Hydra),
// stops with one line saying what to run instead.
func TestDirectLaunchTrap(t *testing.T) {
	forEachLauncher(t, func(t *testing.T, l launcher) {
		line := strings.Replace(strings.Replace(l.template, "%N", "3", 1), "%C", bin+"/hello 3", 1)
		f := strings.Fields(line)
		cmd := exec.Command(f[0], f[1:]...)
		cmd.Env = append(append(os.Environ(), "UDPCONDUIT_TEST_MARKER="+t.Name()), l.env...)
		if l.name == "mpich" {
			cmd.Env = append(cmd.Env, "GASNET_DIRECT_LAUNCH=0")
		}
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("the launch succeeded:\n%s", out)
		}
		got := strings.Count(string(out), "without a console")
		if got != 1 || strings.Contains(string(out), "hello from") {
			t.Errorf("want one line about the direct launch and no job:\n%s", out)
		}
		checkNoSurvivors(t, t.Name(), 2*time.Second)
	})
}

// TestLauncherRoutedOutput: GASNET_CSPAWN_ROUTE_OUTPUT=1 routes the
// workers' output through the console, past the launcher's labels.
func TestLauncherRoutedOutput(t *testing.T) {
	forEachLauncher(t, func(t *testing.T, l launcher) {
		l.template = l.labelled
		r := l.run(t, t.Name(), []string{"GASNET_CSPAWN_ROUTE_OUTPUT=1"}, "hello", "3")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		sort.Strings(got)
		host, _ := os.Hostname()
		var want []string
		for i := range 3 {
			want = append(want, fmt.Sprintf(`hello from rank %d of 3 on %s args=[]`, i, host))
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("routed output (-want +got):\n%s", d)
		}
	})
}

// checkSecretOffCommandLines reads the job secret from the environment of
// the job's workers and checks that no process on the host has it on its
// command line (the launcher, its daemons, the tasks).
func checkSecretOffCommandLines(t *testing.T, marker string) {
	t.Helper()
	var secret string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		env, err := os.ReadFile(p + "/environ")
		if err != nil || !bytes.Contains(env, []byte("UDPCONDUIT_TEST_MARKER="+marker+"\x00")) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("GASNET_SPAWN_SECRET=")); ok && len(v) > 0 {
				secret = string(v)
			}
		}
	}
	if secret == "" {
		t.Fatal("no process of the job has GASNET_SPAWN_SECRET in its environment")
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile(p + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(secret)) {
			t.Errorf("the job secret is on the command line of pid %s: %q", filepath.Base(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}

// TestBoundRanksAreNotCrowded: ranks that mpirun binds one to a core each
// (--bind-to core: one CPU in each rank's mask) on a host with a core per
// rank are not judged crowded, since the console counts the union of the
// ranks' masks: they spin, keep their GOMAXPROCS and use the dissemination
// barrier (on shared words: they share memory). Ranks all confined to one
// CPU (taskset -c 0, which the workers inherit) are crowded. This machine
// has 2 CPUs.
func TestBoundRanksAreNotCrowded(t *testing.T) {
	needCommand("mpirun.openmpi", "openmpi-bin")(t)
	needCommand("taskset", "util-linux")(t)
	mpi := launchers[1]
	mpi.template = "mpirun.openmpi --bind-to core -np %N %C"
	r := mpi.run(t, t.Name(), []string{"GASNET_VERBOSEENV=1"}, "hello", "2")
	for _, want := range []string{"rank 0: blocking waits spin 1ms before they sleep (2 ranks on this host's 2 CPUs)", "rank 0: barrier on shared words, by dissemination"} {
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("mpirun --bind-to core: exit %d, want 0 and %q in stderr:\n%s", r.code, want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "GOMAXPROCS=1") {
		t.Errorf("mpirun --bind-to core: bound ranks judged crowded:\n%s", r.stderr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "taskset", "-c", "0", filepath.Join(bin, "hello"), "2")
	r = runCmd(t, ctx, cmd, t.Name()+"taskset", []string{"GASNET_SPAWNFN=L", "GASNET_VERBOSEENV=1"}, "hello", []string{"2"})
	for _, want := range []string{"rank 0: polite progress: 2 ranks share this host's 1 CPUs", "rank 0: GOMAXPROCS=1", "rank 0: " + crowdedBarrier()} {
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("taskset -c 0: exit %d, want 0 and %q in stderr:\n%s", r.code, want, r.stderr)
		}
	}
}

// TestPMIProbe: package pmi's client under the launchers that serve PMI
// over a descriptor, srun --mpi=pmi2 (PMI-2 wire) and mpiexec.hydra (PMI-1
// wire): at 4 and 8 tasks every task reads every task's value, of every
// byte and past the servers' value length, after one fence.
func TestPMIProbe(t *testing.T) {
	for _, l := range []struct {
		name    string
		cmd     []string
		version int
		setup   func(t *testing.T)
	}{
		{"srun", []string{"srun", "--mpi=pmi2", "-O", "-s", "-n"}, 2, needSlurm},
		{"mpich", []string{"mpiexec.hydra", "-n"}, 1, needCommand("mpiexec.hydra", "mpich")},
	} {
		t.Run(l.name, func(t *testing.T) {
			l.setup(t)
			for _, n := range []int{4, 8} {
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				args := append(append([]string{}, l.cmd[1:]...), fmt.Sprint(n), filepath.Join(bin, "pmiprobe"))
				out, err := exec.CommandContext(ctx, l.cmd[0], args...).CombinedOutput()
				cancel()
				if err != nil {
					t.Fatalf("%d tasks: %v\n%s", n, err, out)
				}
				var want []string
				for r := range n {
					want = append(want, fmt.Sprintf("pmi rank %d of %d: v%d ok", r, n, l.version))
				}
				sort.Strings(want)
				got := strings.Split(strings.TrimSpace(string(out)), "\n")
				sort.Strings(got)
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("%d tasks (-want +got):\n%s", n, d)
				}
			}
		})
	}
}

// directLauncher is a launcher that serves PMI.
type directLauncher struct {
	name  string
	cmd   []string // followed by the task count and the command
	setup func(t *testing.T)
}

// directLaunchers are the launchers that serve PMI over a descriptor,
// under which a program's tasks are the job's ranks, without a console
// (GASNET_DIRECT_LAUNCH, on by default).
var directLaunchers = []directLauncher{
	{"srun", []string{"srun", "--mpi=pmi2", "-O", "-s", "-n"}, needSlurm},
	{"mpich", []string{"mpiexec.hydra", "-n"}, needCommand("mpiexec.hydra", "mpich")},
}

// directLaunch runs prog with args as n tasks of launcher l directly
// (GASNET_DIRECT_LAUNCH's default), through wrap (a command that runs the rest of
// its arguments) when it is not empty.
func directLaunch(t *testing.T, l directLauncher, n int, env []string, wrap, prog string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append(append([]string{}, l.cmd[1:]...), fmt.Sprint(n))
	if wrap != "" {
		argv = append(argv, wrap)
	}
	argv = append(append(argv, filepath.Join(bin, prog)), args...)
	return runCmd(t, ctx, exec.CommandContext(ctx, l.cmd[0], argv...), t.Name(), env, prog, args)
}

// TestDirectLaunch: under srun --mpi=pmi2 and mpiexec.hydra directly (the
// default): hello with arguments a shell or a launcher could
// mangle (and no N: the launcher gave the count), and testcore at 4 and 8
// tasks; nothing of the job is left.
func TestDirectLaunch(t *testing.T) {
	args := []string{"a b", `it's "q"`, "$HOME", `back\slash`, "*"}
	for _, l := range directLaunchers {
		t.Run(l.name, func(t *testing.T) {
			l.setup(t)
			r := directLaunch(t, l, 4, nil, "", "hello", args...)
			host, _ := os.Hostname()
			var want []string
			for i := range 4 {
				want = append(want, fmt.Sprintf(`hello from rank %d of 4 on %s args=["a b" "it's \"q\"" "$HOME" "back\\slash" "*"]`, i, host))
			}
			got := strings.Split(strings.TrimSpace(r.stdout), "\n")
			sort.Strings(got)
			if d := cmp.Diff(want, got); d != "" || r.code != 0 {
				t.Errorf("hello: exit %d, output (-want +got):\n%s\nstderr:\n%s", r.code, d, r.stderr)
			}
			for _, n := range []int{4, 8} {
				r := directLaunch(t, l, n, nil, "", "testcore", "-msgs", "300")
				if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "every request and reply ran exactly once, every checksum matched") {
					t.Errorf("testcore on %d tasks: exit %d\nstdout:\n%s\nstderr:\n%s", n, r.code, r.stdout, r.stderr)
				}
			}
			checkNoSurvivors(t, t.Name(), 3*time.Second)
		})
	}
}

// TestDirectLaunchExits: testexit scenarios on 3 tasks under each
// launcher directly. Every Exit code is the job's, from a handler, from
// one goroutine while another spins, while peers are blocked in requests
// to the rank; all ranks returning from main is 0; rank 0 returning from
// main or os.Exit(0) while the others wait is 1; SIGINT to rank 2 is 130
// for all, named. A crash of rank 0 (a panic, kill -9), which holds the
// job's end, is named by the others and ends the job with its status
// under srun, which reports the highest of the tasks' statuses; Hydra
// reports the bitwise OR of them, so there a crash is only checked to end
// the job non-zero. Nothing of the job is left.
func TestDirectLaunchExits(t *testing.T) {
	for _, l := range directLaunchers {
		t.Run(l.name, func(t *testing.T) {
			l.setup(t)
			for _, tc := range []struct {
				k, want int
				crash   bool
				named   string
			}{
				{k: 2, want: 0}, {k: 3, want: 3}, {k: 5, want: 5}, {k: 8, want: 1, named: "rank 1: rank 0 ended without calling conduit.Exit"},
				{k: 11, want: 11}, {k: 14, want: 14}, {k: 21, want: 1}, {k: 25, want: 25}, {k: 26, want: 26},
				{k: 4, want: 130, named: "rank 2 was signalled to stop (interrupt)"}, {k: 15, want: 2, crash: true, named: "rank 2: rank 0 ended without calling conduit.Exit"},
				{k: 17, want: 137, crash: true},
			} {
				r := directLaunch(t, l, 3, nil, "", "testexit", fmt.Sprint(tc.k))
				switch {
				case tc.crash && l.name == "mpich" && r.code == 0:
					t.Errorf("testexit %d: exit 0, want non-zero\nstderr:\n%s", tc.k, r.stderr)
				case (!tc.crash || l.name != "mpich") && r.code != tc.want:
					t.Errorf("testexit %d: exit %d, want %d\nstderr:\n%s", tc.k, r.code, tc.want, r.stderr)
				case tc.named != "" && !strings.Contains(r.stderr, tc.named):
					t.Errorf("testexit %d: stderr does not say %q:\n%s", tc.k, tc.named, r.stderr)
				}
			}
			checkNoSurvivors(t, t.Name(), 3*time.Second)
		})
	}
}

// TestDirectLaunchFaults: a task that never starts the program (a
// wrapper that exits on rank 2, on rank 0, or on ranks 0 and 1) ends the others within
// GASNET_CONNECT_TIMEOUT, non-zero, naming it; a rank stopped (SIGSTOP)
// while the job runs, rank 1 or rank 0, which keeps the job's end, ends
// the job non-zero within GASNET_LIVENESS_TIMEOUT, named, and so does rank
// 1 killed (SIGKILL); and an
// interrupt of the launcher (twice for srun, as a user's Ctrl-C Ctrl-C; once for Hydra)
// ends a running job non-zero. Nothing of the job is left.
func TestDirectLaunchFaults(t *testing.T) {
	// skip is a wrapper that exits at once on the ranks named (as "0 1").
	skip := func(ranks string) string {
		wrap := filepath.Join(t.TempDir(), "skip.sh")
		script := fmt.Sprintf("#!/bin/sh\nr=${PMI_RANK:-$SLURM_PROCID}\nfor s in %s; do [ \"$r\" = \"$s\" ] && exit 0; done\nexec \"$@\"\n", ranks)
		if err := os.WriteFile(wrap, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return wrap
	}
	for _, l := range directLaunchers {
		// Both launchers' PMI-2 keep node attributes, through which the
		// node's lowest rank up names the ranks missing.
		for _, c := range []struct {
			missing, named string
			namer          int
		}{{"2", "rank 2", 0}, {"0", "rank 0", 1}, {"0 1", "ranks 0, 1", 2}} {
			t.Run(fmt.Sprintf("%s-missing-%s", l.name, strings.ReplaceAll(c.missing, " ", "-")), func(t *testing.T) {
				l.setup(t)
				r := directLaunch(t, l, 3, []string{"GASNET_CONNECT_TIMEOUT=3s"}, skip(c.missing), "hello")
				host, _ := os.Hostname()
				want := fmt.Sprintf("rank %d of 3: %s on this host (%s) did not start, or did not reach conduit.Init, within GASNET_CONNECT_TIMEOUT=3s", c.namer, c.named, host)
				if r.code == 0 || !strings.Contains(r.stderr, want) || strings.Contains(r.stdout, "hello from") {
					t.Errorf("a task missing: exit %d, want non-zero, %q and no job\nstdout:\n%s\nstderr:\n%s", r.code, want, r.stdout, r.stderr)
				}
				checkNoSurvivors(t, t.Name(), 3*time.Second)
			})
		}
		for _, stopped := range []int{1, 0} {
			t.Run(fmt.Sprintf("%s-stopped-%d", l.name, stopped), func(t *testing.T) { directStopped(t, l, stopped, syscall.SIGSTOP) })
		}
		t.Run(l.name+"-killed-1", func(t *testing.T) { directStopped(t, l, 1, syscall.SIGKILL) })
		t.Run(l.name+"-interrupt", func(t *testing.T) {
			l.setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			argv := append(append([]string{}, l.cmd[1:]...), "3", filepath.Join(bin, "testam"), "-iters", "100000000")
			cmd := exec.CommandContext(ctx, l.cmd[0], argv...)
			cmd.Env = append(os.Environ(), "UDPCONDUIT_TEST_MARKER="+t.Name())
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Interrupt once the launcher and the tasks run.
			for deadline := time.Now().Add(30 * time.Second); len(survivors(t.Name())) < 4 && time.Now().Before(deadline); {
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(time.Second)
			cmd.Process.Signal(syscall.SIGINT)
			if l.name == "srun" {
				// srun reports the tasks' states at the first, and ends
				// the step at a second within a second. (Hydra forwards
				// the first, and at a second exits with 0 at once.)
				time.Sleep(300 * time.Millisecond)
				cmd.Process.Signal(syscall.SIGINT)
			}
			err := cmd.Wait()
			if ctx.Err() != nil || err == nil {
				t.Errorf("interrupted: %v (timed out: %v), want a non-zero end\nstderr:\n%s", err, ctx.Err() != nil, errb.String())
			}
			checkNoSurvivors(t, t.Name(), 3*time.Second)
		})
	}
}

// directStopped sends sig (SIGSTOP, SIGKILL) to rank `stopped` of a
// running job of 3 tasks under l and checks that the job ends non-zero,
// saying why (but for Hydra's kill, which Hydra reports itself at once),
// with nothing left.
func directStopped(t *testing.T, l directLauncher, stopped int, sig syscall.Signal) {
	l.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	argv := append(append([]string{}, l.cmd[1:]...), "3", filepath.Join(bin, "testam"), "-iters", "100000000")
	cmd := exec.CommandContext(ctx, l.cmd[0], argv...)
	cmd.Env = append(os.Environ(), "UDPCONDUIT_TEST_MARKER="+t.Name(), "GASNET_LIVENESS_TIMEOUT=2s")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for deadline := time.Now().Add(30 * time.Second); pid == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		pid = taskPID(t.Name(), stopped)
	}
	if pid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("rank %d's process never appeared", stopped)
	}
	time.Sleep(time.Second) // the job runs
	syscall.Kill(pid, sig)
	err := cmd.Wait()
	syscall.Kill(pid, syscall.SIGKILL) // if the job left it
	want := "has not answered rank 0 for"
	switch {
	case stopped == 0:
		want = "no word from rank 0 for"
	case sig == syscall.SIGKILL && l.name == "mpich":
		want = ""
	case sig == syscall.SIGKILL:
		want = "rank 1 ended (its status is the launcher's to tell) without calling conduit.Finalize or conduit.Exit"
	}
	if ctx.Err() != nil || err == nil || !strings.Contains(errb.String(), want) {
		t.Errorf("rank %d stopped: %v (timed out: %v), want a non-zero end saying %q\nstderr:\n%s", stopped, err, ctx.Err() != nil, want, errb.String())
	}
	checkNoSurvivors(t, t.Name(), 3*time.Second)
}

// taskPID returns the pid of the task of rank whose environment holds
// marker (PMI_RANK, which both launchers set), or 0.
func taskPID(marker string, rank int) int {
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("UDPCONDUIT_TEST_MARKER="+marker+"\x00")) || !bytes.Contains(b, []byte("\x00PMI_RANK="+strconv.Itoa(rank)+"\x00")) {
			continue
		}
		if cmdline, _ := os.ReadFile(filepath.Dir(p) + "/cmdline"); !bytes.Contains(cmdline, []byte("testam")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		return pid
	}
	return 0
}
