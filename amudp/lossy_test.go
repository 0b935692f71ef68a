package amudp

import (
	"hash/crc32"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"udpconduit/retransmit"
)

// lossyNet is an in-memory datagram network whose links drop, duplicate,
// reorder (by random delay) and delay datagrams, driven by a seeded RNG.
type lossyNet struct {
	mu        sync.Mutex
	rng       *rand.Rand
	drop, dup float64
	maxDelay  time.Duration
	nodes     map[netip.AddrPort]*lossyConn
	sent      atomic.Int64
	dropped   atomic.Int64
	dups      atomic.Int64
}

type packet struct {
	at   time.Time
	from netip.AddrPort
	b    []byte
}

type lossyConn struct {
	net    *lossyNet
	addr   netip.AddrPort
	mu     sync.Mutex
	queue  []packet
	kick   chan struct{}
	closed atomic.Bool
}

var _ Transport = (*lossyConn)(nil)

func newLossyNet(seed uint64, drop, dup float64, maxDelay time.Duration) *lossyNet {
	return &lossyNet{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), drop: drop, dup: dup,
		maxDelay: maxDelay, nodes: map[netip.AddrPort]*lossyConn{}}
}

func (n *lossyNet) listen(i int) *lossyConn {
	c := &lossyConn{net: n, addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 4000), kick: make(chan struct{}, 1)}
	n.mu.Lock()
	n.nodes[c.addr] = c
	n.mu.Unlock()
	return c
}

func (c *lossyConn) Send(b []byte, to netip.AddrPort) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	n := c.net
	n.sent.Add(1)
	n.mu.Lock()
	dst := n.nodes[to]
	copies := 1
	if n.rng.Float64() < n.drop {
		copies = 0
		n.dropped.Add(1)
	} else if n.rng.Float64() < n.dup {
		copies = 2
		n.dups.Add(1)
	}
	delays := make([]time.Duration, copies)
	for i := range delays {
		delays[i] = time.Duration(n.rng.Int64N(int64(n.maxDelay) + 1))
	}
	n.mu.Unlock()
	if dst == nil || dst.closed.Load() {
		return nil
	}
	now := time.Now()
	dst.mu.Lock()
	for _, d := range delays {
		dst.queue = append(dst.queue, packet{at: now.Add(d), from: c.addr, b: append([]byte(nil), b...)})
	}
	dst.mu.Unlock()
	dst.Wake()
	return nil
}

// Recv returns a datagram whose delay has passed; among those, the earliest
// due first, so random delays reorder.
func (c *lossyConn) Recv(b []byte) (int, netip.AddrPort, error) {
	if c.closed.Load() {
		return 0, netip.AddrPort{}, net.ErrClosed
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	best := -1
	for i, p := range c.queue {
		if !p.at.After(now) && (best < 0 || p.at.Before(c.queue[best].at)) {
			best = i
		}
	}
	if best < 0 {
		return 0, netip.AddrPort{}, ErrNoData
	}
	p := c.queue[best]
	c.queue = append(c.queue[:best], c.queue[best+1:]...)
	return copy(b, p.b), p.from, nil
}

func (c *lossyConn) Wait(timeout time.Duration) error {
	c.mu.Lock()
	now := time.Now()
	for _, p := range c.queue {
		if d := p.at.Sub(now); d < timeout {
			timeout = d
		}
	}
	c.mu.Unlock()
	if timeout <= 0 {
		return nil
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.kick:
	case <-t.C:
	}
	return nil
}

func (c *lossyConn) Wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *lossyConn) LocalAddr() netip.AddrPort        { return c.addr }
func (c *lossyConn) SetBuffers(int) (int, int, error) { return 1 << 20, 1 << 20, nil }
func (c *lossyConn) Close() error                     { c.closed.Store(true); return nil }

// TestExactlyOnceUnderLoss: thousands of random short/medium/long requests
// between 4 endpoints over links with 30% loss, 10% duplication and random
// delay (reordering). Every request handler and every reply handler runs
// exactly once, and every payload arrives intact.
func TestExactlyOnceUnderLoss(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run("seed"+string(rune('0'+seed)), func(t *testing.T) { runLossy(t, seed) })
	}
}

func runLossy(t *testing.T, seed uint64) {
	const N = 4
	perRank := 1500
	if testing.Short() {
		perRank = 300
	}
	const region = 4096
	lnet := newLossyNet(seed, 0.30, 0.10, 300*time.Microsecond)
	rc := retransmit.Config{Initial: 20 * time.Millisecond, Backoff: 2, Max: 0, MinRTO: time.Millisecond}
	eps := make([]*Endpoint, N)
	addrs := make([]netip.AddrPort, N)
	for i := range eps {
		c := lnet.listen(i)
		var err error
		if eps[i], err = NewEndpoint(c, Config{Rank: i, Secret: []byte("lossy"), NetworkDepth: 16, Retransmit: rc, Spin: 50 * time.Microsecond}); err != nil {
			t.Fatal(err)
		}
		addrs[i] = c.addr
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
		e.Register(130, func(tk *Token, args []uint32, p []byte) {
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
		e.Register(131, func(tk *Token, args []uint32, p []byte) {
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
	case <-time.After(90 * time.Second):
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
	var st Stats
	for _, e := range eps {
		s := e.Stats()
		st.Retransmits += s.Retransmits
		st.DupRequests += s.DupRequests
		st.DupReplies += s.DupReplies
		st.ReplyResends += s.ReplyResends
	}
	t.Logf("sent %d, dropped %d, duplicated %d; retransmits %d, duplicate requests %d, reply resends %d, duplicate replies %d",
		lnet.sent.Load(), lnet.dropped.Load(), lnet.dups.Load(), st.Retransmits, st.DupRequests, st.ReplyResends, st.DupReplies)
	if lnet.dropped.Load() == 0 || st.Retransmits == 0 || st.DupRequests == 0 {
		t.Error("the network lost nothing: the test proved nothing")
	}
}
