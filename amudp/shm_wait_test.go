package amudp

import (
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/internal/testbound"
)

// TestSharedWaitPending: a rank about to sleep while a record is on its
// way into its inbox (a producer reserved room, as one does between its
// compare-and-swap of the tail and its commit, and has not committed)
// sleeps briefly, not its whole timeout: that producer may have looked
// for the sleep mark before the rank set it, and rings no doorbell then.
func TestSharedWaitPending(t *testing.T) {
	eps := sharedJob(t, 2, shmring.MinCapacity*4)
	sh := eps[1].tr.(*Shared)
	inbox := sh.inbox.reg.Bytes()
	tail := (*atomic.Uint64)(unsafe.Pointer(&inbox[ringTail]))
	tail.Add(64) // one line reserved, never committed
	done := make(chan error, 1)
	go func() { done <- sh.Wait(time.Hour) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testbound.For(t, 2*time.Second)):
		t.Fatal("a rank whose inbox holds a reservation not committed slept for its whole timeout")
	}
}

// TestPendingSleep: the bound of a sleep over a record on its way doubles
// while the inbox's ends stay where they were, up to maxBlockPolite, and
// starts again at pendingWait once they move.
func TestPendingSleep(t *testing.T) {
	var sh Shared
	var got []time.Duration
	for range 3 {
		got = append(got, sh.pendingSleep(0, 64))
	}
	got = append(got, sh.pendingSleep(64, 128))
	want := []time.Duration{pendingWait, 2 * pendingWait, 4 * pendingWait, pendingWait}
	if !slices.Equal(got, want) {
		t.Errorf("bounds %v, want %v", got, want)
	}
	for range 40 {
		sh.pendingSleep(64, 128)
	}
	if d := sh.pendingSleep(64, 128); d != maxBlockPolite {
		t.Errorf("bound after 40 sleeps over the same reservation: %v, want %v", d, maxBlockPolite)
	}
}

// TestSpinGoesOnWhileDirectMessagesCome: a waiter's poller that keeps
// running direct messages, in the quick passes between its full ones,
// keeps spinning: it sleeps in the kernel only after a whole spin without
// one. The sender sends a request every 100 µs (busy-waiting between:
// time.Sleep's resolution is a millisecond on some hosts), many spins
// long. Each sleep of the receiver must follow a gap in the sending of
// at least half its spin, counted from the start of one send to the end
// of the next.
func TestSpinGoesOnWhileDirectMessagesCome(t *testing.T) {
	eps, trs, inboxes := sharedPair(t)
	for _, tr := range trs {
		tr.SetInboxes(inboxes)
		tr.SetAllShared(true)
	}
	const spin = 4 * time.Millisecond
	eps[1].spin = spin
	var ran atomic.Int64
	eps[1].Register(10, func(*Token, []uint32, []byte) { ran.Add(1) })
	serve(t, eps[1])
	const sends = 3000 // 75 spins
	gaps := 0
	prev := time.Now()
	for range sends {
		for t0 := time.Now(); time.Since(t0) < 100*time.Microsecond; {
			runtime.Gosched()
		}
		start := time.Now()
		if err := eps[0].RequestShort(1, 10); err != nil {
			t.Fatal(err)
		}
		if time.Since(prev) >= spin/2 {
			gaps++
		}
		prev = start
	}
	waitFor(t, eps[0], "the answers", func() bool { return ran.Load() == sends && eps[0].Outstanding() == 0 })
	if n := eps[1].sleeps.Load(); n > uint64(gaps)+1 {
		t.Errorf("the receiver slept %d times while requests came (%d gaps of %v or more): its spin did not start again", n, gaps, spin/2)
	}
}
