package amudp_test

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// slowRecv is a transport whose every received datagram costs its endpoint
// cost (virtual time): a receiver slower than its sender, whose queue
// grows to the network depth and whose every retransmitted copy it pays
// for too, as a host decrypting 64 KB datagrams does.
type slowRecv struct {
	amudp.Transport
	cost time.Duration
}

func (s *slowRecv) Recv(b []byte) (int, netip.AddrPort, error) {
	n, from, err := s.Transport.Recv(b)
	if err == nil {
		time.Sleep(s.cost)
	}
	return n, from, err
}

// TestSlowReceiver floods a receiver that takes 20 or 100 µs a datagram
// with 3000 requests (network depth 128: a queue of 2.6 or 13 ms, longer
// than the round trips measured while it fills): the copies sent when the
// estimate fell behind are shown spurious by their second reply, which
// backs the timer off, so few requests are sent twice. Before that
// (retransmit.RTT.Backoff), every request was sent about twice (5296 and
// 2912 retransmissions), each copy lengthening the queue the next request
// waited in, and the floods took 2.7 and 2.0 times the receiver's work.
func TestSlowReceiver(t *testing.T) {
	for _, cost := range []time.Duration{20 * time.Microsecond, 100 * time.Microsecond} {
		synctest.Test(t, func(t *testing.T) {
			lnet := amudptest.New(1, 0, 0, 0)
			eps := newPairWrapped(t, lnet, amudp.Config{}, 1, func(tr amudp.Transport) amudp.Transport { return &slowRecv{tr, cost} })
			var done bool
			served := make(chan error, 1)
			go func() { served <- eps[1].WaitUntil(func() bool { return done }) }()
			const n = 3000
			runs := make([]int, n)
			eps[1].Register(130, func(_ *amudp.Token, a []uint32, _ []byte) {
				runs[a[0]]++
				if a[0] == n-1 {
					done = true
				}
			})
			start := time.Now()
			buf := make([]byte, 100)
			for id := range n {
				if err := eps[0].RequestMedium(1, 130, buf, uint32(id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := eps[0].Drain(); err != nil {
				t.Fatal(err)
			}
			el := time.Since(start)
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			for _, e := range eps {
				e.Close()
			}
			resent := eps[0].Stats().Retransmits
			t.Logf("%v a datagram: %v of virtual time (%.2f of the receiver's work), %d retransmissions", cost, el, float64(el)/float64(n*cost), resent)
			for id, r := range runs {
				if r != 1 {
					t.Fatalf("request %d ran %d times", id, r)
				}
			}
			if resent > n/10 {
				t.Errorf("%d retransmissions for %d requests to a slow receiver that lost none; want at most %d", resent, n, n/10)
			}
		})
	}
}
