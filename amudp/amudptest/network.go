// Package amudptest provides an in-memory datagram network for testing
// amudp endpoints deterministically: its links drop, duplicate, reorder
// (by random delay) and delay datagrams, driven by a seeded RNG, and a
// node can be cut off and healed. It uses only the clock and channels, so
// it also runs inside a testing/synctest bubble, where its delays and the
// endpoints' timers run on virtual time.
package amudptest

import (
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
)

// Network is a set of connected in-memory sockets.
type Network struct {
	mu        sync.Mutex
	rng       *rand.Rand
	drop, dup float64
	corrupt   float64
	replay    float64
	replayAge time.Duration
	maxDelay  time.Duration
	nodes     map[netip.AddrPort]*Conn
	aliases   map[*Conn][]netip.AddrPort
	down      map[netip.AddrPort]bool

	sent, dropped, dups, forged, replayed atomic.Int64
}

// SetReplay makes the network deliver, for a fraction p of the datagrams,
// a copy again age after the datagram (an attacker who records the
// traffic and sends it again later).
func (n *Network) SetReplay(p float64, age time.Duration) {
	n.mu.Lock()
	n.replay, n.replayAge = p, age
	n.mu.Unlock()
}

// Replayed counts the replayed copies delivered.
func (n *Network) Replayed() int64 { return n.replayed.Load() }

// SetForgery makes the network deliver, for a fraction p of the datagrams,
// a forged copy as well: the datagram with one random bit flipped, from the
// same source address (an attacker who sees the traffic and can spoof).
func (n *Network) SetForgery(p float64) {
	n.mu.Lock()
	n.corrupt = p
	n.mu.Unlock()
}

// Forged counts the forged copies delivered.
func (n *Network) Forged() int64 { return n.forged.Load() }

// New returns a network that drops a fraction drop of the datagrams,
// duplicates a fraction dup of the others, and delays each copy by a random
// time up to maxDelay (so datagrams overtake each other). seed fixes every
// random choice.
func New(seed uint64, drop, dup float64, maxDelay time.Duration) *Network {
	return &Network{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), drop: drop, dup: dup,
		maxDelay: maxDelay, nodes: map[netip.AddrPort]*Conn{}, aliases: map[*Conn][]netip.AddrPort{}, down: map[netip.AddrPort]bool{}}
}

// Listen returns node i's socket, at 10.0.0.(i+1):4000.
func (n *Network) Listen(i int) *Conn {
	c := &Conn{net: n, addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), 4000), kick: make(chan struct{}, 1)}
	n.mu.Lock()
	n.nodes[c.addr] = c
	n.mu.Unlock()
	return c
}

// Alias gives c another address, as a host has one per network: datagrams
// to it reach c, and those c sends to an address of the same /24 go out
// from it, as a kernel picks the source address of the route (others go
// from c's first address).
func (n *Network) Alias(c *Conn, addr netip.AddrPort) {
	n.mu.Lock()
	n.nodes[addr] = c
	n.aliases[c] = append(n.aliases[c], addr)
	n.mu.Unlock()
}

// source is c's address that a datagram to to goes out from. n.mu held.
func (n *Network) source(c *Conn, to netip.AddrPort) netip.AddrPort {
	want, _ := to.Addr().Prefix(24)
	for _, a := range n.aliases[c] {
		if p, _ := a.Addr().Prefix(24); p == want {
			return a
		}
	}
	return c.addr
}

// SetDown cuts the node at addr off (every datagram to or from it is
// dropped) when down is true, and heals it when false.
func (n *Network) SetDown(addr netip.AddrPort, down bool) {
	n.mu.Lock()
	n.down[addr] = down
	n.mu.Unlock()
}

// Sent, Dropped and Duplicated count datagrams handed to the network, lost
// (by chance or to a node that is down) and delivered twice.
func (n *Network) Sent() int64       { return n.sent.Load() }
func (n *Network) Dropped() int64    { return n.dropped.Load() }
func (n *Network) Duplicated() int64 { return n.dups.Load() }

type packet struct {
	at   time.Time
	from netip.AddrPort
	b    []byte
}

// Conn is one node's socket; it implements amudp.Transport.
type Conn struct {
	net    *Network
	addr   netip.AddrPort
	mu     sync.Mutex
	queue  []packet
	kick   chan struct{}
	closed atomic.Bool
}

var _ amudp.Transport = (*Conn)(nil)

// Send queues b at to's socket after the link's random fate.
func (c *Conn) Send(b []byte, to netip.AddrPort) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	n := c.net
	n.sent.Add(1)
	n.mu.Lock()
	dst := n.nodes[to]
	from := n.source(c, to)
	copies := 1
	switch {
	case n.down[to] || n.down[from]:
		copies = 0
		n.dropped.Add(1)
	case n.rng.Float64() < n.drop:
		copies = 0
		n.dropped.Add(1)
	case n.rng.Float64() < n.dup:
		copies = 2
		n.dups.Add(1)
	}
	var delays [2]time.Duration
	for i := range copies {
		delays[i] = time.Duration(n.rng.Int64N(int64(n.maxDelay) + 1))
	}
	flip := -1
	if n.corrupt > 0 && len(b) > 0 && n.rng.Float64() < n.corrupt {
		flip = n.rng.IntN(8 * len(b))
	}
	replay := n.replay > 0 && n.rng.Float64() < n.replay
	age := n.replayAge
	n.mu.Unlock()
	if dst == nil || dst.closed.Load() || copies == 0 {
		return nil
	}
	now := time.Now()
	dst.mu.Lock()
	for _, d := range delays[:copies] {
		dst.queue = append(dst.queue, packet{at: now.Add(d), from: from, b: append([]byte(nil), b...)})
	}
	if flip >= 0 {
		f := append([]byte(nil), b...)
		f[flip/8] ^= 1 << (flip % 8)
		dst.queue = append(dst.queue, packet{at: now, from: from, b: f})
		n.forged.Add(1)
	}
	if replay {
		dst.queue = append(dst.queue, packet{at: now.Add(age), from: from, b: append([]byte(nil), b...)})
		n.replayed.Add(1)
	}
	dst.mu.Unlock()
	dst.Wake()
	return nil
}

// Recv returns a datagram whose delay has passed; among those, the earliest
// due first, so random delays reorder.
func (c *Conn) Recv(b []byte) (int, netip.AddrPort, error) {
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
		return 0, netip.AddrPort{}, amudp.ErrNoData
	}
	p := c.queue[best]
	c.queue = append(c.queue[:best], c.queue[best+1:]...)
	return copy(b, p.b), p.from, nil
}

// Wait blocks until a queued datagram is due, Wake, or timeout.
func (c *Conn) Wait(timeout time.Duration) error {
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

// Wake makes a current or the next Wait return.
func (c *Conn) Wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// LocalAddr returns the node's address.
func (c *Conn) LocalAddr() netip.AddrPort { return c.addr }

// SetBuffers reports 1 MiB buffers whatever is asked.
func (c *Conn) SetBuffers(int) (int, int, error) { return 1 << 20, 1 << 20, nil }

// Close closes the socket.
func (c *Conn) Close() error { c.closed.Store(true); return nil }
