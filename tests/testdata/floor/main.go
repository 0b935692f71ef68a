// Command floor prints one line and exits: scripts/scale.sh starts N of it
// at once to measure the cost of starting N static Go programs on this
// machine, the floor a job of N workers is compared with.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Println("hello from pid", os.Getpid()) }
