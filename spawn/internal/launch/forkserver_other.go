//go:build !linux

package launch

import "errors"

// forkServerMin is the smallest job whose workers a fork server starts:
// none outside Linux (forkserver_linux.go), where the console starts every
// worker itself.
var forkServerMin = int(^uint(0) >> 1)

// ForkServed reports whether the L spawner starts a job of count workers
// through a fork server: never outside Linux.
func ForkServed(count int, routed bool) bool { return false }

func (l *localLaunch) startServed(*Spec, []string, []string, []byte) error {
	return errors.New("spawn L: no fork server on this system")
}
