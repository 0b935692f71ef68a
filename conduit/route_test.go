package conduit

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/ifmatch"
	"github.com/udpconduit/udpconduit/spawn"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

// TestWorkerNets: what a worker binds and publishes, by its host's
// interfaces and GASNET_WORKERIP.
func TestWorkerNets(t *testing.T) {
	ifaces := []ifmatch.Iface{
		{Name: "lo", Up: true, Loopback: true, MTU: 65536, Addrs: []netip.Prefix{pfx("127.0.0.1/8")}},
		{Name: "eth0", Up: true, MTU: 1500, Addrs: []netip.Prefix{pfx("10.77.0.1/24")}},
		{Name: "ib0", Up: true, MTU: 9000, Addrs: []netip.Prefix{pfx("10.78.0.1/24"), pfx("fd00:78::1/64")}},
		{Name: "down0", Up: false, MTU: 1500, Addrs: []netip.Prefix{pfx("10.79.0.1/24")}},
	}
	v4 := func(a netip.Addr) bool { return a.Is4() }
	for _, tc := range []struct {
		name  string
		local string
		keep  func(netip.Addr) bool
		bind  string
		nets  string
	}{
		{"loopback: the console's host", "127.0.0.1", nil, "127.0.0.1", ""},
		{"every network, the console's first", "10.78.0.1", nil, "::", "10.78.0.1/24@9000 10.77.0.1/24@1500 fd00:78::1/64@9000"},
		{"IPv4 only kept", "10.77.0.1", v4, "0.0.0.0", "10.77.0.1/24@1500 10.78.0.1/24@9000"},
		{"one address kept", "10.77.0.1", func(a netip.Addr) bool { return a == netip.MustParseAddr("10.77.0.1") }, "10.77.0.1", ""},
		{"local on no interface listed", "192.0.2.5", v4, "0.0.0.0", "192.0.2.5/32@0 10.77.0.1/24@1500 10.78.0.1/24@9000"},
	} {
		bind, nets := workerNets(netip.MustParseAddr(tc.local), ifaces, tc.keep)
		var got []string
		for _, n := range nets {
			got = append(got, n.Prefix.String()+"@"+strconv.Itoa(n.MTU))
		}
		if bind.String() != tc.bind || strings.Join(got, " ") != tc.nets {
			t.Errorf("%s: bind %v, publish %q; want %v, %q", tc.name, bind, strings.Join(got, " "), tc.bind, tc.nets)
		}
	}
}

// threeHosts is the layout of DESIGN.md §7.2's namespace test: network A
// (10.77.0.0/24) on h1, h2 and h3, network B (10.78.0.0/24, jumbo frames)
// on h1 and h2, and the same bridge address on each; one rank a host,
// and rank 3 on h1 with rank 0; rank 4 on h4, on a network of its own
// (10.99.0.0/24) that only a router joins to the others.
func threeHosts() ([]netip.AddrPort, [][]spawn.Net) {
	bridge := spawn.Net{Prefix: pfx("172.17.0.1/16"), MTU: 1500}
	h1 := []spawn.Net{{Prefix: pfx("10.77.0.1/24"), MTU: 1500}, {Prefix: pfx("10.78.0.1/24"), MTU: 9000}, bridge}
	h2 := []spawn.Net{{Prefix: pfx("10.77.0.2/24"), MTU: 1500}, {Prefix: pfx("10.78.0.2/24"), MTU: 9000}, bridge}
	h3 := []spawn.Net{{Prefix: pfx("10.77.0.3/24"), MTU: 1500}, bridge}
	addrs := []netip.AddrPort{
		netip.MustParseAddrPort("10.77.0.1:5000"), netip.MustParseAddrPort("10.77.0.2:5001"),
		netip.MustParseAddrPort("10.77.0.3:5002"), netip.MustParseAddrPort("10.77.0.1:5003"),
		netip.MustParseAddrPort("10.99.0.4:5004"),
	}
	h4 := []spawn.Net{{Prefix: pfx("10.99.0.4/24"), MTU: 1500}, {Prefix: pfx("192.168.4.4/24"), MTU: 1500}}
	return addrs, [][]spawn.Net{h1, h2, h3, h1, h4}
}

// TestRouterRoutes: h1–h2 over B first, then A; with h3 over A alone; the
// bridge never; ranks of one host at their table address; a candidate
// this host cannot route left out.
func TestRouterRoutes(t *testing.T) {
	addrs, nets := threeHosts()
	r := newRouter(0, addrs, nets, true)
	r.routable = func(local, remote netip.Addr) bool { return false }
	str := func(as []netip.AddrPort) string { return joinAddrs(as) }
	for _, tc := range []struct {
		to   int
		want string
	}{
		{1, "10.78.0.2:5001 10.77.0.2:5001"},
		{2, "10.77.0.3:5002"},
		{3, ""},
		{4, "10.99.0.4:5004"}, // no route: the table's address alone
	} {
		if got := str(r.Route(tc.to)); got != tc.want {
			t.Errorf("route to rank %d: %q, want %q", tc.to, got, tc.want)
		}
	}
	// Rank 1 sees the mirror.
	if got := str(newRouter(1, addrs, nets, false).Route(0)); got != "10.78.0.1:5000 10.77.0.1:5000" {
		t.Errorf("route from rank 1 to 0: %q", got)
	}
	// Pairs across subnets go in when the kernel routes them.
	r.routable = func(local, remote netip.Addr) bool { return remote.Is4() && remote.As4()[0] == 192 }
	if got := str(r.Route(4)); got != "192.168.4.4:5004 10.99.0.4:5004" {
		t.Errorf("route to rank 4 with 192.168/16 routed: %q", got)
	}
	if d := cmp.Diff([]int{1, 2, 4}, sortedKeys(r)); d != "" {
		t.Errorf("recorded routes (-want +got):\n%s", d)
	}
}

func sortedKeys(r *router) []int {
	var out []int
	for k := 0; k < 8; k++ {
		if _, ok := r.routed[k]; ok {
			out = append(out, k)
		}
	}
	return out
}

// TestRouterKnows: a rank's published addresses on its port, and nothing
// else, are its.
func TestRouterKnows(t *testing.T) {
	addrs, nets := threeHosts()
	r := newRouter(0, addrs, nets, false)
	for _, tc := range []struct {
		rank int
		addr string
		want bool
	}{
		{1, "10.78.0.2:5001", true},
		{1, "10.77.0.2:5001", true},
		{1, "[::ffff:10.78.0.2]:5001", true},
		{1, "10.78.0.2:5002", false}, // another port
		{1, "10.78.0.1:5001", false}, // h1's
		{2, "10.78.0.2:5002", false},
		{9, "10.77.0.1:5000", false},
	} {
		if got := r.Knows(tc.rank, netip.MustParseAddrPort(tc.addr)); got != tc.want {
			t.Errorf("rank %d at %s: %v, want %v", tc.rank, tc.addr, got, tc.want)
		}
	}
}

// TestDescribeTried: the line of a rank that gave up on a peer after
// several addresses names both ranks' hosts and every address tried.
func TestDescribeTried(t *testing.T) {
	j := &Job{rank: 0, hosts: []string{"uch1", "uch2"}}
	r := amudp.Returned{Reason: amudp.ReasonTimeout, Dest: 1, Kind: amudp.KindShortRequest, Handler: 130,
		Addr:  netip.MustParseAddrPort("10.77.0.2:5001"),
		Tried: []netip.AddrPort{netip.MustParseAddrPort("10.78.0.2:5001"), netip.MustParseAddrPort("10.77.0.2:5001")}}
	want := "rank 1 on uch2 (10.78.0.2:5001 or 10.77.0.2:5001, tried in turn) is unreachable from uch1: a short-request to it (handler 130) is undeliverable: the peer sent nothing for the give-up time"
	if got := j.describe(r); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
