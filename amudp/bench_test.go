package amudp

import (
	"encoding/binary"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// The raw-UDP floors are measured in the same run, through the same socket
// mode (raw non-blocking syscalls, busy-polling), so every AM figure is a
// ratio to what the kernel allows here (DESIGN.md §12). This VM's speed
// drifts by up to 2× within seconds, so the floor and the endpoints take
// turns: each benchmark alternates rounds of raw traffic and of AM traffic
// of the same count, and compares the sums. Only one side's server spins
// at a time, so neither steals the other's core.

const rounds = 8

// spinner runs a busy-polling server on a locked OS thread during turns.
type spinner struct {
	start, done chan struct{}
	stop        atomic.Bool
	wake        func() // wakes a server that sleeps in the kernel, if set
}

func newSpinner(tb testing.TB, serve func(stop *atomic.Bool)) *spinner {
	s := &spinner{start: make(chan struct{}), done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		for range s.start {
			serve(&s.stop)
			s.done <- struct{}{}
		}
	}()
	tb.Cleanup(func() { close(s.start) })
	return s
}

// turn runs f while the server spins, and returns how long f took.
func (s *spinner) turn(f func()) time.Duration {
	s.stop.Store(false)
	s.start <- struct{}{}
	t := time.Now()
	f()
	d := time.Since(t)
	s.stop.Store(true)
	if s.wake != nil {
		s.wake()
	}
	<-s.done
	return d
}

// recvOrStop busy-polls u for a datagram, or sleeps in the kernel between
// tries when block is set; it returns -1 once stop is set.
func recvOrStop(u *UDP, b []byte, stop *atomic.Bool, block bool) int {
	for {
		n, _, err := u.Recv(b)
		if err == nil {
			return n
		}
		if err != ErrNoData {
			panic(err)
		}
		if stop != nil && stop.Load() {
			return -1
		}
		if block {
			u.Wait(maxBlock)
		}
	}
}

func listenPair(tb testing.TB, buf int) (*UDP, *UDP) {
	a, err1 := ListenUDP(loopback, buf)
	b, err2 := ListenUDP(loopback, buf)
	if err1 != nil || err2 != nil {
		tb.Fatal(err1, err2)
	}
	tb.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// rawPingPong is a ping-pong of 8-byte datagrams, busy-polling or, with
// block, sleeping in ppoll for each datagram.
type rawPingPong struct {
	cli, srv *UDP
	sp       *spinner
	b        []byte
	block    bool
}

func newRawPingPong(tb testing.TB, block bool) *rawPingPong {
	r := &rawPingPong{b: make([]byte, 64), block: block}
	r.cli, r.srv = listenPair(tb, 0)
	r.sp = newSpinner(tb, func(stop *atomic.Bool) {
		b := make([]byte, 64)
		for {
			n := recvOrStop(r.srv, b, stop, block)
			if n < 0 {
				return
			}
			r.srv.Send(b[:n], r.cli.LocalAddr())
		}
	})
	r.sp.wake = r.srv.Wake
	return r
}

func (r *rawPingPong) run(n int) time.Duration {
	return r.sp.turn(func() {
		for range n {
			r.cli.Send(r.b[:8], r.srv.LocalAddr())
			recvOrStop(r.cli, r.b, nil, r.block)
		}
	})
}

// rawStream streams 65000-byte datagrams with a window of 64 and a
// cumulative ack every 16: the raw-UDP floor of a flood, as a C program
// on bare sockets would run it.
type rawStream struct {
	tx, rx  *UDP
	sp      *spinner
	target  atomic.Uint64 // datagrams the receiver expects in all
	sent    uint64
	b, ackb []byte
}

const streamWindow, streamEvery = 64, 16

func newRawStream(tb testing.TB) *rawStream {
	r := &rawStream{b: make([]byte, MaxMedium), ackb: make([]byte, 64)}
	r.tx, r.rx = listenPair(tb, 8<<20)
	var got uint64
	r.sp = newSpinner(tb, func(stop *atomic.Bool) {
		b := make([]byte, MaxDatagram+1)
		ack := make([]byte, 8)
		for {
			if recvOrStop(r.rx, b, stop, false) < 0 {
				return
			}
			got++
			if got%streamEvery == 0 || got == r.target.Load() {
				binary.LittleEndian.PutUint64(ack, got)
				r.rx.Send(ack, r.tx.LocalAddr())
			}
		}
	})
	return r
}

func (r *rawStream) run(n int) time.Duration {
	start := r.sent
	end := start + uint64(n)
	r.target.Store(end)
	return r.sp.turn(func() {
		acked := start
		for acked < end {
			for r.sent < end && r.sent-acked < streamWindow {
				r.tx.Send(r.b, r.rx.LocalAddr())
				r.sent++
			}
			if recvOrStop(r.tx, r.ackb, nil, false) == 8 {
				acked = max(acked, binary.LittleEndian.Uint64(r.ackb))
			}
		}
	})
}

// spinJob is two endpoints; rank 1 serves during turns. spin is the
// endpoints' busy-poll time before they sleep (-1: never sleep).
func spinJob(b *testing.B, spin time.Duration) ([]*Endpoint, *spinner) {
	eps := newJob(b, 2, Config{Spin: spin, SendDepth: -1})
	sp := newSpinner(b, func(stop *atomic.Bool) { eps[1].WaitUntil(stop.Load) })
	sp.wake = eps[1].Wake
	return eps, sp
}

// alternate runs b.N operations in rounds, each round raw(n) then n AM
// operations in the AM server's turn, and returns the summed times.
func alternate(b *testing.B, raw func(n int) time.Duration, sp *spinner, am func(n int)) (rawT, amT time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	k := min(rounds, b.N)
	for i := range k {
		n := b.N / k
		if i == 0 {
			n += b.N % k
		}
		rawT += raw(n)
		amT += sp.turn(func() { am(n) })
	}
	return rawT, amT
}

// BenchmarkRawUDPPingPong reports the floor alone.
func BenchmarkRawUDPPingPong(b *testing.B) {
	r := newRawPingPong(b, false)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ResetTimer()
	d := r.run(b.N)
	b.ReportMetric(float64(d.Nanoseconds())/float64(b.N)/1000, "µs/rtt")
}

// BenchmarkShortRoundTrip: a short request and its short reply between two
// endpoints on loopback, both busy-polling, in turns with the raw floor.
func BenchmarkShortRoundTrip(b *testing.B) { benchRoundTrip(b, -1) }

// BenchmarkShortRoundTripBlocking is the same with endpoints that sleep in
// the kernel at once when nothing has arrived (the mode for more workers
// than cores), against a raw ping-pong that sleeps in ppoll likewise.
func BenchmarkShortRoundTripBlocking(b *testing.B) { benchRoundTrip(b, time.Nanosecond) }

func benchRoundTrip(b *testing.B, spin time.Duration) {
	raw := newRawPingPong(b, spin >= 0)
	eps, sp := spinJob(b, spin)
	var replies atomic.Uint64
	eps[1].Register(130, func(t *Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]) })
	eps[0].Register(131, func(*Token, []uint32, []byte) { replies.Add(1) })
	var want uint64
	cond := func() bool { return replies.Load() == want }
	rawT, amT := alternate(b, raw.run, sp, func(n int) {
		for range n {
			want++
			if err := eps[0].RequestShort(1, 130, uint32(want)); err != nil {
				b.Fatal(err)
			}
			if err := eps[0].WaitUntil(cond); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(amT.Nanoseconds())/float64(b.N)/1000, "µs/rtt")
	b.ReportMetric(float64(rawT.Nanoseconds())/float64(b.N)/1000, "raw-µs/rtt")
	b.ReportMetric(float64(amT)/float64(rawT), "ratio-to-raw")
}

func benchFlood(b *testing.B, cat Category) {
	raw := newRawStream(b)
	eps, sp := spinJob(b, -1)
	for _, e := range eps {
		e.SetSegment(make([]byte, MaxLong))
	}
	var got atomic.Uint64
	eps[1].Register(130, func(*Token, []uint32, []byte) { got.Add(1) })
	payload := make([]byte, MaxMedium)
	for i := range payload { // memory of its own, not the zero page
		payload[i] = byte(i)
	}
	b.SetBytes(MaxMedium)
	rawT, amT := alternate(b, raw.run, sp, func(n int) {
		for range n {
			var err error
			if cat == Medium {
				err = eps[0].RequestMedium(1, 130, payload)
			} else {
				err = eps[0].RequestLong(1, 130, payload, 0)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		if err := eps[0].Drain(); err != nil {
			b.Fatal(err)
		}
	})
	if got.Load() != uint64(b.N) {
		b.Fatalf("%d handlers ran for %d requests", got.Load(), b.N)
	}
	bytes := float64(b.N) * MaxMedium
	st := eps[0].Stats()
	b.ReportMetric(bytes/amT.Seconds()/1e6, "MB/s")
	b.ReportMetric(bytes/rawT.Seconds()/1e6, "raw-MB/s")
	b.ReportMetric(float64(rawT)/float64(amT), "ratio-to-raw")
	b.ReportMetric(float64(st.Retransmits)/float64(b.N), "resends/op")
	b.ReportMetric(float64(eps[1].Stats().Sent)/float64(b.N), "replies/op")
}

// BenchmarkMediumBandwidth floods 65000-byte medium requests, pipelined up to
// the network depth, in turns with a raw UDP stream.
func BenchmarkMediumBandwidth(b *testing.B) { benchFlood(b, Medium) }

// BenchmarkLongBandwidth floods 65000-byte long requests into the segment.
func BenchmarkLongBandwidth(b *testing.B) { benchFlood(b, Long) }

// BenchmarkSharedShortRoundTrip is BenchmarkShortRoundTrip with the two
// endpoints exchanging their datagrams through shared memory (Shared),
// against the same raw UDP ping-pong.
func BenchmarkSharedShortRoundTrip(b *testing.B) {
	saved := listen
	listen = listenShared(b, DefaultInbox)
	b.Cleanup(func() { listen = saved })
	benchRoundTrip(b, -1)
}

// BenchmarkSharedRoundTripWork is the processor work of one short round
// trip through shared memory, without the wait between two cores: one
// goroutine sends the request, polls the receiver (which runs the handler
// and replies) and polls the sender (which runs the reply's handler).
func BenchmarkSharedRoundTripWork(b *testing.B) {
	saved := listen
	listen = listenShared(b, DefaultInbox)
	b.Cleanup(func() { listen = saved })
	eps := newJob(b, 2, Config{Spin: -1, SendDepth: -1})
	var replies atomic.Uint64
	eps[1].Register(130, func(t *Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]) })
	eps[0].Register(131, func(*Token, []uint32, []byte) { replies.Add(1) })
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
			b.Fatal(err)
		}
		for replies.Load() != uint64(i+1) {
			eps[1].Poll()
			eps[0].Poll()
		}
	}
}

// loopTransport hands each datagram straight to its peer's queue, in
// memory: a round trip over it costs the endpoints' own work alone.
type loopTransport struct {
	addr  netip.AddrPort
	peer  *loopTransport
	queue [][]byte // at most a few datagrams: buffers reused
	from  []netip.AddrPort
	n     int
}

func (l *loopTransport) Send(b []byte, _ netip.AddrPort) error {
	p := l.peer
	if p.n == len(p.queue) {
		p.queue = append(p.queue, make([]byte, 0, MaxDatagram))
		p.from = append(p.from, netip.AddrPort{})
	}
	p.queue[p.n] = append(p.queue[p.n][:0], b...)
	p.from[p.n] = l.addr
	p.n++
	return nil
}

func (l *loopTransport) Recv(b []byte) (int, netip.AddrPort, error) {
	if l.n == 0 {
		return 0, netip.AddrPort{}, ErrNoData
	}
	n := copy(b, l.queue[0])
	from := l.from[0]
	l.queue[0], l.from[0] = l.queue[l.n-1], l.from[l.n-1] // order does not matter: one in flight
	l.queue[l.n-1] = l.queue[l.n-1][:0]
	l.n--
	return n, from, nil
}

func (l *loopTransport) Wait(time.Duration) error         { return nil }
func (l *loopTransport) Wake()                            {}
func (l *loopTransport) LocalAddr() netip.AddrPort        { return l.addr }
func (l *loopTransport) SetBuffers(int) (int, int, error) { return 0, 0, nil }
func (l *loopTransport) Close() error                     { return nil }

// BenchmarkRoundTripWork is a short round trip between two endpoints whose
// datagrams go straight from one's Send to the other's queue, in one
// goroutine: the library's own work per round trip (both sides' encoding,
// sealing, opening, decoding, credit, handlers and locks), without the
// kernel, for each protection mode. BENCHMARKS.md's "The network path" sets it
// against the round trip over loopback.
func BenchmarkRoundTripWork(b *testing.B) {
	for _, mode := range []struct {
		name string
		cfg  Config
	}{{"header", Config{HeaderOnlyAuth: true}}, {"payload", Config{}}, {"encrypt", Config{Encrypt: true}}} {
		b.Run(mode.name, func(b *testing.B) {
			a := &loopTransport{addr: netip.MustParseAddrPort("10.0.0.1:1")}
			c := &loopTransport{addr: netip.MustParseAddrPort("10.0.0.2:1"), peer: a}
			a.peer = c
			var eps [2]*Endpoint
			for i, tr := range []Transport{a, c} {
				cfg := mode.cfg
				cfg.Rank, cfg.Secret = i, []byte("bench")
				e, err := NewEndpoint(tr, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := e.SetPeers([]netip.AddrPort{a.addr, c.addr}); err != nil {
					b.Fatal(err)
				}
				eps[i] = e
			}
			replies := 0
			eps[1].Register(130, func(t *Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]) })
			eps[0].Register(131, func(*Token, []uint32, []byte) { replies++ })
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
					b.Fatal(err)
				}
				if err := eps[1].Poll(); err != nil {
					b.Fatal(err)
				}
				if err := eps[0].Poll(); err != nil {
					b.Fatal(err)
				}
			}
			if replies != b.N {
				b.Fatalf("%d replies for %d requests", replies, b.N)
			}
		})
	}
}
