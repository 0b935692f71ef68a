//go:build unix && !linux

package spawn

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// childAttr puts a worker in its own process group. Outside Linux there is
// no parent-death signal: a worker whose console is killed ends when its
// control connection closes (DESIGN.md §1).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// dupOnto makes fd newfd a copy of oldfd.
func dupOnto(oldfd, newfd int) error { return unix.Dup2(oldfd, newfd) }

// launcherAttr puts a launcher in its own process group; outside Linux its
// tasks end when their control connections close.
func launcherAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
