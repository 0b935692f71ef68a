//go:build hierbench

package tests

// make hier-bench: collectives of ranks on namespace hosts (a real sshd in
// each, UDP between them) in two levels against one level and against
// UDP alone. Figures, printed with t.Logf; the build tag keeps them out of
// make test, which checks the same jobs for correctness (TestSSHHosts).

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestHierBench runs testam -coll on hosts of two ranks each (2 and 3
// hosts): the default (shared words within a host, messages among the
// hosts' leaders), GASNET_PSHM_BARRIER_HIER=0 (one level: messages among
// all ranks, through shared memory within a host) and
// GASNET_SUPERNODE_MAXSIZE=1 (UDP alone), and prints µs per operation and
// each ratio to the default's.
func TestHierBench(t *testing.T) {
	h := startHosts(t, 3)
	iters := "300"
	if v := os.Getenv("HIER_BENCH_ITERS"); v != "" {
		iters = v
	}
	modes := []struct{ name, env string }{
		{"two levels", "GASNET_PSHM_BARRIER_HIER=1"},
		{"one level", "GASNET_PSHM_BARRIER_HIER=0"},
		{"UDP alone", "GASNET_SUPERNODE_MAXSIZE=1"},
	}
	for _, hosts := range []int{2, 3} {
		var nodes strings.Builder
		for _, name := range h.names[:hosts] {
			fmt.Fprintf(&nodes, "%s\n%s\n", name, name)
		}
		file := t.TempDir() + "/nodes"
		os.WriteFile(file, []byte(nodes.String()), 0o644)
		n := 2 * hosts
		got := map[string]map[string]float64{}
		for _, m := range modes {
			env := append(sshEnv("", h.config), "GASNET_SSH_SERVERS=", "GASNET_SSH_NODEFILE="+file, m.env)
			r := run(t, t.Name(), env, "testam", strconv.Itoa(n), "-coll", "-iters", iters)
			if r.code != 0 {
				t.Fatalf("%s on %d hosts: exit %d\nstderr:\n%s", m.name, hosts, r.code, r.stderr)
			}
			got[m.name] = map[string]float64{}
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				f := strings.Fields(line)
				if len(f) > 5 {
					v, _ := strconv.ParseFloat(f[5], 64)
					got[m.name][f[0]] = v
				}
			}
		}
		t.Logf("%d hosts of 2 ranks, testam %d -coll -iters %s, µs per operation (ratio to two levels):", hosts, n, iters)
		for _, c := range []string{"barrier", "allgather", "broadcast", "allreduce"} {
			line := fmt.Sprintf("%-10s", c)
			base := got[modes[0].name][c]
			for _, m := range modes {
				v := got[m.name][c]
				line += fmt.Sprintf("  %s %8.1f (%.2f)", m.name, v, v/base)
			}
			t.Log(line)
		}
	}
}
