//go:build linux && !amd64

package conduit

import "golang.org/x/sys/unix"

// yieldCPU gives the CPU to another process of the host that is ready to
// run (sched_yield), not only to another goroutine of this one. The
// system call is raw: the Go runtime does not see this thread leave, so
// its monitor does not hand the rank's P to another thread (and wake it)
// while the call waits for its turn.
func yieldCPU() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
