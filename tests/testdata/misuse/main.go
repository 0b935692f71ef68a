// Command misuse calls the conduit API the wrong way and checks that each
// call returns the documented error instead of crashing a rank, then runs
// collectives from several goroutines and Puts read after a barrier, for
// the race detector (the e2e test builds it with -race). Every rank prints
// "rank R ok NAME" or "rank R FAIL NAME: why" and the job exits 1 if any
// check failed.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

var failed atomic.Bool

func check(name string, err error) {
	if err != nil {
		failed.Store(true)
		fmt.Printf("rank %d FAIL %s: %v\n", conduit.Rank(), name, err)
		return
	}
	fmt.Printf("rank %d ok %s\n", conduit.Rank(), name)
}

// want returns nil when err wraps target.
func want(err, target error) error {
	if errors.Is(err, target) {
		return nil
	}
	return fmt.Errorf("got %v, want %v", err, target)
}

const (
	hTry   = 140 // request: replies to a reserved index, then properly
	hTried = 141 // reply: args[0] = 1 when the reserved reply was refused
	hNop   = 142
)

func nop(*conduit.Token, []uint32, []byte) {}

func main() {
	conduit.Init()
	if len(os.Args) > 1 && os.Args[1] == "race" {
		// A deliberate data race on the last rank, then Exit(0): the race
		// detector makes that process's status 66, which the job's code
		// must show.
		if conduit.Rank() == conduit.Size()-1 {
			x := 0
			done := make(chan bool)
			go func() { x++; done <- true }()
			x++
			<-done
		}
		conduit.Barrier()
		conduit.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "mismatch" {
		// Mismatched collectives: rank 0 in an all-gather, the others in a
		// barrier. Each rank returns the mismatch.
		var err error
		if conduit.Rank() == 0 {
			_, err = conduit.World().AllGather([]byte("x"))
		} else {
			err = conduit.Barrier()
		}
		fmt.Printf("rank %d: %v\n", conduit.Rank(), err)
		// The team goes on: no rank ends the job before every rank has
		// returned from the mismatch and said so.
		conduit.Barrier()
		conduit.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "roots" {
		// Every rank the root of its own reduction: each waits for
		// children that wait for theirs, and no message is sent but the
		// probes of ranks that waited a while.
		_, err := conduit.Reduce(conduit.World(), conduit.Rank(), conduit.Sum, []uint64{1})
		fmt.Printf("rank %d: %v\n", conduit.Rank(), err)
		conduit.Barrier()
		conduit.Exit(0)
	}
	if len(os.Args) > 2 && os.Args[1] == "teams" {
		// On the whole job's team, or a split of it that reverses the
		// ranks, job rank 0 gathers to itself while the others wait for a
		// scatter from it.
		tm := conduit.World()
		if os.Args[2] == "split" {
			tm, _ = conduit.World().Split(0, -conduit.Rank())
		}
		root, _ := tm.TeamRank(0) // job rank 0's
		var err error
		if conduit.Rank() == 0 {
			_, err = tm.Gather(root, []byte{1})
		} else {
			_, err = tm.Scatter(root, nil)
		}
		fmt.Printf("rank %d: %v\n", conduit.Rank(), err)
		conduit.Barrier()
		conduit.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "bcastroots" {
		// Every rank the root of its own broadcast: each would return its
		// own data as if the broadcast had matched.
		_, err := conduit.World().Broadcast(conduit.Rank(), []byte{1})
		conduit.Barrier()
		fmt.Printf("rank %d: %v\n", conduit.Rank(), err)
		conduit.Exit(0)
	}
	me, n := conduit.Rank(), conduit.Size()
	peer := (me + 1) % n
	buf := make([]byte, 128)

	check("get before Attach", want(conduit.Get(peer, 0, buf), conduit.ErrNotAttached))
	check("put before Attach", want(conduit.Put(peer, 0, buf), conduit.ErrNotAttached))
	check("request before Attach", want(conduit.RequestShort(peer, hNop), conduit.ErrNotAttached))
	_, err := conduit.Attach([]conduit.HandlerEntry{{Index: hNop, Fn: nop}, {Index: hNop, Fn: nop}}, 4096)
	check("Attach with a duplicate index", want(err, conduit.ErrHandlerTable))
	_, err = conduit.Attach([]conduit.HandlerEntry{{Index: hNop}}, 4096)
	check("Attach with a nil handler", want(err, conduit.ErrHandlerTable))
	_, err = conduit.Attach([]conduit.HandlerEntry{{Index: 65, Fn: nop}}, 4096)
	check("Attach with a reserved index", want(err, conduit.ErrHandlerIndex))
	_, err = conduit.Attach(nil, 1<<45)
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("\n")) {
		err = fmt.Errorf("got %q, want a one-line error", err)
	} else {
		err = nil
	}
	check("Attach with a 32 TiB segment", err)

	var refused atomic.Int32
	seg, err := conduit.Attach([]conduit.HandlerEntry{
		{Index: hTry, Fn: func(t *conduit.Token, _ []uint32, _ []byte) {
			ok := uint32(0)
			if errors.Is(t.ReplyShort(66), conduit.ErrHandlerIndex) {
				ok |= 1
			}
			if errors.Is(conduit.RequestShort(t.Source(), hNop), conduit.ErrRequestInHandler) {
				ok |= 2
			}
			t.ReplyShort(hTried, ok)
		}},
		{Index: hTried, Fn: func(_ *conduit.Token, a []uint32, _ []byte) { refused.Store(int32(a[0]) + 1) }},
		{Index: hNop, Fn: nop},
	}, 4096)
	check("Attach", err)
	if err != nil {
		conduit.Exit(1)
	}
	for _, h := range []int{0, 1, 65, 127, 256} {
		check(fmt.Sprintf("request to handler %d", h), want(conduit.RequestShort(peer, h), conduit.ErrHandlerIndex))
	}
	check("get outside the peer's segment", want(conduit.Get(peer, 4000, buf[:100]), conduit.ErrOutOfSegment))
	check("request", conduit.RequestShort(peer, hTry))
	check("wait for the reply", conduit.WaitUntil(func() bool { return refused.Load() != 0 }))
	if refused.Load()-1&1 == 0 {
		check("client handler replying to a reserved index", errors.New("the reply was not refused"))
	} else {
		check("client handler replying to a reserved index", nil)
	}
	if refused.Load()-1&2 == 0 {
		check("request from inside a handler", errors.New("the request was not refused"))
	} else {
		check("request from inside a handler", nil)
	}
	// Collectives from two goroutines at once, 50 barriers each.
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 2 {
		wg.Go(func() {
			for range 50 {
				if err := conduit.Barrier(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	check("barriers from two goroutines", <-errs)

	// Puts into the next rank's segment, read by it after a barrier.
	for round := range 20 {
		data := bytes.Repeat([]byte{byte(me + round)}, 1024)
		check(fmt.Sprintf("put round %d", round), conduit.Put(peer, 0, data))
		// Non-blocking: the barrier completes while this rank computes, so
		// its Wait finds it done at once; with GASNET_RCV_THREAD=1 the
		// put into this rank's segment was written by the background
		// poller, and only the barrier orders it before the read below.
		h := conduit.World().BarrierNB()
		time.Sleep(10 * time.Millisecond)
		_, err := h.Wait()
		check(fmt.Sprintf("barrier round %d", round), err)
		from := (me + n - 1) % n
		// A plain loop, not bytes.Equal: the race detector sees only reads
		// made by Go code, not by assembly.
		for i, b := range seg[:1024] {
			if b != byte(from+round) {
				check(fmt.Sprintf("segment after round %d", round), fmt.Errorf("byte %d is %d, want %d", i, b, byte(from+round)))
				break
			}
		}
		conduit.Barrier()
	}
	if failed.Load() {
		conduit.Exit(1)
	}
	os.Stdout.Sync()
	conduit.Exit(0)
}
