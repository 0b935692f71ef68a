package ifmatch

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func prefixes(s string) []netip.Prefix {
	var out []netip.Prefix
	for _, f := range strings.Fields(s) {
		out = append(out, netip.MustParsePrefix(f))
	}
	return out
}

// nets parses "addr/bits" or "addr/bits@mtu" fields.
func nets(s string) []Net {
	var out []Net
	for _, f := range strings.Fields(s) {
		p, m, _ := strings.Cut(f, "@")
		n := Net{Prefix: netip.MustParsePrefix(p)}
		if m != "" {
			n.MTU, _ = strconv.Atoi(m)
		}
		out = append(out, n)
	}
	return out
}

// show writes candidates as "local-remote" addresses, best first.
func show(c []Pair, mine, theirs []Net) []string {
	var out []string
	for _, p := range c {
		out = append(out, fmt.Sprintf("%v-%v", mine[p.Local].Prefix.Addr(), theirs[p.Remote].Prefix.Addr()))
	}
	return out
}

// mirror is c as the other rank of the pair sees it.
func mirror(c []Pair) []Pair {
	out := slices.Clone(c)
	for k := range out {
		out[k].Local, out[k].Remote = out[k].Remote, out[k].Local
	}
	return out
}

// TestCandidates: table cases, among them the seed's hard ones
// (asymmetric interface counts, no common subnet but a route), and the
// three-host layout of the issue (network A on h1, h2, h3; network B on h1
// and h2; the same container bridge address on each).
func TestCandidates(t *testing.T) {
	h1 := "10.1.0.1/24 10.2.0.1/24 172.17.0.1/16"
	h2 := "10.2.0.2/24 10.1.0.2/24 172.17.0.1/16"
	h3 := "10.1.0.3/24 172.17.0.1/16"
	for _, tc := range []struct {
		name         string
		mine, theirs string
		want         []string // for ranks 0 and 1
	}{
		{"two networks shared, bridge never", h1, h2, []string{"10.2.0.1-10.2.0.2", "10.1.0.1-10.1.0.2", "10.1.0.1-10.2.0.2", "10.2.0.1-10.1.0.2"}},
		{"one network shared", h1, h3, []string{"10.1.0.1-10.1.0.3", "10.2.0.1-10.1.0.3"}},
		{"asymmetric counts", "10.0.0.1/24", "10.0.0.2/24 10.9.0.2/24 192.168.5.2/24", []string{"10.0.0.1-10.0.0.2", "10.0.0.1-10.9.0.2", "10.0.0.1-192.168.5.2"}},
		{"no common subnet, routed", "10.0.1.1/24", "10.0.9.2/24", []string{"10.0.1.1-10.0.9.2"}},
		{"families apart", "10.0.0.1/24 fd00::1/64", "fd00::2/64 10.0.0.2/24", []string{"fd00::1-fd00::2", "10.0.0.1-10.0.0.2"}},
		{"IPv6 only, routed", "fd00:1::1/64", "fd00:2::2/64", []string{"fd00:1::1-fd00:2::2"}},
		{"no common family", "10.0.0.1/24", "fd00::2/64", nil},
		{"loopback only to itself", "127.0.0.1/8", "10.0.0.2/24", nil},
		{"link-local only on its subnet", "fe80::1/64 fd00::1/64", "fe80::2/64", []string{"fe80::1-fe80::2"}},
		{"one host", "10.0.0.1/24 10.1.0.1/24", "10.0.0.1/24 10.1.0.1/24", []string{"10.1.0.1-10.1.0.1", "10.0.0.1-10.0.0.1"}},
		{"jumbo frames first", "10.1.0.1/24@1500 10.2.0.1/24@9000 172.17.0.1/16@1500", "10.2.0.2/24@9000 10.1.0.2/24@1500 172.17.0.1/16@1500",
			[]string{"10.2.0.1-10.2.0.2", "10.1.0.1-10.1.0.2", "10.1.0.1-10.2.0.2", "10.2.0.1-10.1.0.2"}},
		// Each shared subnet has an end of 1500: a tie, rotated; of the
		// pairs across subnets, the one of jumbo frames at both ends first.
		{"jumbo frames on one side only", "10.1.0.1/24@1500 10.2.0.1/24@9000", "10.1.0.2/24@9000 10.2.0.2/24@1500",
			[]string{"10.2.0.1-10.2.0.2", "10.1.0.1-10.1.0.2", "10.2.0.1-10.1.0.2", "10.1.0.1-10.2.0.2"}},
	} {
		mine, theirs := nets(tc.mine), nets(tc.theirs)
		got := Candidates(mine, theirs, 0, 1)
		if d := cmp.Diff(tc.want, show(got, mine, theirs)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
		if d := cmp.Diff(mirror(got), Candidates(theirs, mine, 1, 0)); d != "" {
			t.Errorf("%s: the other rank's candidates are not the mirror (-mirror +theirs):\n%s", tc.name, d)
		}
	}
}

// TestSpread: between two hosts with two shared networks, the pairs of
// their ranks spread over both, evenly enough.
func TestSpread(t *testing.T) {
	h1, h2 := nets("10.1.0.1/24 10.2.0.1/24"), nets("10.1.0.2/24 10.2.0.2/24")
	first := map[int]int{}
	for a := range 32 {
		for b := 32; b < 64; b++ {
			first[Candidates(h1, h2, a, b)[0].Local]++
		}
	}
	if first[0] < 400 || first[1] < 400 {
		t.Errorf("first choices over the two networks: %v of 1024 rank pairs", first)
	}
}

// TestJumboFirst: between two hosts whose shared networks differ in MTU,
// every pair of their ranks takes the network of jumbo frames first.
func TestJumboFirst(t *testing.T) {
	h1, h2 := nets("10.1.0.1/24@1500 10.2.0.1/24@9000"), nets("10.1.0.2/24@1500 10.2.0.2/24@9000")
	for a := range 16 {
		for b := 16; b < 32; b++ {
			if c := Candidates(h1, h2, a, b); h1[c[0].Local].MTU != 9000 || h2[c[0].Remote].MTU != 9000 {
				t.Fatalf("ranks %d and %d: first %v", a, b, show(c, h1, h2))
			}
		}
	}
}

// TestMaxMatchingOptimal: on random small graphs the matching weighs as
// much as the best one found by trying every assignment, and uses each
// address once.
func TestMaxMatchingOptimal(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n, m := 1+r.IntN(5), 1+r.IntN(5)
		w := make([][]int, n)
		for i := range w {
			w[i] = make([]int, m)
			for j := range w[i] {
				if r.IntN(3) > 0 {
					w[i][j] = score(Net{netip.MustParsePrefix("10.0.0.1/24"), r.IntN(3) * 4000},
						Net{netip.MustParsePrefix(fmt.Sprintf("10.0.%d.2/24", r.IntN(2))), 9000})
				}
			}
		}
		got := maxMatching(w)
		total := 0
		rows, cols := map[int]bool{}, map[int]bool{}
		for _, e := range got {
			if rows[e[0]] || cols[e[1]] || w[e[0]][e[1]] == 0 {
				t.Fatalf("%v: matching %v reuses an address or takes a missing edge", w, got)
			}
			rows[e[0]], cols[e[1]] = true, true
			total += w[e[0]][e[1]]
		}
		if best := bruteBest(w, 0, map[int]bool{}); total != best {
			t.Fatalf("%v: matching %v weighs %d, the best %d", w, got, total, best)
		}
	}
}

func bruteBest(w [][]int, i int, used map[int]bool) int {
	if i == len(w) {
		return 0
	}
	best := bruteBest(w, i+1, used) // row i unmatched
	for j := range w[i] {
		if !used[j] && w[i][j] != 0 {
			used[j] = true
			best = max(best, w[i][j]+bruteBest(w, i+1, used))
			used[j] = false
		}
	}
	return best
}

// FuzzCandidatesAgree: whatever the two hosts' addresses and the ranks,
// both ranks of a pair get the same candidates, mirrored; every candidate
// has a weight and appears once, heavier before lighter within the
// matched prefix and within the rest, and the matched prefix uses each
// address at most once.
func FuzzCandidatesAgree(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5}, []byte{3, 4, 7, 8}, 0, 1)
	f.Add([]byte{9, 9, 1}, []byte{1, 2}, 5, 5)
	pool := nets("10.1.0.1/24 10.1.0.2/24@9000 10.2.0.1/24 10.2.0.2/24@1500 172.17.0.1/16 10.3.0.7/16@9000 " +
		"127.0.0.1/8 fd00::1/64 fd00::2/64@1500 fd00:9::1/48 fe80::1/64 fe80::2/64 192.168.1.1/32 10.1.0.3/25 ::1/128 10.2.7.7/8")
	pick := func(b []byte) []Net {
		var out []Net
		for _, c := range b[:min(len(b), 12)] {
			if p := pool[int(c)%len(pool)]; !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	f.Fuzz(func(t *testing.T, a, b []byte, ra, rb int) {
		mine, theirs := pick(a), pick(b)
		got := Candidates(mine, theirs, ra, rb)
		if d := cmp.Diff(mirror(got), Candidates(theirs, mine, rb, ra)); d != "" {
			t.Fatalf("%v / %v, ranks %d %d: the other side differs (-mirror +theirs):\n%s", mine, theirs, ra, rb, d)
		}
		seen := map[[2]int]bool{}
		for _, p := range got {
			if p.Weight == None || seen[[2]int{p.Local, p.Remote}] {
				t.Fatalf("%v / %v: candidates %v: a pair without weight or twice", mine, theirs, got)
			}
			seen[[2]int{p.Local, p.Remote}] = true
		}
	})
}

// BenchmarkCandidates: one pair of hosts with 2, 8 and 32 addresses each,
// on as many shared subnets.
func BenchmarkCandidates(b *testing.B) {
	for _, n := range []int{2, 8, 32} {
		var h1, h2 []Net
		for i := range n {
			h1 = append(h1, Net{netip.MustParsePrefix(fmt.Sprintf("10.%d.0.1/24", i)), 1500})
			h2 = append(h2, Net{netip.MustParsePrefix(fmt.Sprintf("10.%d.0.2/24", n-1-i)), 1500})
		}
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for b.Loop() {
				Candidates(h1, h2, 3, 7)
			}
		})
	}
}

// TestRoutable: the kernel's answer for this host's loopback, for an
// address it does not have and across families.
func TestRoutable(t *testing.T) {
	lo, other := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	if !Routable(lo, other) {
		t.Error("127.0.0.1 does not route to 127.0.0.2")
	}
	if Routable(netip.MustParseAddr("192.0.2.77"), other) {
		t.Error("an address this host does not have routes")
	}
	if Routable(lo, netip.MustParseAddr("::1")) {
		t.Error("IPv4 routes to IPv6")
	}
}

// TestUsable: down interfaces, loopback (unless the job is on one host),
// IPv6 link-local addresses and, with GASNET_WORKERIP's prefixes,
// addresses outside them are not candidates.
func TestUsable(t *testing.T) {
	ifaces := []Iface{
		{Name: "lo", Up: true, Loopback: true, Addrs: prefixes("127.0.0.1/8 ::1/128")},
		{Name: "eth0", Up: true, Addrs: prefixes("10.1.0.5/24 fe80::5/64 fd00::5/64")},
		{Name: "ib0", Up: true, Addrs: prefixes("10.2.0.5/16")},
		{Name: "eth1", Up: false, Addrs: prefixes("192.168.9.5/24")},
		{Name: "docker0", Up: true, Addrs: prefixes("172.17.0.1/16")},
	}
	str := func(ns []Net) string {
		var ps []netip.Prefix
		for _, n := range ns {
			ps = append(ps, n.Prefix)
		}
		return fmt.Sprint(ps)
	}
	for _, tc := range []struct {
		name     string
		oneHost  bool
		restrict string
		want     string
	}{
		{"several hosts", false, "", "[10.1.0.5/24 fd00::5/64 10.2.0.5/16 172.17.0.1/16]"},
		{"one host", true, "", "[127.0.0.1/8 ::1/128 10.1.0.5/24 fd00::5/64 10.2.0.5/16 172.17.0.1/16]"},
		{"restricted", false, "10.2.0.0/16 fd00::/8", "[fd00::5/64 10.2.0.5/16]"},
		{"restricted to one address", false, "10.1.0.5/32", "[10.1.0.5/24]"},
		{"restricted to nothing here", false, "10.99.0.0/16", "[]"},
	} {
		var keep func(netip.Addr) bool
		if tc.restrict != "" {
			in := prefixes(tc.restrict)
			keep = func(a netip.Addr) bool {
				return slices.ContainsFunc(in, func(p netip.Prefix) bool { return p.Contains(a) })
			}
		}
		if got := str(Usable(ifaces, tc.oneHost, keep)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestInterfaces: this host's interfaces include an up loopback with
// 127.0.0.1 in 127.0.0.0/8.
func TestInterfaces(t *testing.T) {
	ifaces, err := Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ifaces {
		if f.Loopback && f.Up && slices.Contains(f.Addrs, netip.MustParsePrefix("127.0.0.1/8")) {
			return
		}
	}
	t.Errorf("no up loopback with 127.0.0.1/8 among %+v", ifaces)
}
