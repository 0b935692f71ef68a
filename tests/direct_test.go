package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
)

// Direct launch: PMI launchers (srun --mpi=pmi2, mpiexec.hydra) start a
// program's tasks as the job's ranks, without a console.

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
		{"srun", []string{"srun", "--mpi=pmi2", "-O", "-n"}, 2, needSlurm},
		{"mpich", []string{"mpiexec.hydra", "-n"}, 1, needCommand("mpiexec.hydra", "mpich")},
	} {
		t.Run(l.name, func(t *testing.T) {
			l.setup(t)
			for _, n := range []int{4, 8} {
				l.setup(t)
				ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
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
	{"srun", []string{"srun", "--mpi=pmi2", "-O", "-n"}, needSlurm},
	{"mpich", []string{"mpiexec.hydra", "-n"}, needCommand("mpiexec.hydra", "mpich")},
}

// directLaunch runs prog with args as n tasks of launcher l directly
// (GASNET_DIRECT_LAUNCH's default), through wrap (a command that runs the rest of
// its arguments) when it is not empty.
func directLaunch(t *testing.T, l directLauncher, n int, env []string, wrap, prog string, args ...string) result {
	t.Helper()
	l.setup(t) // for srun: a SLURM with room, nothing completing
	ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
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
// the job non-zero. A rank still computing when rank 0 calls Exit(5),
// starved across the job's end (testexit 38) or beside a busy process,
// ends with 5, not the launcher's kill. Nothing of the job is left.
func TestDirectLaunchExits(t *testing.T) {
	for _, l := range directLaunchers {
		t.Run(l.name, func(t *testing.T) {
			l.setup(t)
			for _, tc := range []struct {
				k, want int
				crash   bool
				named   string
				env     []string
				busy    bool // a CPU-bound process of the test's beside the job
			}{
				{k: 2, want: 0}, {k: 3, want: 3}, {k: 5, want: 5}, {k: 8, want: 1, named: "rank 1: rank 0 ended without calling conduit.Exit"},
				{k: 11, want: 11}, {k: 14, want: 14}, {k: 21, want: 1}, {k: 25, want: 25}, {k: 26, want: 26},
				{k: 4, want: 130, named: "rank 2 was signalled to stop (interrupt)"}, {k: 15, want: 2, crash: true, named: "rank 2: rank 0 ended without calling conduit.Exit"},
				{k: 17, want: 137, crash: true},
				// A rank starved (stopped) across the job's end: its
				// own grace period ends it with the job's code, not the
				// launcher's kill (9 under Hydra, 137 under srun).
				{k: 38, want: 5, env: []string{"GASNET_EXIT_TIMEOUT=1s"}},
				{k: 38, want: 5, env: []string{"GASNET_EXIT_TIMEOUT=1s"}, busy: true},
				{k: 5, want: 5, busy: true},
				// Ranks 0 and 1 computing on one P for 4 s after a
				// barrier they slept in answer the hub's pings, and
				// rank 0's hub goes on pinging (TestComputingRankAnswers).
				{k: 39, want: 0, env: computingEnv},
			} {
				env := tc.env
				if tc.k == 2 {
					env = append(env, allReturnWindow(t))
				}
				stop := func() {}
				if tc.busy {
					stop = busyBeside(t)
				}
				r := directLaunch(t, l, 3, env, "", "testexit", fmt.Sprint(tc.k))
				stop()
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
// ends a running job, non-zero under srun; under Hydra the ranks say so
// (code 130), and Hydra's own status is not checked: after a Ctrl-C it
// is 0 about one run in ten on a loaded machine, every rank having
// exited 130 (seen with a wrapper logging each rank's status). Nothing
// of the job is left.
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
			t.Run(fmt.Sprintf("%s-stopped-%d", l.name, stopped), func(t *testing.T) { directStopped(t, l, 3, stopped, syscall.SIGSTOP) })
		}
		t.Run(l.name+"-killed-1", func(t *testing.T) { directStopped(t, l, 3, 1, syscall.SIGKILL) })
		t.Run(l.name+"-interrupt", func(t *testing.T) {
			l.setup(t)
			ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
			defer cancel()
			argv := append(append([]string{}, l.cmd[1:]...), "3", filepath.Join(bin, "testam"), "-iters", "100000000")
			cmd := exec.CommandContext(ctx, l.cmd[0], argv...)
			cmd.Env = append(os.Environ(), markerVar(t.Name()))
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Interrupt once the launcher and the tasks run.
			for deadline := time.Now().Add(testbound.For(t, 30*time.Second)); len(survivors(t.Name())) < 4 && time.Now().Before(deadline); {
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
			switch said := "aborted the job (code 130): rank "; {
			case ctx.Err() != nil || err == nil && l.name != "mpich":
				t.Errorf("interrupted: %v (timed out: %v), want a non-zero end\nstderr:\n%s", err, ctx.Err() != nil, errb.String())
			case l.name == "mpich" && (!strings.Contains(errb.String(), said) || !strings.Contains(errb.String(), "was signalled to stop (interrupt)")):
				t.Errorf("interrupted: %v; no rank says it %q...signalled to stop (interrupt)\nstderr:\n%s", err, said, errb.String())
			}
			checkNoSurvivors(t, t.Name(), 3*time.Second)
		})
	}
}

// directStopped sends sig (SIGSTOP, SIGKILL) to rank `stopped` of a
// running job of n tasks under l and checks that the job ends non-zero,
// saying why (but for Hydra's kill, which Hydra reports itself at once),
// with nothing left.
func directStopped(t *testing.T, l directLauncher, n, stopped int, sig syscall.Signal) {
	l.setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
	defer cancel()
	argv := append(append([]string{}, l.cmd[1:]...), strconv.Itoa(n), filepath.Join(bin, "testam"), "-iters", "100000000")
	cmd := exec.CommandContext(ctx, l.cmd[0], argv...)
	cmd.Env = append(os.Environ(), markerVar(t.Name()), "GASNET_LIVENESS_TIMEOUT=2s")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := 0
	for deadline := time.Now().Add(testbound.For(t, 30*time.Second)); pid == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
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
	for _, dir := range marked(marker) {
		b, _ := os.ReadFile(dir + "/environ")
		if !bytes.Contains(b, []byte("\x00PMI_RANK="+strconv.Itoa(rank)+"\x00")) {
			continue
		}
		if cmdline, _ := os.ReadFile(dir + "/cmdline"); !bytes.Contains(cmdline, []byte("testam")) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		return pid
	}
	return 0
}

// busyBeside starts a CPU-bound process of the test's own beside the job
// (other work on the machine) and returns what stops it.
func busyBeside(t *testing.T) func() {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
}
