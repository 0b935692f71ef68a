//go:build unix && !linux

package launch

import (
	"syscall"
)

// childAttr puts a worker in its own process group. Outside Linux there is
// no parent-death signal: a worker whose console is killed ends when its
// control connection closes (DESIGN.md §1).
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// launcherAttr puts a launcher in its own process group; outside Linux its
// tasks end when their control connections close.
func launcherAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
