package amudp

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// TestProgressRunsHandlersInTheBackground: with Progress running and no
// goroutine of the receiver waiting, its handlers run and its replies go
// out (the sender's Drain completes); Close ends Progress with
// net.ErrClosed.
func TestProgressRunsHandlersInTheBackground(t *testing.T) {
	eps := newJob(t, 2, Config{})
	var ran atomic.Int32
	eps[1].Register(130, func(*Token, []uint32, []byte) { ran.Add(1) })
	done := make(chan error, 1)
	go func() { done <- eps[1].Progress() }()
	for range 100 {
		if err := eps[0].RequestShort(1, 130); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].Drain(); err != nil {
		t.Fatal(err)
	}
	if ran.Load() != 100 {
		t.Errorf("%d handler runs, want 100", ran.Load())
	}
	eps[1].Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Progress returned %v, want net.ErrClosed", err)
		}
	case <-time.After(testbound.For(t, 10*time.Second)): // a hang bound
		t.Fatal("Progress still runs after Close")
	}
}

// TestProgressStandsAside: while a goroutine waits on the endpoint, the
// background poller leaves the polling to it: every handler that runs
// meanwhile runs in the waiter's passes, not the background poller's.
// (A waiter that only slept until the background poller's passes would
// wait for the scheduler to run it after each message.)
func TestProgressStandsAside(t *testing.T) {
	eps := newJob(t, 2, Config{})
	const n = 200
	var mu sync.Mutex
	var byBackground, runs int
	e := eps[1]
	e.Register(130, func(*Token, []uint32, []byte) {
		mu.Lock()
		runs++
		if e.bgPolling.Load() {
			byBackground++
		}
		mu.Unlock()
	})
	go e.Progress()
	waited := make(chan error, 1)
	go func() {
		waited <- e.WaitUntil(func() bool { mu.Lock(); defer mu.Unlock(); return runs == n })
	}()
	// The waiter is in its wait, and the background poller has let go.
	for deadline := time.Now().Add(testbound.For(t, 10*time.Second)); e.fg.Load() == 0 || e.bgPolling.Load(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never took the poll")
		}
	}
	for range n { // one at a time: n arrivals, each waking a poller
		if err := eps[0].RequestShort(1, 130); err != nil {
			t.Fatal(err)
		}
		if err := eps[0].Drain(); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if byBackground != 0 {
		t.Errorf("%d of %d handlers ran in the background poller's passes while a goroutine waited", byBackground, n)
	}
}

// TestPending: an endpoint with an inbox reports a message pending exactly
// while its inbox holds a record, in either direction; one without an
// inbox cannot tell without a system call, and always reports one.
func TestPending(t *testing.T) {
	if udp := newJob(t, 1, Config{}); !udp[0].Pending() {
		t.Fatal("an endpoint without an inbox reports nothing pending")
	}
	eps := sharedJob(t, 2, DefaultInbox)
	var ran atomic.Int32
	eps[1].Register(10, func(tok *Token, args []uint32, p []byte) {
		ran.Add(1)
		if err := tok.ReplyShort(11); err != nil {
			t.Error(err)
		}
	})
	eps[0].Register(11, func(*Token, []uint32, []byte) { ran.Add(1) })
	if eps[0].Pending() || eps[1].Pending() {
		t.Fatalf("pending before any message: %v %v", eps[0].Pending(), eps[1].Pending())
	}
	if err := eps[0].RequestShort(1, 10); err != nil {
		t.Fatal(err)
	}
	if !eps[1].Pending() || eps[0].Pending() {
		t.Fatalf("after a request from rank 0: pending %v at rank 0, %v at rank 1; want false, true", eps[0].Pending(), eps[1].Pending())
	}
	for ran.Load() == 0 {
		if err := eps[1].Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if eps[1].Pending() || !eps[0].Pending() {
		t.Fatalf("after the request ran: pending %v at rank 0, %v at rank 1; want true, false", eps[0].Pending(), eps[1].Pending())
	}
	waitFor(t, eps[0], "the reply", func() bool { return ran.Load() == 2 })
	if eps[0].Pending() {
		t.Fatal("pending at rank 0 after the reply ran")
	}
}
