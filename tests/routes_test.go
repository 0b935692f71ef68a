package tests

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Hosts of several networks (DESIGN.md §7.2): on top of startHosts'
// network A (10.77.0.0/24, the only one the console, in the root
// namespace, reaches), network B joins the first hosts (10.78.0.0/24 on
// a bridge of its own, with jumbo frames: the data network), and every
// host has the same container-bridge address, 172.17.0.1/16, on a bridge
// without ports that reaches nothing.
const netBPrefix = "10.78.0."

// addNetB puts hosts on network B, as eth1 with an MTU of 9000.
func addNetB(t *testing.T, hosts []string) {
	t.Helper()
	ip(t, "-n", switchNS, "link", "add", "br1", "type", "bridge")
	ip(t, "-n", switchNS, "link", "set", "br1", "mtu", "9000", "up")
	for i, name := range hosts {
		peer := name + "b"
		ip(t, "link", "add", "eth1", "netns", name, "mtu", "9000", "type", "veth", "peer", "name", peer, "netns", switchNS, "mtu", "9000")
		ip(t, "-n", switchNS, "link", "set", peer, "master", "br1", "up")
		ip(t, "-n", name, "addr", "add", fmt.Sprintf("%s%d/24", netBPrefix, i+1), "dev", "eth1")
		ip(t, "-n", name, "link", "set", "eth1", "up")
	}
}

// addBridges gives every host the same container-bridge address on a
// bridge with no ports, docker0, as Docker makes.
func addBridges(t *testing.T, hosts []string) {
	t.Helper()
	for _, name := range hosts {
		ip(t, "-n", name, "link", "add", "docker0", "type", "bridge")
		ip(t, "-n", name, "addr", "add", "172.17.0.1/16", "dev", "docker0")
		ip(t, "-n", name, "link", "set", "docker0", "up")
	}
}

// countRules counts, in a host, the UDP datagrams it sends: over B, to a
// bridge address, and over A to each other host.
func countRules(hosts int) string {
	var b strings.Builder
	b.WriteString("table inet ucroutes {\n chain out {\n  type filter hook output priority 0; policy accept;\n")
	b.WriteString("  oifname \"eth1\" meta l4proto udp counter comment \"b\"\n")
	b.WriteString("  ip daddr 172.17.0.0/16 meta l4proto udp counter comment \"bridge\"\n")
	b.WriteString("  oifname \"docker0\" meta l4proto udp counter comment \"bridge\"\n")
	for i := 1; i <= hosts; i++ {
		fmt.Fprintf(&b, "  oifname \"eth0\" ip daddr %s%d meta l4proto udp counter comment \"a%d\"\n", netPrefix, i, i)
	}
	b.WriteString(" }\n}\n")
	return b.String()
}

var namedCounter = regexp.MustCompile(`counter packets (\d+) bytes \d+ comment "(\w+)"`)

// counters returns the packets each named counter of namespace ns
// counted, summed by name.
func counters(t *testing.T, ns string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range namedCounter.FindAllStringSubmatch(inNS(t, ns, "", "nft", "list", "table", "inet", "ucroutes"), -1) {
		n, _ := strconv.Atoi(m[1])
		out[m[2]] += n
	}
	return out
}

// TestMultiHomed runs testcore over ssh on three hosts of which two share a
// second network with jumbo frames, and all three the same bridge address,
// with no GASNET_WORKERIP: the console reaches the workers over A alone.
// The workers publish their addresses; h1–h2 traffic goes over B, traffic
// with h3 over A, and nothing to the bridge address, by the hosts' own
// packet counters and by what each rank says it routed
// (GASNET_VERBOSE_ROUTES).
func TestMultiHomed(t *testing.T) {
	needCommand("nft", "nftables")(t)
	h := startHosts(t, 3)
	addNetB(t, h.names[:2])
	addBridges(t, h.names)
	for _, ns := range h.names {
		nftRules(t, ns, countRules(3))
	}
	t.Cleanup(func() {
		for _, ns := range h.names {
			exec.Command("ip", "netns", "exec", ns, "nft", "flush", "ruleset").Run()
		}
	})
	r := run(t, t.Name(), sshEnv(strings.Join(h.names, " "), h.config, "GASNET_VERBOSE_ROUTES=1", "GASNET_STATS=1"), "testcore", "3", "-msgs", "1000")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "every request and reply ran exactly once, every checksum matched") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	c := make([]map[string]int, 3)
	for i, ns := range h.names {
		c[i] = counters(t, ns)
	}
	t.Logf("UDP datagrams sent (over B; over A to h1, h2, h3; to the bridge): h1 %d; %d %d %d; %d, h2 %d; %d %d %d; %d, h3 %d; %d %d %d; %d",
		c[0]["b"], c[0]["a1"], c[0]["a2"], c[0]["a3"], c[0]["bridge"], c[1]["b"], c[1]["a1"], c[1]["a2"], c[1]["a3"], c[1]["bridge"],
		c[2]["b"], c[2]["a1"], c[2]["a2"], c[2]["a3"], c[2]["bridge"])
	for i := range 3 {
		if c[i]["bridge"] != 0 {
			t.Errorf("h%d sent %d datagrams to the bridge address", i+1, c[i]["bridge"])
		}
	}
	// Between h1 and h2, B carries the traffic; A only what went before
	// the ranks knew each other's addresses (the table's relay, a first
	// round trip).
	if c[0]["b"] < 4*c[0]["a2"] || c[1]["b"] < 4*c[1]["a1"] || c[0]["b"] < 100 {
		t.Errorf("h1–h2 traffic is not on B: h1 sent %d over B and %d to h2 over A; h2 %d over B and %d to h1 over A", c[0]["b"], c[0]["a2"], c[1]["b"], c[1]["a1"])
	}
	if c[2]["a1"] < 100 || c[2]["a2"] < 100 || c[0]["a3"] < 100 || c[1]["a3"] < 100 {
		t.Errorf("traffic with h3 is not on A: h3 sent %d to h1 and %d to h2, which sent it %d and %d", c[2]["a1"], c[2]["a2"], c[0]["a3"], c[1]["a3"])
	}
	// What the ranks say: rank 0 (h1) sends to rank 1 (h2) on B and to
	// rank 2 (h3) on A, each confirmed by replies; rank 2 to both on A.
	for _, want := range []string{
		`rank 0 routes: rank 1 at ` + netBPrefix + `2:\d+ \(confirmed; candidates ` + netBPrefix + `2:\d+ ` + netPrefix + `2:\d+\); rank 2 at ` + netPrefix + `3:\d+ \(confirmed`,
		`rank 1 routes: rank 0 at ` + netBPrefix + `1:\d+ \(confirmed; candidates ` + netBPrefix + `1:\d+ ` + netPrefix + `1:\d+\); rank 2 at ` + netPrefix + `3:\d+ \(confirmed`,
		`rank 2 routes: rank 0 at ` + netPrefix + `1:\d+ \(confirmed; candidates ` + netPrefix + `1:\d+\); rank 1 at ` + netPrefix + `2:\d+ \(confirmed`,
		`rank 0 publishes ` + netPrefix + `1/24 \(MTU 1500\), ` + netBPrefix + `1/24 \(MTU 9000\), 172.17.0.1/16 \(MTU 1500\) \(bound to 0.0.0.0\)`,
	} {
		if !regexp.MustCompile(want).MatchString(r.stderr) {
			t.Errorf("stderr lacks %s:\n%s", want, r.stderr)
		}
	}
	t.Run("GASNET_VERBOSEENV", func(t *testing.T) {
		r := run(t, t.Name(), sshEnv(strings.Join(h.names, " "), h.config, "GASNET_VERBOSEENV=1"), "hello", "3")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		want := `rank 2 publishes ` + netPrefix + `3/24 \(MTU 1500\), 172.17.0.1/16 \(MTU 1500\) \(bound to 0.0.0.0\)`
		if !regexp.MustCompile(want).MatchString(r.stderr) {
			t.Errorf("stderr lacks %s:\n%s", want, r.stderr)
		}
	})
	t.Run("GASNET_WORKERIP on A", func(t *testing.T) {
		for _, ns := range h.names { // counters from 0
			inNS(t, ns, "", "nft", "flush", "ruleset")
			nftRules(t, ns, countRules(3))
		}
		r := run(t, t.Name(), sshEnv(strings.Join(h.names, " "), h.config, "GASNET_WORKERIP=10.99.0.0/16,"+netPrefix+"0/24", "GASNET_VERBOSE_ROUTES=1"), "testcore", "3", "-msgs", "300")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		for i, ns := range h.names {
			if c := counters(t, ns); c["b"] != 0 || c["bridge"] != 0 {
				t.Errorf("h%d sent %d datagrams over B and %d to the bridge address", i+1, c["b"], c["bridge"])
			}
			want := fmt.Sprintf("rank %d publishes its table address alone (bound to %s%d)", i, netPrefix, i+1)
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
}

// TestIPv6Only runs hello and testcore over ssh on two namespace hosts
// whose only network is IPv6 (fd00:77::/64, the console fd00:77::fe): the
// console listens, the workers join and exchange datagrams on IPv6 alone,
// with GASNET_MASTERIP given as an IPv6 address and without.
func TestIPv6Only(t *testing.T) {
	h := startHostsOn(t, 2, true)
	servers := strings.Join(h.names, " ")
	for _, env := range [][]string{nil, {"GASNET_MASTERIP=" + console6IP}} {
		t.Run("hello"+strings.Join(env, ""), func(t *testing.T) {
			r := run(t, t.Name(), sshEnv(servers, h.config, env...), "hello", "2", "x")
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
			}
			if d := cmp.Diff(helloLines(h.names, `["x"]`), sortedLines(r.stdout)); d != "" {
				t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
			}
		})
	}
	t.Run("testcore", func(t *testing.T) {
		r := run(t, t.Name(), sshEnv(servers, h.config, "GASNET_VERBOSE_ROUTES=1"), "testcore", "2", "-msgs", "500")
		if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "every request and reply ran exactly once, every checksum matched") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		// Each worker is known by its IPv6 address, which it binds.
		for i := range 2 {
			want := fmt.Sprintf("rank %d publishes its table address alone (bound to %s%d)", i, net6Prefix, i+1)
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
	})
}

// TestRouteBrokenAfterStart: while ranks 0 and 1 (h1, h2) send requests to
// rank 2 (h3), every datagram between h1 and h3 is dropped from then on:
// rank 0 names the pair (rank 2, its host and address, and its own host),
// and the job ends with code 1, the console's summary naming rank 2.
func TestRouteBrokenAfterStart(t *testing.T) {
	needCommand("nft", "nftables")(t)
	h := startHosts(t, 3)
	t.Cleanup(func() { exec.Command("ip", "netns", "exec", "uch3", "nft", "flush", "ruleset").Run() })
	env := sshEnv(strings.Join(h.names, " "), h.config, "LINES=0", "GASNET_LIVENESS_TIMEOUT=0",
		"GASNET_REQUESTTIMEOUT_INITIAL=1000", "GASNET_REQUESTTIMEOUT_MAX=500000", "GASNET_FORWARD_ENV=UDPCONDUIT_TEST_MARKER,LINES")
	cmd, out := startPrinter(t, t.Name(), 3, "flood", "ready rank", env...)
	nftRules(t, "uch3", "table inet ucbreak {\n chain in {\n  type filter hook input priority -10; policy accept;\n  ip saddr "+netPrefix+"1 meta l4proto udp drop\n }\n chain out {\n  type filter hook output priority -10; policy accept;\n  ip daddr "+netPrefix+"1 meta l4proto udp drop\n }\n}\n")
	waitEnd(t, cmd, out, 30*time.Second)
	s := out.String()
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, s)
	}
	line := regexp.MustCompile(`printer: rank 0: rank 2 on uch3 \(` + regexp.QuoteMeta(netPrefix) + `3:\d+\) is unreachable from uch1: `)
	if !line.MatchString(s) {
		t.Errorf("no line of rank 0 naming rank 2 on uch3 and itself on uch1:\n%s", s)
	}
	if !strings.Contains(s, " aborted the job (code 1): rank 2 on uch3") {
		t.Errorf("the console's summary does not name rank 2 on uch3:\n%s", s)
	}
	checkNoSurvivors(t, t.Name(), 3*time.Second)
}
