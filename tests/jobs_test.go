package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// Running the tests' jobs: a program of the job under a marker, its
// output and its end, each wait bounded.

type result struct {
	code           int
	stdout, stderr string
}

// run runs a job under a unique marker in its environment and bounds its time.
func run(t *testing.T, marker string, env []string, prog string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
	defer cancel()
	return runCmd(t, ctx, exec.CommandContext(ctx, filepath.Join(bin, prog), args...), marker, env, prog, args)
}

// runCmd runs cmd, a job's program prog (for messages), with the marker and
// env added to this process's environment, and returns its exit code (128+N
// for signal N) and output; the test fails if ctx expires first, once it
// has killed the job's processes that are left (a launcher waiting for
// resources, its tasks).
func runCmd(t *testing.T, ctx context.Context, cmd *exec.Cmd, marker string, env []string, prog string, args []string) result {
	t.Helper()
	cmd.Env = append(append(os.Environ(), markerVar(marker)), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// Once ctx has killed cmd, the processes it started may hold its
	// output open; Wait waits no longer for them.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		left := killMarked(marker)
		t.Fatalf("%s %v: timed out; killed what was left of the job: %q\nstderr:\n%s", prog, args, left, errb.String())
	}
	return result{exitCode(t, err), out.String(), errb.String()}
}

// startWaitingJob starts a 4-worker printer job and returns once every
// worker waits in the network.
func startWaitingJob(t *testing.T, marker string, env ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	return startPrinter(t, marker, 4, "wait", "waiting", append([]string{"LINES=1"}, env...)...)
}

// startPrinter starts a printer job of n workers in mode (its first
// argument: "wait", "late", "flood") with env added, and returns once ready
// appears n times in its output. The job is killed when the test ends.
func startPrinter(t *testing.T, marker string, n int, mode, ready string, env ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "printer"), fmt.Sprint(n), mode)
	cmd.Env = append(append(os.Environ(), markerVar(marker)), env...)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 5 * time.Second // after a kill, no wait for the output of what it started
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); killMarked(marker) })
	bound := testbound.For(t, 20*time.Second)
	for deadline := time.Now().Add(bound); strings.Count(out.String(), ready) != n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%q does not appear %d times within %v; the job's output:\n%s", ready, n, bound, out.String())
		}
	}
	return cmd, out
}

// lastRankPID returns the pid of rank n-1 of a "late" or "flood" printer
// job, from its "ready rank R pid P" line.
func lastRankPID(t *testing.T, out *syncBuffer, n int) int {
	t.Helper()
	return rankPID(t, out, n-1)
}

// rankPID returns the pid of rank r of a "late" or "flood" printer job.
func rankPID(t *testing.T, out *syncBuffer, r int) int {
	t.Helper()
	var pid int
	for _, l := range strings.Split(out.String(), "\n") {
		fmt.Sscanf(l, fmt.Sprintf("ready rank %d pid %%d", r), &pid)
	}
	if pid <= 0 {
		t.Fatalf("no pid for rank %d in\n%s", r, out.String())
	}
	return pid
}

// waitEnd waits for cmd to end, failing the test after within (the time
// the end takes on a quiet machine; scaled).
func waitEnd(t *testing.T, cmd *exec.Cmd, out *syncBuffer, within time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	bound := testbound.For(t, within)
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatalf("the job did not end within %v:\n%s", bound, out.String())
	}
}

// waitFor waits for cond, failing the test after 20 s (scaled).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	bound := testbound.For(t, 20*time.Second)
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v", bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sortedLines is the lines of s, sorted.
func sortedLines(s string) []string {
	got := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(got)
	return got
}

// allReturnWindow is the GASNET_EXIT_TIMEOUT of a job whose ranks all
// return from main (testexit 2), which ends with 0 only if the others
// follow the first within it: its default, 2 s, scaled, since on a
// loaded machine a launcher's last task can end later than that (seen
// under one: rank 1,3,2 ended ... while 1 other ranks still run).
func allReturnWindow(t *testing.T) string {
	return "GASNET_EXIT_TIMEOUT=" + testbound.For(t, 2*time.Second).Round(time.Millisecond).String()
}

// exitCode is the exit code of a command whose Run returned err: 128+N
// for signal N, as a shell says; an error that is no exit fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		if err != nil {
			t.Fatal(err)
		}
		return 0
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ee.ExitCode()
}
