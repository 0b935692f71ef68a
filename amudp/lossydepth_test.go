package amudp_test

// Tests of the per-peer depth and of an idle peer under heavy loss.

import (
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
	"github.com/udpconduit/udpconduit/retransmit"
)

// TestPeerDepthBindsBeforeSendDepth: with a per-peer depth (NetworkDepth)
// below the send depth, depth unanswered requests to one peer make the next
// request to that peer wait, while a request to another peer still goes;
// once the first peer polls, the waiting request goes too.
func TestPeerDepthBindsBeforeSendDepth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const depth = 2
		lnet := amudptest.New(1, 0, 0, 0)
		var eps [3]*amudp.Endpoint
		var addrs [3]netip.AddrPort
		for i := range eps {
			c := lnet.Listen(i)
			var err error
			if eps[i], err = amudp.NewEndpoint(c, amudp.Config{Rank: i, Secret: []byte("trio"), Polite: true, NetworkDepth: depth, SendDepth: 16}); err != nil {
				t.Fatal(err)
			}
			addrs[i] = c.LocalAddr()
			defer eps[i].Close()
		}
		ran := [3]int{}
		for i, e := range eps {
			if err := e.SetPeers(addrs[:]); err != nil {
				t.Fatal(err)
			}
			e.Register(130, func(*amudp.Token, []uint32, []byte) { ran[i]++ })
		}
		done := beyondDepth(t, eps[0], 1, depth)
		// Rank 2 has all its credit: a request to it goes at once.
		other := make(chan error, 1)
		go func() { other <- eps[0].RequestShort(2, 130) }()
		synctest.Wait()
		select {
		case err := <-other:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("a request to rank 2 waited for rank 1's credit")
		}
		drainServed(t, eps[0], done, serving(eps[1], eps[2]))
		if ran[1] != depth+1 || ran[2] != 1 {
			t.Errorf("handler runs %v, want rank 1 %d and rank 2 1", ran, depth+1)
		}
	})
}

// sendTimes records when its transport sends.
type sendTimes struct {
	amudp.Transport
	at []time.Time
}

func (s *sendTimes) Send(b []byte, to netip.AddrPort) error {
	s.at = append(s.at, time.Now())
	return s.Transport.Send(b, to)
}

// TestIdlePeerUnderHeavyLossIsAskedOften: a peer that has sent nothing yet
// (idle: it only answers) cannot be told from a dead one, and over links
// that lose half the datagrams each way a round trip succeeds one time in
// four. Each of 40 fresh pairs sends one request: the waits between its
// transmissions never exceed Probe (250 ms), and none is given up. With waits
// that doubled up to GASNET_REQUESTTIMEOUT_MAX (30 s), one request in three
// met a wait of 1.6 s or more, and jobs stalled for a minute.
func TestIdlePeerUnderHeavyLossIsAskedOften(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(5, 0.50, 0, 0)
		var longest time.Duration
		for range 40 {
			rec := &sendTimes{}
			eps, stop := pair(t, lnet, amudp.Config{Retransmit: retransmit.DefaultConfig()}, func(tr amudp.Transport) amudp.Transport {
				rec.Transport = tr
				return rec
			})
			eps[1].Register(130, func(*amudp.Token, []uint32, []byte) {})
			var returned int
			eps[0].SetReturnedHandler(func(amudp.Returned) { returned++ })
			if err := eps[0].RequestShort(1, 130); err != nil {
				t.Fatal(err)
			}
			if err := eps[0].Drain(); err != nil {
				t.Fatal(err)
			}
			stop()
			for i := 1; i < len(rec.at); i++ {
				longest = max(longest, rec.at[i].Sub(rec.at[i-1]))
			}
			if returned > 0 {
				t.Errorf("a request to a live peer was given up")
			}
		}
		t.Logf("longest wait between transmissions: %v of virtual time", longest)
		if longest > retransmit.DefaultProbe {
			t.Errorf("a request waited %v between transmissions to a live peer, want at most %v", longest, retransmit.DefaultProbe)
		}
	})
}

// drainServed waits for done (beyondDepth), drains e, and stops the
// polls of serving, failing t at the first error.
func drainServed(t *testing.T, e *amudp.Endpoint, done <-chan error, stop func() error) {
	t.Helper()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := e.Drain(); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// serving polls each of eps on a goroutine of its own until the returned
// stop is called, which ends the polls and returns the first error one of
// them gave.
func serving(eps ...*amudp.Endpoint) (stop func() error) {
	var done atomic.Bool
	served := make(chan error, len(eps))
	for _, e := range eps {
		go func() { served <- e.WaitUntil(done.Load) }()
	}
	return func() error {
		done.Store(true)
		for _, e := range eps {
			e.Wake()
		}
		var first error
		for range eps {
			if err := <-served; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}
