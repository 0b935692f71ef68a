// Package cli holds what the udpconduit programs share: reporting a bad
// argument or a failure and ending the job.
package cli

import (
	"fmt"
	"os"

	"github.com/udpconduit/udpconduit/conduit"
)

// BadArgs reports a bad program argument once, from rank 0 (every rank
// parses the same argv), and ends the job with exit code 1.
func BadArgs(prog, usage, format string, a ...any) {
	if conduit.Rank() == 0 {
		fmt.Fprintf(os.Stderr, "%s: "+format+"; usage: %s\n", append(append([]any{prog}, a...), usage)...)
	} else {
		conduit.Barrier() // wait for rank 0's Exit, so that its message is the one shown
	}
	conduit.Exit(1)
}

// Die reports a failure of this rank and ends the job with exit code 1.
func Die(prog, format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s: rank %d: "+format+"\n", append([]any{prog, conduit.Rank()}, a...)...)
	conduit.Exit(1)
}
