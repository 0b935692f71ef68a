// Command pmiprobe is a test task of package pmi under a real launcher
// (tests/launchers_test.go, TestPMIProbe): each task connects to the
// launcher's PMI server, puts a value of every byte and a long one, fences,
// reads every task's, and prints one line "pmi rank R of N: vV ok"; any
// failure is one line on stderr and exit 1.
package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/pmi"
)

func value(r int) []byte {
	b := []byte(fmt.Sprintf("rank %d ", r))
	for i := range 256 {
		b = append(b, byte(i))
	}
	return bytes.Repeat(b, 1+r%3*5) // some past a server's 1024-byte values
}

func main() {
	e, ok, err := pmi.FromEnv(os.Getenv)
	if err != nil || !ok {
		fmt.Fprintf(os.Stderr, "pmiprobe: no PMI: %v\n", err)
		os.Exit(1)
	}
	c, err := pmi.Dial(e, 30*time.Second)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pmiprobe: rank %d: %v\n", e.Rank, err)
		os.Exit(1)
	}
	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "pmiprobe: rank %d: %v\n", c.Rank(), err)
		c.Abort(1, err.Error())
		os.Exit(1)
	}
	if err := c.Put("v"+strconv.Itoa(c.Rank()), value(c.Rank())); err != nil {
		fail(err)
	}
	if err := c.Fence(); err != nil {
		fail(err)
	}
	for r := range c.Size() {
		got, err := c.Get("v" + strconv.Itoa(r))
		if err != nil {
			fail(err)
		}
		if !bytes.Equal(got, value(r)) {
			fail(fmt.Errorf("rank %d's value differs (%d bytes of %d)", r, len(got), len(value(r))))
		}
	}
	if err := c.Finalize(); err != nil {
		fail(err)
	}
	fmt.Printf("pmi rank %d of %d: v%d ok\n", c.Rank(), c.Size(), c.Version())
}
