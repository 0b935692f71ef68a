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
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
)

// TestCollectiveMismatch: when the ranks of a team call different
// collectives at the same point of the team's order, every rank's call
// returns an error wrapping ErrCollectiveMismatch (for a Scatter whose
// root passes Size()+1 parts, an error on every rank that says so, or the
// mismatch), and the job goes on: the next collective on the team, an
// all-reduce of the ranks, gives every rank 0+1+2+3 = 6, and the job ends
// with Exit(0) and nothing on stderr. Each case runs on 4 ranks with
// shared memory on (GASNET_SUPERNODE_MAXSIZE=0) and off (1), since on the
// whole job's team some collectives run through shared memory and others
// over messages.
func TestCollectiveMismatch(t *testing.T) {
	const n = 4
	for _, c := range []string{"allreduce-types", "split-allgather", "split-barrier", "scatter-parts"} {
		for _, shm := range []string{"0", "1"} {
			t.Run(fmt.Sprintf("%s/supernode=%s", c, shm), func(t *testing.T) {
				marker := t.Name()
				r := runMismatch(t, marker, []string{"GASNET_SPAWNFN=L", "GASNET_SUPERNODE_MAXSIZE=" + shm}, fmt.Sprint(n), c)
				var want []string
				for rank := range n {
					want = append(want, mismatchLine(rank, c), fmt.Sprintf("rank %d: next: sum %d", rank, n*(n-1)/2))
				}
				var got []string // no line: no entry, not one ""
				if s := strings.TrimSpace(r.stdout); s != "" {
					got = strings.Split(s, "\n")
				}
				if c == "scatter-parts" {
					got = scatterPartsSaid(got)
				}
				sort.Strings(got)
				sort.Strings(want)
				if d := cmp.Diff(want, got); r.code != 0 || d != "" || r.stderr != "" {
					t.Errorf("exit %d (want 0), output (-want +got):\n%s\nstderr:\n%s", r.code, d, r.stderr)
				}
				checkNoSurvivors(t, marker, 3*time.Second)
			})
		}
	}
}

// mismatchLine is the line rank prints for its call of case c: the
// mismatch, or for scatter-parts what scatterPartsSaid makes of its
// line.
func mismatchLine(rank int, c string) string {
	if c == "scatter-parts" {
		return fmt.Sprintf("rank %d: scatter-parts: mismatch, or an error naming the parts", rank)
	}
	return fmt.Sprintf("rank %d: %s: mismatch", rank, c)
}

// scatterPartsSaid replaces in lines each line of a rank whose Scatter
// returned the mismatch or an error whose text says "parts" with
// mismatchLine's, and leaves any other line as it is, for the diff.
func scatterPartsSaid(lines []string) []string {
	re := regexp.MustCompile(`^rank (\d+): scatter-parts: (mismatch|error: .*parts.*)$`)
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l
		if m := re.FindStringSubmatch(l); m != nil {
			out[i] = fmt.Sprintf("rank %s: scatter-parts: mismatch, or an error naming the parts", m[1])
		}
	}
	return out
}

// runMismatch runs the mismatch program with args under marker, bounded
// by 30 s (scaled): a hang of the collectives is not a wait of minutes.
// GASNET_HANG_WARN is its default, 10 s, set here so that the environment
// cannot turn it off: a correct job never waits that long in a collective,
// and a hung one has the console say, before the bound, which rank waits
// in which collective (or end the job). When the bound is reached the
// console is stopped with SIGTERM (it stops its workers), anything of the
// job still alive after 5 s is killed, and the test fails with everything
// the job printed: which ranks returned what, and where the others wait.
func runMismatch(t *testing.T, marker string, env []string, args ...string) result {
	t.Helper()
	bound := testbound.For(t, 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "mismatch"), args...)
	cmd.Env = append(append(os.Environ(), markerVar(marker), "GASNET_HANG_WARN=10s"), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 5 * time.Second // then SIGKILL, and no wait for the output of what it started
	err := cmd.Run()
	if ctx.Err() != nil {
		left := killMarked(marker)
		checkNoSurvivors(t, marker, 3*time.Second)
		t.Fatalf("mismatch %v: no end within %v (a hang); stopped the job (left after SIGTERM, killed: %q)\nstdout:\n%s\nstderr:\n%s",
			args, bound, left, out.String(), errb.String())
	}
	return result{exitCode(t, err), out.String(), errb.String()}
}
