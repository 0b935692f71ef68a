package amudp_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// TestRequestFromHandlerRefused: a request sent from inside a handler, to
// a peer or to itself, returns ErrRequestInHandler (it could wait forever
// for credit that only the handler's own goroutine returns), while another
// goroutine of the same endpoint sends requests as usual while that
// handler runs.
func TestRequestFromHandlerRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eps, stop := pair(t, amudptest.New(1, 0, 0, 0), amudp.Config{NetworkDepth: 4}, nil)
		var inside [2]error
		started, release := make(chan struct{}), make(chan struct{})
		var done atomic.Bool
		eps[0].Register(131, func(*amudp.Token, []uint32, []byte) {})
		eps[1].Register(131, func(*amudp.Token, []uint32, []byte) {})
		eps[1].Register(130, func(tok *amudp.Token, _ []uint32, _ []byte) {
			inside[0] = eps[1].RequestShort(0, 131)
			inside[1] = eps[1].RequestMedium(1, 131, []byte("self"))
			close(started)
			<-release
			tok.ReplyShort(131)
		})
		if err := eps[0].RequestShort(1, 130); err != nil {
			t.Fatal(err)
		}
		served := make(chan error)
		go func() { served <- eps[0].WaitUntil(done.Load) }()
		<-started
		// Within the network depth: the credit of rank 1 comes back only
		// when its polling goroutine, held in the handler, is free again.
		for i := range 3 {
			if err := eps[1].RequestShort(0, 131); err != nil {
				t.Errorf("request %d of another goroutine while a handler runs: %v", i, err)
			}
		}
		close(release)
		done.Store(true)
		eps[0].Wake()
		if err := <-served; err != nil {
			t.Errorf("rank 0: %v", err)
		}
		for i, err := range inside {
			if !errors.Is(err, amudp.ErrRequestInHandler) {
				t.Errorf("request %d from inside the handler: %v, want ErrRequestInHandler", i, err)
			}
		}
		stop()
	})
}
