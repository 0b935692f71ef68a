package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestDirectLaunchHosts: mpiexec.hydra starting the tasks directly on two
// network-namespace hosts (uch1, uch2, each with its own address and
// host name), its proxies reached over ssh: hello, testcore and three
// exit scenarios of testexit across the hosts; a task that never starts, named by a rank of its own host, and a
// host none of whose tasks starts, named by rank 0; and a
// rank stopped (SIGSTOP) on the host other than rank 0's, which ends the
// job within GASNET_LIVENESS_TIMEOUT with nothing left, in a job of 3
// and of 2, and rank 0 stopped in a job of 2.
func TestDirectLaunchHosts(t *testing.T) {
	h := startHosts(t, 2)
	wrap := filepath.Join(t.TempDir(), "ssh.sh")
	if err := os.WriteFile(wrap, []byte("#!/bin/sh\nexec ssh -F "+h.config+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	l := directLauncher{"mpich-hosts", []string{"mpiexec.hydra", "-launcher", "ssh", "-launcher-exec", wrap, "-iface", consoleDev, "-hosts", "uch1,uch2", "-n"},
		needCommand("mpiexec.hydra", "mpich")}
	t.Run("hello", func(t *testing.T) {
		r := directLaunch(t, l, 4, nil, "", "hello", "a b")
		var want []string
		for i := range 4 {
			want = append(want, fmt.Sprintf(`hello from rank %d of 4 on uch%d args=["a b"]`, i, 1+i%2))
		}
		got := strings.Split(strings.TrimSpace(r.stdout), "\n")
		sort.Strings(got)
		if d := cmp.Diff(want, got); d != "" || r.code != 0 {
			t.Errorf("hello: exit %d, output (-want +got):\n%s\nstderr:\n%s", r.code, d, r.stderr)
		}
		r = directLaunch(t, l, 4, nil, "", "testcore", "-msgs", "300")
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "every request and reply ran exactly once, every checksum matched") {
			t.Errorf("testcore on 4 tasks: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		// The job's end crosses the hosts: Exit on rank 0 reaches ranks
		// computing without polling, an Exit in a handler of a rank on
		// the other host ends the job with its code, and so does a
		// SIGINT to the last rank, there.
		for _, c := range []struct{ k, want int }{{5, 5}, {11, 11}, {4, 130}} {
			if r := directLaunch(t, l, 4, nil, "", "testexit", fmt.Sprint(c.k)); r.code != c.want {
				t.Errorf("testexit %d: exit %d, want %d\nstderr:\n%s", c.k, r.code, c.want, r.stderr)
			}
		}
		checkNoSurvivors(t, t.Name(), 3*time.Second)
	})
	// A task missing on the second host is named by a rank there; a
	// host none of whose tasks starts, by rank 0's hub, which Hydra's
	// PMI-2 fence, waiting for a node's own tasks only, lets start.
	for _, c := range []struct{ skip, want string }{
		{"3", "rank 1 of 4: rank 3 on this host (uch2) did not start, or did not reach conduit.Init, within GASNET_CONNECT_TIMEOUT=3s"},
		{"1 3", "rank 1, rank 3 did not connect to rank 0 within 4s of the launcher's fence (GASNET_CONNECT_TIMEOUT=3s"},
	} {
		t.Run("missing-"+strings.ReplaceAll(c.skip, " ", "-"), func(t *testing.T) {
			skip := filepath.Join(t.TempDir(), "skip.sh")
			if err := os.WriteFile(skip, []byte("#!/bin/sh\nfor s in "+c.skip+"; do [ \"$PMI_RANK\" = \"$s\" ] && exit 0; done\nexec \"$@\"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			r := directLaunch(t, l, 4, []string{"GASNET_CONNECT_TIMEOUT=3s"}, skip, "hello")
			if r.code == 0 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stdout, "hello from") {
				t.Errorf("tasks %s missing: exit %d, want non-zero, %q and no job\nstdout:\n%s\nstderr:\n%s", c.skip, r.code, c.want, r.stdout, r.stderr)
			}
			checkNoSurvivors(t, t.Name(), 3*time.Second)
		})
	}
	// Rank 1 stopped on uch2: with rank 2 beside rank 0 on uch1, and
	// alone with rank 0 (no rank on rank 0's host for it to kill); rank
	// 0 stopped on uch1, found by rank 1 alone on uch2.
	t.Run("stopped-1", func(t *testing.T) { directStopped(t, l, 3, 1, syscall.SIGSTOP) })
	t.Run("stopped-1-of-2", func(t *testing.T) { directStopped(t, l, 2, 1, syscall.SIGSTOP) })
	t.Run("stopped-0-of-2", func(t *testing.T) { directStopped(t, l, 2, 0, syscall.SIGSTOP) })
}
