// Command printer is a test job: every rank prints LINES long lines from 4
// goroutines at once (to check that routed lines never tear), then either
// exits 0 or, with the argument "wait", waits forever in the network.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"udpconduit/conduit"
)

func main() {
	conduit.Init()
	lines, _ := strconv.Atoi(os.Getenv("LINES"))
	r := conduit.Rank()
	pad := strings.Repeat("x", 300)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < lines; i++ {
				fmt.Printf("rank %d goroutine %d line %d %s end\n", r, g, i, pad)
			}
		}()
	}
	wg.Wait()
	conduit.Barrier()
	if len(os.Args) > 1 && os.Args[1] == "wait" {
		fmt.Println("waiting")
		conduit.WaitUntil(func() bool { return false })
	}
	conduit.Exit(0)
}
