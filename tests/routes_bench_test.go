//go:build routesbench

package tests

// make routes-bench: what choosing each pair's addresses costs and buys on
// the namespace hosts of TestMultiHomed (network A on three hosts, B with
// jumbo frames on two, the same bridge address on each). Figures, printed
// with t.Logf; the build tag keeps them out of make test, which checks the
// same jobs for correctness.

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRoutesBench alternates, ROUTES_BENCH_ROUNDS times (default 5), the
// default (every address published, each pair routed and probed) with
// GASNET_WORKERIP=10.77.0.0/24 (each worker publishes its address on A
// alone: no routing, no probe, as GASNet's udp-conduit binds one address),
// and prints the medians and their ratios: the startup and exit of hello
// on the three hosts, and testam between h1 and h2 (over B when routed,
// over A when pinned).
func TestRoutesBench(t *testing.T) {
	h := startHosts(t, 3)
	addNetB(t, h.names[:2])
	addBridges(t, h.names)
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("ROUTES_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	modes := []struct{ name, env string }{
		{"routed", "GASNET_VERBOSE_ROUTES=0"},
		{"pinned to A", "GASNET_WORKERIP=" + netPrefix + "0/24"},
	}
	servers := strings.Join(h.names, " ")
	hello := map[string][]float64{}
	am := map[string]map[string][]float64{}
	for range rounds {
		for _, m := range modes {
			start := time.Now()
			r := run(t, t.Name(), sshEnv(servers, h.config, m.env), "hello", "3")
			if r.code != 0 {
				t.Fatalf("%s: hello: exit %d\nstderr:\n%s", m.name, r.code, r.stderr)
			}
			hello[m.name] = append(hello[m.name], float64(time.Since(start).Microseconds())/1000)
			r = run(t, t.Name(), sshEnv(strings.Join(h.names[:2], " "), h.config, m.env, "GASNET_SUPERNODE_MAXSIZE=1"),
				"testam", "2", "-sizes", "65000", "-iters", "3000")
			if r.code != 0 {
				t.Fatalf("%s: testam: exit %d\nstderr:\n%s", m.name, r.code, r.stderr)
			}
			if am[m.name] == nil {
				am[m.name] = map[string][]float64{}
			}
			// testam's lines: "NAME SIZE B ITERS iters VALUE unit ...".
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				f := strings.Fields(line)
				if len(f) > 5 {
					v, _ := strconv.ParseFloat(f[5], 64)
					am[m.name][f[0]+" "+f[1]] = append(am[m.name][f[0]+" "+f[1]], v)
				}
			}
		}
	}
	med := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[(len(s)-1)/2]
	}
	a, b := modes[0].name, modes[1].name
	t.Logf("%d alternating rounds, medians; %s against %s (ratio %s/%s):", rounds, a, b, a, b)
	t.Logf("hello 3 on three hosts, start to exit: %.0f ms against %.0f ms (%.2f)", med(hello[a]), med(hello[b]), med(hello[a])/med(hello[b]))
	for _, k := range []string{"short_rtt 0", "medium_rtt 65000", "medium_flood 65000", "long_flood 65000"} {
		x, y := am[a][k], am[b][k]
		if len(x) == 0 || len(y) == 0 {
			continue
		}
		t.Logf("testam 2, h1-h2, %s: %.2f µs against %.2f (%.2f)", k, med(x), med(y), med(x)/med(y))
	}
}
