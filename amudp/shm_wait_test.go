package amudp

import (
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
// sleeps at most pendingWait, not its whole timeout: that producer may
// have looked for the sleep mark before the rank set it, and rings no
// doorbell then.
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
