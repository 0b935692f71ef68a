// Command hello is the smallest udpconduit job: every rank prints
// "hello from rank R of N on HOST args=[...]", waits in a barrier and exits 0.
//
//	GASNET_SPAWNFN=L ./hello 4 a b c
package main

import (
	"fmt"
	"os"

	"github.com/udpconduit/udpconduit/conduit"
)

func main() {
	conduit.Usage = "[args...]  (each worker prints them)"
	conduit.Init()
	host, _ := os.Hostname()
	fmt.Printf("hello from rank %d of %d on %s args=%q\n", conduit.Rank(), conduit.Size(), host, os.Args[1:])
	if err := conduit.Barrier(); err != nil {
		fmt.Fprintln(os.Stderr, "barrier:", err)
		conduit.Exit(1)
	}
	conduit.Exit(0)
}
