// Command progress is a test job on 2 ranks: rank 1 computes for 400 ms
// without polling while rank 0 sends it a request and times the reply. It
// prints "reply after N ms". With GASNET_RCV_THREAD=1 the reply comes while
// rank 1 computes; without, only when it polls again.
package main

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

func main() {
	conduit.Init()
	var replied atomic.Bool
	conduit.Attach([]conduit.HandlerEntry{
		{Index: 130, Fn: func(t *conduit.Token, a []uint32, _ []byte) { t.ReplyShort(131, a...) }},
		{Index: 131, Fn: func(*conduit.Token, []uint32, []byte) { replied.Store(true) }},
	}, 0)
	conduit.Barrier()
	switch conduit.Rank() {
	case 0:
		time.Sleep(50 * time.Millisecond) // rank 1 is computing by now
		start := time.Now()
		conduit.RequestShort(1, 130, 7)
		conduit.WaitUntil(replied.Load)
		fmt.Printf("reply after %d ms\n", time.Since(start).Milliseconds())
	case 1:
		for end := time.Now().Add(400 * time.Millisecond); time.Now().Before(end); {
		} // compute without polling
	}
	conduit.Barrier()
	conduit.Exit(0)
}
