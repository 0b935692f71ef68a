// Command hello is the smallest udpconduit job: every rank prints
// "hello from rank R of N on HOST args=[...]" and ends with Finalize(0):
// the job exits 0 once every rank has.
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
	conduit.Finalize(0)
}
