package amudp_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

// TestExactlyOnceUnderLoss: thousands of random short/medium/long requests
// between 4 endpoints over links with 30% loss, 10% duplication and random
// delay (reordering), and an attacker who sends 5% of the datagrams again
// 30 ms later and, for 5% of them, a copy with a bit flipped. Every request
// handler and every reply handler runs exactly once, every payload arrives
// intact, and no two datagrams are sealed under one nonce: with payloads
// authenticated (the default), encrypted, and with headers alone
// authenticated (without the bit flips, which its payloads do not resist).
//
// With give-up on (2.26 s here), no request is given up either: the peers
// are heard from all along, however many datagrams are lost, and only a
// peer's silence makes its requests undeliverable (DESIGN.md §5). Giving up
// on a request's own age instead gave up on dozens per run.
func TestExactlyOnceUnderLoss(t *testing.T) {
	never := retransmit.Config{Initial: 20 * time.Millisecond, Backoff: 2, Max: 0, MinRTO: time.Millisecond}
	giveUp := retransmit.Config{Initial: 20 * time.Millisecond, Backoff: 2, Max: time.Second, MinRTO: time.Millisecond}
	payload := amudp.Config{}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { runLossy(t, seed, never, payload) })
		t.Run(fmt.Sprintf("seed%d/give-up after %v", seed, giveUp.GiveUpAfter()), func(t *testing.T) { runLossy(t, seed, giveUp, payload) })
	}
	t.Run("seed4/encrypted", func(t *testing.T) { runLossy(t, 4, giveUp, amudp.Config{Encrypt: true}) })
	t.Run("seed5/headers only", func(t *testing.T) { runLossy(t, 5, giveUp, amudp.Config{HeaderOnlyAuth: true}) })
}

// nonceWatch is a Transport that records, for every datagram sent through
// any of a job's watches, its nonce (sender rank and counter) and a hash
// of its bytes, and fails the test when a nonce seals two different
// datagrams.
type nonceWatch struct {
	amudp.Transport
	t     *testing.T
	mu    *sync.Mutex
	seen  map[[12]byte][sha256.Size]byte
	count *atomic.Int64
}

func (w *nonceWatch) Send(b []byte, to netip.AddrPort) error {
	if len(b) >= wire.HeaderLen+wire.TagLen {
		var n [12]byte
		copy(n[:], b[8:20]) // Nonce and Src: wire.Header
		sum := sha256.Sum256(b)
		w.mu.Lock()
		if old, ok := w.seen[n]; ok && old != sum {
			w.t.Errorf("nonce %d of rank %d sealed two different datagrams", binary.LittleEndian.Uint64(n[:8]), binary.LittleEndian.Uint32(n[8:]))
		}
		w.seen[n] = sum
		w.mu.Unlock()
		w.count.Add(1)
	}
	return w.Transport.Send(b, to)
}

func runLossy(t *testing.T, seed uint64, rc retransmit.Config, mode amudp.Config) {
	const N = 4
	perRank := 1500
	if testing.Short() {
		perRank = 300
	}
	const region = 4096
	lnet := amudptest.New(seed, 0.30, 0.10, 300*time.Microsecond)
	lnet.SetReplay(0.05, 30*time.Millisecond)
	if !mode.HeaderOnlyAuth {
		lnet.SetForgery(0.05)
	}
	eps := make([]*amudp.Endpoint, N)
	addrs := make([]netip.AddrPort, N)
	var watched atomic.Int64
	seen := map[[12]byte][sha256.Size]byte{}
	var seenMu sync.Mutex
	for i := range eps {
		c := lnet.Listen(i)
		var err error
		cfg := mode
		cfg.Rank, cfg.Secret, cfg.NetworkDepth, cfg.Retransmit, cfg.Spin = i, []byte("lossy"), 16, rc, 50*time.Microsecond
		if eps[i], err = amudp.NewEndpoint(&nonceWatch{Transport: c, t: t, mu: &seenMu, seen: seen, count: &watched}, cfg); err != nil {
			t.Fatal(err)
		}
		addrs[i] = c.LocalAddr()
	}
	// runs[dst][src][id] counts request handler runs; replies[src][id] reply runs.
	var mu sync.Mutex
	runs := make([][][]int, N)
	replies := make([][]int, N)
	corrupt := 0
	for i := range runs {
		runs[i] = make([][]int, N)
		for j := range runs[i] {
			runs[i][j] = make([]int, perRank)
		}
		replies[i] = make([]int, perRank)
	}
	for i, e := range eps {
		if err := e.SetPeers(addrs); err != nil {
			t.Fatal(err)
		}
		e.SetSegment(make([]byte, N*region))
		e.Register(130, func(tk *amudp.Token, args []uint32, p []byte) {
			src, id, sum := args[0], args[1], args[2]
			mu.Lock()
			runs[i][src][id]++
			if crc32.ChecksumIEEE(p) != sum || int(src) != tk.Source() {
				corrupt++
			}
			mu.Unlock()
			if id%3 != 0 { // others get the automatic reply
				tk.ReplyMedium(131, p[:min(len(p), 8)], src, id, crc32.ChecksumIEEE(p[:min(len(p), 8)]))
			}
		})
		e.Register(131, func(tk *amudp.Token, args []uint32, p []byte) {
			mu.Lock()
			replies[i][args[1]]++
			if crc32.ChecksumIEEE(p) != args[2] {
				corrupt++
			}
			mu.Unlock()
		})
	}
	var finished atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, N)
	for i, e := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, uint64(i)))
			buf := make([]byte, region)
			for id := 0; id < perRank; id++ {
				dst := r.IntN(N - 1)
				if dst >= i {
					dst++
				}
				p := buf[:r.IntN(region)]
				for k := range p {
					p[k] = byte(r.Uint32())
				}
				args := []uint32{uint32(i), uint32(id), crc32.ChecksumIEEE(p)}
				var err error
				switch r.IntN(3) {
				case 0:
					args[2] = crc32.ChecksumIEEE(nil)
					err = e.RequestShort(dst, 130, args...)
				case 1:
					err = e.RequestMedium(dst, 130, p, args...)
				case 2:
					err = e.RequestLong(dst, 130, p, uint64(i*region), args...)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			if err := e.Drain(); err != nil {
				errs <- err
				return
			}
			finished.Add(1)
			for _, o := range eps {
				o.Wake()
			}
			// Keep serving the others until everyone is done.
			if err := e.WaitUntil(func() bool { return finished.Load() == N }); err != nil {
				errs <- err
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(testbound.For(t, 90*time.Second)):
		t.Fatalf("timed out: %d of %d ranks finished", finished.Load(), N)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	total := 0
	for dst := range runs {
		for src := range runs[dst] {
			for id, n := range runs[dst][src] {
				total += n
				if n > 1 {
					t.Errorf("request %d from %d ran %d times at %d", id, src, n, dst)
				}
			}
		}
	}
	if total != N*perRank {
		t.Errorf("%d request handler runs, want %d", total, N*perRank)
	}
	for src := range replies {
		for id, n := range replies[src] {
			want := 1
			if id%3 == 0 {
				want = 0
			}
			if n != want {
				t.Errorf("reply to request %d of %d ran %d times, want %d", id, src, n, want)
			}
		}
	}
	if corrupt != 0 {
		t.Errorf("%d corrupt payloads", corrupt)
	}
	var st amudp.Stats
	for _, e := range eps {
		s := e.Stats()
		st.Retransmits += s.Retransmits
		st.DupRequests += s.DupRequests
		st.DupReplies += s.DupReplies
		st.ReplyResends += s.ReplyResends
		st.Replays += s.Replays
		st.BadMAC += s.BadMAC
	}
	t.Logf("sent %d, dropped %d, duplicated %d, replayed %d, forged %d; retransmits %d, duplicate requests %d, reply resends %d, duplicate replies %d, replays %d, bad MAC %d; %d datagrams' nonces checked",
		lnet.Sent(), lnet.Dropped(), lnet.Duplicated(), lnet.Replayed(), lnet.Forged(), st.Retransmits, st.DupRequests, st.ReplyResends, st.DupReplies, st.Replays, st.BadMAC, watched.Load())
	if lnet.Dropped() == 0 || st.Retransmits == 0 || st.DupRequests == 0 || lnet.Replayed() == 0 {
		t.Error("the network lost or replayed nothing: the test proved nothing")
	}
	if lnet.Forged() > 0 && st.BadMAC < uint64(lnet.Forged())*9/10 {
		t.Errorf("%d forged datagrams, %d dropped as not opening", lnet.Forged(), st.BadMAC)
	}
	if watched.Load() != lnet.Sent() {
		t.Errorf("%d datagrams' nonces checked, %d sent", watched.Load(), lnet.Sent())
	}
}

// pair returns two polite endpoints on net, rank 1 served by a goroutine
// until the returned stop function is called. wrap, if not nil, wraps
// rank 0's socket.
func pair(t *testing.T, lnet *amudptest.Network, cfg amudp.Config, wrap func(amudp.Transport) amudp.Transport) (eps [2]*amudp.Endpoint, stop func()) {
	t.Helper()
	eps = newPair(t, lnet, cfg, wrap)
	var done atomic.Bool
	served := make(chan error, 1)
	go func() { served <- eps[1].WaitUntil(done.Load) }()
	return eps, func() {
		done.Store(true)
		eps[1].Wake()
		if err := <-served; err != nil {
			t.Errorf("rank 1: %v", err)
		}
		for _, e := range eps {
			e.Close()
		}
	}
}

// newPair makes two polite endpoints on lnet that know each other; rank 0's
// transport is wrapped by wrap when it is set.
func newPair(t *testing.T, lnet *amudptest.Network, cfg amudp.Config, wrap func(amudp.Transport) amudp.Transport) (eps [2]*amudp.Endpoint) {
	t.Helper()
	return newPairWrapped(t, lnet, cfg, 0, wrap)
}

// newPairWrapped is newPair with rank wrapped's transport wrapped.
func newPairWrapped(t *testing.T, lnet *amudptest.Network, cfg amudp.Config, wrapped int, wrap func(amudp.Transport) amudp.Transport) (eps [2]*amudp.Endpoint) {
	t.Helper()
	var addrs [2]netip.AddrPort
	for i := range eps {
		c := lnet.Listen(i)
		cfg.Rank, cfg.Secret, cfg.Polite = i, []byte("pair"), true
		var tr amudp.Transport = c
		if i == wrapped && wrap != nil {
			tr = wrap(c)
		}
		var err error
		if eps[i], err = amudp.NewEndpoint(tr, cfg); err != nil {
			t.Fatal(err)
		}
		addrs[i] = c.LocalAddr()
	}
	for _, e := range eps {
		if err := e.SetPeers(addrs[:]); err != nil {
			t.Fatal(err)
		}
	}
	return eps
}

// TestRequestBlocksWithoutCredit: with depth requests unanswered, the next
// request waits (every goroutine of the bubble is blocked, and it has not
// returned), and it goes out once the receiver polls and credit returns.
func TestRequestBlocksWithoutCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const depth = 4
		eps := newPair(t, amudptest.New(1, 0, 0, 0), amudp.Config{NetworkDepth: depth}, nil)
		defer eps[0].Close()
		defer eps[1].Close()
		ran := 0
		eps[1].Register(130, func(*amudp.Token, []uint32, []byte) { ran++ })
		drainServed(t, eps[0], beyondDepth(t, eps[0], 1, depth), serving(eps[1]))
		if ran != depth+1 {
			t.Errorf("%d handler runs, want %d", ran, depth+1)
		}
	})
}

// TestSlotWorksAfterGiveUp cuts a peer off until every request to it is
// given up, heals the link, and checks that every later request on every
// slot runs exactly once: a given-up request leaves a gap in its slot's
// sequence numbers, which the receiver must accept (serial-number
// arithmetic), not count as stale forever.
func TestSlotWorksAfterGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(7, 0, 0, 0)
		// Give up after 5+10+20+20 = 55 ms of silence.
		rc := retransmit.Config{Initial: 5 * time.Millisecond, Backoff: 2, Max: 20 * time.Millisecond, MinRTO: time.Millisecond}
		eps, stop := pair(t, lnet, amudp.Config{NetworkDepth: 4, Retransmit: rc}, nil)
		defer stop()
		var runs [3][200]int
		eps[1].Register(130, func(_ *amudp.Token, a []uint32, _ []byte) { runs[a[0]][a[1]]++ })
		var returned []amudp.Returned
		eps[0].SetReturnedHandler(func(r amudp.Returned) { returned = append(returned, r) })
		phase := func(ph, n int) {
			t.Helper()
			for id := range n {
				if err := eps[0].RequestShort(1, 130, uint32(ph), uint32(id)); err != nil {
					t.Fatalf("phase %d request %d: %v", ph, id, err)
				}
			}
			if err := eps[0].Drain(); err != nil {
				t.Fatalf("phase %d: %v", ph, err)
			}
		}
		phase(0, 100)
		lnet.SetDown(eps[1].LocalAddr(), true)
		phase(1, 20)
		if len(returned) != 20 {
			t.Fatalf("%d requests returned while the peer was cut off, want 20", len(returned))
		}
		for _, r := range returned {
			if r.Reason != amudp.ReasonTimeout || r.Dest != 1 {
				t.Errorf("returned %+v, want a timeout to rank 1", r)
			}
		}
		lnet.SetDown(eps[1].LocalAddr(), false)
		phase(2, 200)
		if len(returned) != 20 {
			t.Errorf("%d more requests returned after the link healed: %v", len(returned)-20, returned[20:])
		}
		for ph, want := range []int{100, 0, 200} {
			for id, n := range runs[ph] {
				if w := b2i(id < want); n != w {
					t.Errorf("phase %d request %d ran %d times, want %d", ph, id, n, w)
				}
			}
		}
		if s := eps[1].Stats(); s.Stale != 0 {
			t.Errorf("rank 1 counted %d requests stale", s.Stale)
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// slowSend is a socket whose Send returns only once every other goroutine
// of the synctest bubble is blocked: the peer has answered, and the reply
// has been handled by another goroutine while the sender is still in Send,
// so the request's credit comes back in the sender, not in a poll pass.
type slowSend struct {
	amudp.Transport
	one chan struct{} // synctest.Wait is for one goroutine at a time
}

func (s *slowSend) Send(b []byte, to netip.AddrPort) error {
	err := s.Transport.Send(b, to)
	s.one <- struct{}{}
	synctest.Wait()
	<-s.one
	return err
}

// TestCreditReturnWakesWaiters: goroutines that wait for credit are woken
// when it returns, whoever frees it, so more sending goroutines are never
// slower than one. On virtual time (synctest) the network takes no time at
// all, so the job must take none: any virtual time that passes is a
// goroutine sleeping past credit that had come back. The sender's Send is
// slowed (slowSend) so that credit comes back outside a poll pass.
func TestCreditReturnWakesWaiters(t *testing.T) {
	for _, senders := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("%d goroutines", senders), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slow := func(tr amudp.Transport) amudp.Transport { return &slowSend{tr, make(chan struct{}, 1)} }
				eps, stop := pair(t, amudptest.New(1, 0, 0, 0), amudp.Config{NetworkDepth: 1}, slow)
				defer stop()
				var ran atomic.Int64
				eps[1].Register(130, func(*amudp.Token, []uint32, []byte) { ran.Add(1) })
				start := time.Now()
				var wg sync.WaitGroup
				for range senders {
					wg.Go(func() {
						for range 2000 / senders {
							if err := eps[0].RequestShort(1, 130); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
				wg.Wait()
				if err := eps[0].Drain(); err != nil {
					t.Fatal(err)
				}
				if el := time.Since(start); el > 0 {
					t.Errorf("%d goroutines sending 2000 requests at depth 1 slept %v of virtual time", senders, el)
				}
				if ran.Load() != 2000/int64(senders)*int64(senders) {
					t.Errorf("%d handler runs", ran.Load())
				}
			})
		})
	}
}

// TestOneInFlightUnderHeavyLoss sends 2000 requests one at a time (depth
// 1) over links that lose 30% of datagrams each way, so that each attempt
// has about one chance in two: with give-up on (240 ms), none may be given
// up, since the peer answers all along; and the waits must stay near the
// RTT, so the run's virtual time stays within a few RTT timeouts per
// request. Doubling every wait while a lone request is unanswered made
// expected delays unbounded and gave requests up.
func TestOneInFlightUnderHeavyLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(11, 0.30, 0, 0)
		rc := retransmit.Config{Initial: 20 * time.Millisecond, Backoff: 2, Max: 100 * time.Millisecond, MinRTO: time.Millisecond}
		eps, stop := pair(t, lnet, amudp.Config{NetworkDepth: 1, Retransmit: rc}, nil)
		defer stop()
		runs := make([]int, 2000)
		eps[1].Register(130, func(_ *amudp.Token, a []uint32, _ []byte) { runs[a[0]]++ })
		var returned []amudp.Returned
		eps[0].SetReturnedHandler(func(r amudp.Returned) { returned = append(returned, r) })
		start := time.Now()
		for id := range runs {
			if err := eps[0].RequestShort(1, 130, uint32(id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := eps[0].Drain(); err != nil {
			t.Fatal(err)
		}
		el := time.Since(start)
		t.Logf("%v of virtual time, %d retransmissions, %d returned", el, eps[0].Stats().Retransmits, len(returned))
		if len(returned) > 0 {
			t.Errorf("%d requests given up while the peer answered; first: %v", len(returned), returned[0])
		}
		for id, n := range runs {
			if n != 1 {
				t.Errorf("request %d ran %d times", id, n)
			}
		}
		// About one attempt in two succeeds, and the RTT timeout here is
		// MinRTO (1 ms): a few ms per request on average.
		if per := el / time.Duration(len(runs)); per > 5*time.Millisecond {
			t.Errorf("%v per request on average; want a few RTT timeouts (1 ms each)", per)
		}
	})
}

// TestSilentPeerIsProbedOneRequestAtATime: with 64 requests in flight to a
// peer that is cut off for 3 s, the sender retransmits them all only while
// the silence is short (silentAfter), then one at a time (the others'
// timers run on, held back); once the link heals every request runs
// exactly once.
func TestSilentPeerIsProbedOneRequestAtATime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(11, 0, 0, 0)
		rc := retransmit.Config{Initial: 5 * time.Millisecond, Backoff: 2, Max: 30 * time.Second, MinRTO: time.Millisecond}
		eps, stop := pair(t, lnet, amudp.Config{NetworkDepth: 64, Retransmit: rc}, nil)
		defer stop()
		var runs [2][64]int
		eps[1].Register(130, func(_ *amudp.Token, a []uint32, _ []byte) { runs[a[0]][a[1]]++ })
		for id := range 64 { // an RTT estimate first
			eps[0].RequestShort(1, 130, 0, uint32(id))
		}
		if err := eps[0].Drain(); err != nil {
			t.Fatal(err)
		}
		before := eps[0].Stats()
		lnet.SetDown(eps[1].LocalAddr(), true)
		for id := range 64 {
			eps[0].RequestShort(1, 130, 1, uint32(id))
		}
		deadline := time.Now().Add(3 * time.Second)
		eps[0].WaitUntil(func() bool { return !time.Now().Before(deadline) })
		cut := eps[0].Stats()
		lnet.SetDown(eps[1].LocalAddr(), false)
		if err := eps[0].Drain(); err != nil {
			t.Fatal(err)
		}
		resent, held := cut.Retransmits-before.Retransmits, cut.HeldBack-before.HeldBack
		t.Logf("3 s cut off: %d retransmissions, %d held back", resent, held)
		// Without the rule every held-back retransmission would have
		// gone out (704, against 263 with it, most of them in the
		// first silentAfter).
		if held == 0 || 2*resent > resent+held {
			t.Errorf("%d retransmissions to a silent peer in 3 s and %d held back; want most held back", resent, held)
		}
		for ph := range 2 {
			for id, n := range runs[ph] {
				if n != 1 {
					t.Errorf("phase %d request %d ran %d times", ph, id, n)
				}
			}
		}
	})
}

// beyondDepth sends depth Short requests from e to rank dest's handler
// 130, then one more from another goroutine, and fails t unless that one
// waits for credit (inside a synctest bubble); it returns the channel
// the last request's error comes on.
func beyondDepth(t *testing.T, e *amudp.Endpoint, dest, depth int) <-chan error {
	t.Helper()
	for range depth {
		if err := e.RequestShort(dest, 130); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- e.RequestShort(dest, 130) }()
	synctest.Wait()
	select {
	case err := <-done:
		t.Fatalf("a request to rank %d beyond its depth of %d returned without credit (%v)", dest, depth, err)
	default:
	}
	return done
}
