package amudp_test

import (
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

// tableRouter routes each rank along a fixed list and knows the addresses
// of its sets.
type tableRouter struct {
	routes map[int][]netip.AddrPort
	known  map[int][]netip.AddrPort
	mu     sync.Mutex
	asked  []int
}

func (r *tableRouter) Route(rank int) []netip.AddrPort {
	r.mu.Lock()
	r.asked = append(r.asked, rank)
	r.mu.Unlock()
	return r.routes[rank]
}

func (r *tableRouter) Knows(rank int, a netip.AddrPort) bool {
	return slices.Contains(r.known[rank], a)
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// routedPair is two endpoints on lnet whose hosts have two more networks
// each, 10.1.0.0/24 and 10.2.0.0/24, besides the table's 10.0.0.0/24: rank
// 0's route to rank 1 tries 10.2 first, then 10.1, then the table's
// address; rank 1 knows rank 0's three addresses.
func routedPair(t *testing.T, lnet *amudptest.Network, rc retransmit.Config) ([2]*amudp.Endpoint, [2]*tableRouter) {
	t.Helper()
	var eps [2]*amudp.Endpoint
	var addrs [2]netip.AddrPort
	for i := range eps {
		c := lnet.Listen(i)
		lnet.Alias(c, ap("10.1.0."+string(rune('1'+i))+":4000"))
		lnet.Alias(c, ap("10.2.0."+string(rune('1'+i))+":4000"))
		var err error
		eps[i], err = amudp.NewEndpoint(c, amudp.Config{Rank: i, Secret: []byte("route"), Polite: true, Retransmit: rc, NetworkDepth: 8})
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = c.LocalAddr()
		t.Cleanup(func() { eps[i].Close() })
	}
	var routers [2]*tableRouter
	for i, e := range eps {
		if err := e.SetPeers(addrs[:]); err != nil {
			t.Fatal(err)
		}
		o := 1 - i
		h := string(rune('1' + o))
		all := []netip.AddrPort{ap("10.2.0." + h + ":4000"), ap("10.1.0." + h + ":4000"), ap("10.0.0." + h + ":4000")}
		routers[i] = &tableRouter{routes: map[int][]netip.AddrPort{o: all}, known: map[int][]netip.AddrPort{o: all}}
		e.SetRouter(routers[i])
	}
	return eps, routers
}

// introduce makes rank 0 hear from rank 1 (a round trip to the table's
// address): only then does it route rank 1, which has shown that it takes
// datagrams from rank 0's other addresses (wire.FlagRouted).
func introduce(t *testing.T, eps [2]*amudp.Endpoint) {
	t.Helper()
	eps[1].Register(140, func(tk *amudp.Token, _ []uint32, _ []byte) { tk.ReplyShort(141) })
	got := false
	eps[0].Register(141, func(*amudp.Token, []uint32, []byte) { got = true })
	if err := eps[0].RequestShort(1, 140); err != nil {
		t.Fatal(err)
	}
	for !got {
		if err := eps[1].Poll(); err != nil {
			t.Fatal(err)
		}
		if err := eps[0].Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if a, ok := eps[0].PeerAddr(1); a != ap("10.0.0.2:4000") || !ok {
		t.Fatalf("before routing, rank 0 sends to rank 1 at %v (confirmed %v), want the table's 10.0.0.2:4000", a, ok)
	}
}

// TestRouteWalksCandidates: rank 1's first address is cut off; rank 0's
// requests move to the next one after a timeout, each runs once, and the
// pair's traffic stays there, both ways. Cold: rank 0 starts sending
// before it has heard from rank 1, so that replies to requests sent to
// the table's address come after it routes rank 1, and must not confirm
// the address it then sends to.
func TestRouteWalksCandidates(t *testing.T) {
	for _, warm := range []bool{true, false} {
		t.Run(map[bool]string{true: "warm", false: "cold"}[warm], func(t *testing.T) { walkCandidates(t, warm) })
	}
}

func walkCandidates(t *testing.T, warm bool) {
	lnet := amudptest.New(1, 0, 0, 0)
	// Timeouts far above a round trip under -race on a loaded host: a
	// move is for the dead address, not for a slow reply.
	rc := retransmit.Config{Initial: 20 * time.Millisecond, Backoff: 2, Max: 80 * time.Millisecond, MinRTO: 20 * time.Millisecond}
	eps, routers := routedPair(t, lnet, rc)
	if warm {
		introduce(t, eps)
	}
	lnet.SetDown(ap("10.2.0.2:4000"), true)
	const n = 40
	var runs [n]int
	replies := 0
	eps[1].Register(130, func(tk *amudp.Token, args []uint32, _ []byte) {
		runs[args[0]]++
		tk.ReplyShort(131, args[0])
	})
	eps[0].Register(131, func(*amudp.Token, []uint32, []byte) { replies++ })
	done := make(chan error, 1)
	var stop atomic.Bool
	go func() { done <- eps[1].WaitUntil(stop.Load) }()
	for i := range n {
		if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].WaitUntil(func() bool { return replies == n }); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	eps[1].Wake()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if r != 1 {
			t.Errorf("request %d ran %d times", i, r)
		}
	}
	if a, ok := eps[0].PeerAddr(1); a != ap("10.1.0.2:4000") || !ok {
		t.Errorf("rank 0 sends to rank 1 at %v (confirmed %v), want 10.1.0.2:4000 confirmed", a, ok)
	}
	// Rank 1 answers where the requests came from: rank 0's 10.1 address.
	if a, _ := eps[1].PeerAddr(0); a != ap("10.1.0.1:4000") {
		t.Errorf("rank 1 sends to rank 0 at %v, want 10.1.0.1:4000", a)
	}
	s0, s1 := eps[0].Stats(), eps[1].Stats()
	// The move off the dead address, then a restart at it after each of
	// the first replies to requests sent to both (a busy peer looks the
	// same as a dead address), at most twice, and a move off it again.
	if s0.RouteMoves < 3 && warm || s0.RouteMoves < 1 {
		t.Errorf("%d moves along the route, want at least 3", s0.RouteMoves)
	}
	if s0.BadSource+s1.BadSource != 0 {
		t.Errorf("datagrams from a published address dropped: %d, %d", s0.BadSource, s1.BadSource)
	}
	if !slices.Equal(routers[0].asked, []int{1}) {
		t.Errorf("rank 0 asked its router for %v, want [1] once", routers[0].asked)
	}
}

// TestRouteUnknownSource: a datagram of the job from an address that is
// not one of the claimed rank's is dropped.
func TestRouteUnknownSource(t *testing.T) {
	lnet := amudptest.New(1, 0, 0, 0)
	eps, routers := routedPair(t, lnet, retransmit.Config{})
	introduce(t, eps)
	routers[1].known[0] = []netip.AddrPort{ap("10.1.0.1:4000")} // not 10.2.0.1
	ran := 0
	eps[1].Register(130, func(*amudp.Token, []uint32, []byte) { ran++ })
	// Rank 0's route starts at 10.2.0.2, so its datagrams leave from 10.2.0.1.
	if err := eps[0].RequestShort(1, 130, 1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testbound.For(t, 2*time.Second))
	for eps[1].Stats().BadSource == 0 && time.Now().Before(deadline) {
		eps[1].Poll()
		time.Sleep(100 * time.Microsecond)
	}
	if got := eps[1].Stats().BadSource; got == 0 || ran != 0 {
		t.Errorf("%d dropped from an unknown address, handler ran %d times; want some dropped and 0 runs", got, ran)
	}
}

// TestRouteNoneWorks: with every address of rank 1 cut off, the request is
// returned, naming each address tried.
func TestRouteNoneWorks(t *testing.T) {
	lnet := amudptest.New(1, 0, 0, 0)
	rc := retransmit.Config{Initial: 2 * time.Millisecond, Backoff: 2, Max: 8 * time.Millisecond, MinRTO: time.Millisecond}
	eps, _ := routedPair(t, lnet, rc)
	introduce(t, eps)
	for _, a := range []string{"10.0.0.2:4000", "10.1.0.2:4000", "10.2.0.2:4000"} {
		lnet.SetDown(ap(a), true)
	}
	var got []amudp.Returned
	eps[0].SetReturnedHandler(func(r amudp.Returned) { got = append(got, r) })
	if err := eps[0].RequestShort(1, 130, 1); err != nil {
		t.Fatal(err)
	}
	if err := eps[0].WaitUntil(func() bool { return len(got) > 0 }); err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{ap("10.2.0.2:4000"), ap("10.1.0.2:4000"), ap("10.0.0.2:4000")}
	if !slices.Equal(got[0].Tried, want) {
		t.Errorf("tried %v, want %v", got[0].Tried, want)
	}
	msg := got[0].String()
	for _, a := range want {
		if !strings.Contains(msg, a.String()) {
			t.Errorf("%q does not name %v", msg, a)
		}
	}
	if eps[0].Stats().RouteMoves < 2 {
		t.Errorf("%d moves along a route of 3 addresses before giving up", eps[0].Stats().RouteMoves)
	}
}

// TestRouteWaitsForPeer: a peer that has shown no router of its own gets
// datagrams at the table's address only, however many go to it.
func TestRouteWaitsForPeer(t *testing.T) {
	lnet := amudptest.New(1, 0, 0, 0)
	eps, routers := routedPair(t, lnet, retransmit.Config{})
	eps[1].SetRouter(nil)
	introduce(t, eps)
	for range 5 {
		introduce(t, eps)
	}
	if len(routers[0].asked) != 0 || eps[0].Stats().RouteMoves != 0 {
		t.Errorf("rank 0 routed a peer without a router: asked %v", routers[0].asked)
	}
}

// stall has rank 0 send rank 1 four requests (handler 130, which replies
// to 131) and poll alone for d, rank 1 polling not at all; it returns the
// count of the replies rank 0 has run.
func stall(t *testing.T, eps [2]*amudp.Endpoint, d time.Duration) *int {
	t.Helper()
	replies := new(int)
	eps[1].Register(130, func(tk *amudp.Token, args []uint32, _ []byte) { tk.ReplyShort(131, args[0]) })
	eps[0].Register(131, func(*amudp.Token, []uint32, []byte) { *replies++ })
	for i := range 4 {
		if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		eps[0].Poll()
	}
	return replies
}

// TestRouteBusyPeer: a peer that does not poll for a while, every address
// up, makes the sender walk on; once the peer answers, the pair ends on
// its first candidate, not where the walk happened to be.
func TestRouteBusyPeer(t *testing.T) {
	for run := range 4 {
		lnet := amudptest.New(uint64(run), 0, 0, 0)
		rc := retransmit.Config{Initial: 20 * time.Millisecond, Backoff: 2, Max: 160 * time.Millisecond, MinRTO: 20 * time.Millisecond}
		eps, _ := routedPair(t, lnet, rc)
		introduce(t, eps)
		// Rank 1 is busy for 100 ms while rank 0's requests wait (they
		// would be given up after 460 ms).
		replies := stall(t, eps, 100*time.Millisecond)
		var stop atomic.Bool
		done := make(chan error, 1)
		go func() { done <- eps[1].WaitUntil(stop.Load) }()
		bound := testbound.For(t, 2*time.Second)
		for i := 4; i < 40; i++ {
			if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
				t.Fatal(err)
			}
			for end := time.Now().Add(bound); *replies <= i; {
				eps[0].Poll()
				if time.Now().After(end) {
					a, ok := eps[0].PeerAddr(1)
					t.Fatalf("run %d: %d replies to %d requests after %v; rank 0 sends to %v (confirmed %v)\n0: %v\n1: %v", run, *replies, i+1, bound, a, ok, eps[0].Stats(), eps[1].Stats())
				}
			}
		}
		stop.Store(true)
		eps[1].Wake()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if a, ok := eps[0].PeerAddr(1); a != ap("10.2.0.2:4000") || !ok {
			t.Errorf("run %d: after %d moves, rank 0 sends to rank 1 at %v (confirmed %v), want its first candidate 10.2.0.2:4000", run, eps[0].Stats().RouteMoves, a, ok)
		}
	}
}

// TestRouteShortStall: a peer that does not poll for less than the
// initial timeout, after round trips that made the timeout a millisecond,
// does not send the pair off its first candidate: the walk waits
// GASNET_REQUESTTIMEOUT_INITIAL on an address (a loaded host's stall).
//
// The initial timeout is 200 ms scaled (testbound): under -race on a
// loaded machine this test can itself be off the CPU for 150 ms between
// the stall and rank 1's first poll, which is a longer stall than the one
// it makes. The stall stays 50 ms, 50 of rank 0's timeouts.
func TestRouteShortStall(t *testing.T) {
	lnet := amudptest.New(1, 0, 0, 0)
	initial := testbound.Scale(200 * time.Millisecond)
	rc := retransmit.Config{Initial: initial, Backoff: 2, Max: 10 * initial, MinRTO: time.Millisecond}
	eps, _ := routedPair(t, lnet, rc)
	introduce(t, eps) // a round trip of microseconds: a timeout of MinRTO
	// Rank 1 does not poll for 50 ms: 50 of rank 0's timeouts.
	replies := stall(t, eps, 50*time.Millisecond)
	for end := time.Now().Add(testbound.For(t, 5*time.Second)); *replies < 4 && time.Now().Before(end); {
		eps[1].Poll()
		eps[0].Poll()
	}
	if a, ok := eps[0].PeerAddr(1); *replies != 4 || a != ap("10.2.0.2:4000") || !ok || eps[0].Stats().RouteMoves != 0 {
		t.Errorf("%d replies of 4; rank 0 sends to rank 1 at %v (confirmed %v) after %d moves, want its first candidate 10.2.0.2:4000, confirmed, no move", *replies, a, ok, eps[0].Stats().RouteMoves)
	}
}

// TestRouteCrossingRequests: the two ranks' routes to each other start on
// different networks (rank 0 tries rank 1's 10.2 address first, rank 1
// rank 0's 10.1 one), and requests both ways cross every round: each
// side's address for the other settles and is confirmed instead of
// following the other's requests from network to network.
func TestRouteCrossingRequests(t *testing.T) {
	lnet := amudptest.New(1, 0, 0, 0)
	eps, routers := routedPair(t, lnet, retransmit.Config{})
	routers[1].routes[0] = []netip.AddrPort{ap("10.1.0.1:4000"), ap("10.2.0.1:4000"), ap("10.0.0.1:4000")}
	introduce(t, eps)
	got := [2]int{}
	bound := testbound.For(t, 2*time.Second)
	for i, e := range eps {
		e.Register(150, func(tk *amudp.Token, _ []uint32, _ []byte) { tk.ReplyShort(151) })
		e.Register(151, func(*amudp.Token, []uint32, []byte) { got[i]++ })
	}
	for round := range 200 {
		for i, e := range eps {
			if err := e.RequestShort(1-i, 150); err != nil {
				t.Fatal(err)
			}
		}
		for end := time.Now().Add(bound); got[0] <= round || got[1] <= round; {
			eps[0].Poll()
			eps[1].Poll()
			if time.Now().After(end) {
				a, ok := eps[0].PeerAddr(1)
				b, ok1 := eps[1].PeerAddr(0)
				t.Fatalf("round %d: replies %v after %v; rank 0 sends to %v (confirmed %v), rank 1 to %v (%v)\n0: %v\n1: %v", round, got, bound, a, ok, b, ok1, eps[0].Stats(), eps[1].Stats())
			}
		}
	}
	for i, e := range eps {
		if a, ok := e.PeerAddr(1 - i); !ok {
			t.Errorf("rank %d never confirmed an address of rank %d in 200 crossing rounds: at %v after %d moves", i, 1-i, a, e.Stats().RouteMoves)
		}
	}
}
