package worker

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// routeOutput connects this process's file descriptors 1 and 2 each to its
// own TCP connection to the console. The descriptors themselves are the
// sockets, in blocking mode, so whatever the process writes before it dies
// (a Go panic trace, written by the runtime straight to fd 2) is in the
// kernel's hands and reaches the console.
func routeOutput(addr string, secret []byte, deadline time.Time) error {
	idx := -1
	if v := os.Getenv(ctl.EnvIndex); v != "" {
		idx, _ = strconv.Atoi(v)
	}
	for stream := 1; stream <= 2; stream++ {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err != nil {
			return fmt.Errorf("routing output to the console at %s: %w", addr, err)
		}
		err = ctl.WriteFrame(c, ctl.FrameOutput, ctl.NewOutput(secret, stream, idx, os.Getpid()))
		var f *os.File
		if err == nil {
			f, err = c.(*net.TCPConn).File() // a duplicate; Fd puts it in blocking mode
		}
		c.Close()
		if err != nil {
			return fmt.Errorf("routing output to the console at %s: %w", addr, err)
		}
		err = dupOnto(int(f.Fd()), stream)
		f.Close()
		if err != nil {
			return fmt.Errorf("routing output: dup onto fd %d: %w", stream, err)
		}
	}
	return nil
}
