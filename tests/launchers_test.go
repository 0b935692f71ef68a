package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
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
		// -O: more tasks than CPUs, on one CPU. Not -s (--oversubscribe):
		// such a job never shares a node with a job that did not ask
		// for it (a user's), and waits for it to end.
		name: "srun", template: "srun -O -n %N %C", labelled: "srun -O -l -n %N %C",
		label: regexp.MustCompile(`^ *(\d+): (.*)$`), rankVar: "SLURM_PROCID", setup: needSlurm,
	},
	{
		name: "openmpi", template: "mpirun.openmpi -np %N %C", labelled: "mpirun.openmpi --tag-output -np %N %C",
		label: regexp.MustCompile(`^\[1,(\d+)\]<stdout>:(.*)$`), rankVar: "OMPI_COMM_WORLD_RANK",
		// As root, and with more ranks than cores (README.md, Running).
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

func (l launcher) run(t *testing.T, marker string, env []string, prog string, args ...string) result {
	t.Helper()
	if l.name == "srun" {
		slurmReady(t)
	}
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
			var env []string
			if tc.scenario == "2" {
				env = append(env, allReturnWindow(t))
			}
			r := l.run(t, marker, env, "testexit", "4", tc.scenario)
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
		if l.name == "srun" {
			slurmReady(t)
		}
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
			slurmReady(t)
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
	needSlurmCPUs(t, 3) // srun -n 3, without -O
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
	needSlurmCPUs(t, 4)
	immediate := fmt.Sprintf("--immediate=%d", int(testbound.For(t, 20*time.Second).Seconds()))
	cmd := exec.Command("salloc", "-J", slurmJobName(), "-n", "4", immediate, bin+"/hello", "4", "x")
	cmd.Env = append(os.Environ(), markerVar(t.Name()), "GASNET_VERBOSEENV=1")
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
		cmd.Env = append(append(os.Environ(), markerVar(t.Name())), l.env...)
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

// TestRoutedOutputOfUnnamedWorkers: workers that a launcher starts without
// telling them their spawn index (here /bin/sh) and that route their
// output through the console get labels and files by rank, each its own:
// none shares "worker -1"'s label or file, where they overwrote each
// other.
func TestRoutedOutputOfUnnamedWorkers(t *testing.T) {
	dir := t.TempDir()
	env := []string{"GASNET_SPAWNFN=C", "GASNET_CSPAWN_CMD=for i in $(seq %N); do %C & done; wait", "GASNET_CSPAWN_ROUTE_OUTPUT=1"}
	host, _ := os.Hostname()
	line := func(r int) string { return fmt.Sprintf("hello from rank %d of 3 on %s args=[]", r, host) }
	r := run(t, t.Name()+"label", append(env, "GASNET_OUTPUT_LABEL=1"), "hello", "3")
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	sort.Strings(got)
	var want []string
	for i := range 3 {
		want = append(want, fmt.Sprintf("[%d] %s", i, line(i)))
	}
	if d := cmp.Diff(want, got); r.code != 0 || d != "" {
		t.Errorf("labelled: exit %d, output (-want +got):\n%s\nstderr:\n%s", r.code, d, r.stderr)
	}
	r = run(t, t.Name()+"dir", append(env, "GASNET_OUTPUT_DIR="+dir), "hello", "3")
	if r.code != 0 || r.stdout != "" {
		t.Errorf("GASNET_OUTPUT_DIR: exit %d, stdout %q\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for i := range 3 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("rank.%d.stdout", i)))
		if err != nil || string(b) != line(i)+"\n" {
			t.Errorf("rank %d's file: %q, %v", i, b, err)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
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
	ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, "taskset", "-c", "0", filepath.Join(bin, "hello"), "2")
	r = runCmd(t, ctx, cmd, t.Name()+"taskset", []string{"GASNET_SPAWNFN=L", "GASNET_VERBOSEENV=1"}, "hello", []string{"2"})
	for _, want := range []string{"rank 0: polite progress: 2 ranks share this host's 1 CPUs", "rank 0: GOMAXPROCS=1", "rank 0: " + crowdedBarrier()} {
		if r.code != 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("taskset -c 0: exit %d, want 0 and %q in stderr:\n%s", r.code, want, r.stderr)
		}
	}
}
