//go:build wirebench

package tests

// make wire-bench: the network path between two hosts, each a network
// namespace, over a veth link with Ethernet's MTU (network A, 1500) and
// with jumbo frames (network B, 9000), next to the raw-UDP floors of
// scripts/netbench/udpfloor.c run between the same two addresses. make
// net-bench measures the same on loopback, whose 64 KiB MTU leaves a
// datagram one copy in and one out; here the kernel fragments and
// reassembles large datagrams as it does between real hosts. Figures,
// printed with t.Logf; the build tag keeps them out of make test.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestWireBench alternates, WIRE_BENCH_ROUNDS times (default 3), the floors
// and testam 2 in each protection mode on each network, and prints a table
// per network of the medians and their ratios to the floors, as make
// net-bench does. WIRE_BENCH_ENV adds a variable to testam's environment
// (GASNET_STATS=1, for one).
func TestWireBench(t *testing.T) {
	h := startHosts(t, 2)
	addNetB(t, h.names)
	floor := filepath.Join(t.TempDir(), "udpfloor")
	if out, err := exec.Command("gcc", "-O2", "-o", floor, "../scripts/netbench/udpfloor.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc udpfloor.c: %v\n%s", err, out)
	}
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("WIRE_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const iters = 5000
	sizes := []int{64, 1024, 8192, 65000}
	nets := []struct{ name, prefix string }{
		{"A (MTU 1500)", netPrefix},
		{"B (MTU 9000)", netBPrefix},
	}
	modes := []struct{ name, env string }{
		{"header-only MAC", "GASNET_AUTH_PAYLOAD=0"},
		{"payload MAC (default)", "GASNET_AUTH_PAYLOAD=1"},
		{"encrypted", "GASNET_ENCRYPT=1"},
	}
	// got[net][key] holds each round's figure: "floor pp", "floor stream
	// B SIZE" (batch B), or "MODE TEST SIZE".
	got := map[string]map[string][]float64{}
	add := func(net, key string, v float64) {
		if got[net] == nil {
			got[net] = map[string][]float64{}
		}
		got[net][key] = append(got[net][key], v)
	}
	// runFloor runs udpfloor in uch1 against uch2 and returns the field of
	// its one line that holds the time.
	runFloor := func(prefix string, field int, args ...string) float64 {
		args = append(append([]string{"netns", "exec", h.names[0], floor}, args...), prefix+"1", h.names[1], prefix+"2")
		out, err := exec.Command("ip", args...).CombinedOutput()
		f := strings.Fields(string(out))
		if err != nil || len(f) <= field {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		v, err := strconv.ParseFloat(f[field], 64)
		if err != nil {
			t.Fatalf("udpfloor printed %q", out)
		}
		return v
	}
	for range rounds {
		for _, n := range nets {
			add(n.name, "floor pp", runFloor(n.prefix, 2, "pp", "8", strconv.Itoa(5*iters)))
			for _, s := range sizes {
				window, every := "1024", "64"
				if s >= 8192 {
					window, every = "64", "16"
				}
				for _, batch := range []string{"1", "32"} {
					add(n.name, "floor stream"+batch+" "+strconv.Itoa(s),
						runFloor(n.prefix, 3, "stream", strconv.Itoa(s), strconv.Itoa(5*iters), window, every, batch))
				}
			}
			for _, m := range modes {
				r := run(t, t.Name(), sshEnv(strings.Join(h.names, " "), h.config, m.env,
					"GASNET_WORKERIP="+n.prefix+"0/24", "GASNET_SUPERNODE_MAXSIZE=1", os.Getenv("WIRE_BENCH_ENV")),
					"testam", "2", "-sizes", "64,1024,8192,65000", "-iters", strconv.Itoa(iters))
				if r.code != 0 {
					t.Fatalf("%s, %s: testam: exit %d\nstderr:\n%s", n.name, m.name, r.code, r.stderr)
				}
				if r.stderr != "" {
					t.Logf("%s, %s: testam's stderr:\n%s", n.name, m.name, r.stderr)
				}
				// testam's lines: "NAME SIZE B ITERS iters VALUE unit ...".
				for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
					f := strings.Fields(line)
					if len(f) > 5 {
						v, _ := strconv.ParseFloat(f[5], 64)
						add(n.name, m.name+" "+f[0]+" "+f[1], v)
					}
				}
			}
		}
	}
	med := func(v []float64) float64 {
		if len(v) == 0 {
			return 0
		}
		s := slices.Clone(v)
		slices.Sort(s)
		return s[(len(s)-1)/2]
	}
	t.Logf("%d alternating rounds, medians; testam 2 -iters %d between uch1 and uch2 (ssh spawner, GASNET_WORKERIP on the network)", rounds, iters)
	for _, n := range nets {
		g := got[n.name]
		t.Logf("network %s", n.name)
		head := "| test | bytes |"
		for _, m := range modes {
			head += " " + m.name + " |"
		}
		t.Logf("%s raw floor | floor batched |", head)
		t.Logf("|---|---|---|---|---|---|---|")
		pp := med(g["floor pp"])
		row := "| short round trip, µs (ratio to floor) | 0 |"
		for _, m := range modes {
			v := med(g[m.name+" short_rtt 0"])
			row += fmt.Sprintf(" %.2f (%.2f) |", v, v/pp)
		}
		t.Logf("%s %.2f | - |", row, pp)
		for _, kind := range []string{"medium", "long"} {
			for _, s := range sizes {
				f1, f32 := med(g["floor stream1 "+strconv.Itoa(s)]), med(g["floor stream32 "+strconv.Itoa(s)])
				row := fmt.Sprintf("| %s flood, µs/msg (rate ratio to floor; to batched) | %d |", kind, s)
				for _, m := range modes {
					v := med(g[m.name+" "+kind+"_flood "+strconv.Itoa(s)])
					row += fmt.Sprintf(" %.2f (%.2f; %.2f) |", v, f1/v, f32/v)
				}
				t.Logf("%s %.2f | %.2f |", row, f1, f32)
			}
		}
	}
}
