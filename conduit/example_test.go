package conduit_test

import (
	"fmt"

	"github.com/udpconduit/udpconduit/conduit"
)

// A job's program: the console spawns the workers inside Init; each worker
// sends a short request around a ring and waits for every rank.
func Example() {
	conduit.Init()
	var got int
	_, err := conduit.Attach([]conduit.HandlerEntry{
		{Index: 130, Fn: func(t *conduit.Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]+1) }},
		{Index: 131, Fn: func(_ *conduit.Token, args []uint32, _ []byte) { got = int(args[0]) }},
	}, 1<<16)
	if err != nil {
		conduit.Exit(1)
	}
	conduit.RequestShort((conduit.Rank()+1)%conduit.Size(), 130, 41)
	conduit.WaitUntil(func() bool { return got != 0 })
	conduit.Barrier()
	conduit.Exit(0)
}

// Put and Get move bytes to and from another rank's segment.
func ExamplePut() {
	conduit.Init()
	seg, _ := conduit.Attach(nil, 1024)
	peer := (conduit.Rank() + 1) % conduit.Size()
	conduit.Put(peer, 0, []byte("hello"))
	conduit.Barrier()
	fmt.Println(string(seg[:5]))
	buf := make([]byte, 5)
	conduit.Get(peer, 0, buf)
}

// Collectives: a barrier, a broadcast from rank 0, a sum over every rank.
func ExampleAllReduceUint64() {
	conduit.Init()
	conduit.Barrier()
	cfg, _ := conduit.Broadcast(0, []byte("settings from rank 0"))
	sum, _ := conduit.AllReduceUint64(conduit.Sum, []uint64{uint64(conduit.Rank())})
	if conduit.Rank() == 0 {
		fmt.Printf("%s; sum of ranks %d\n", cfg, sum[0])
	}
	conduit.Exit(0)
}
