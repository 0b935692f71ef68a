//go:build unix && !linux

package worker

import "golang.org/x/sys/unix"

// dupOnto makes fd newfd a copy of oldfd.
func dupOnto(oldfd, newfd int) error { return unix.Dup2(oldfd, newfd) }
