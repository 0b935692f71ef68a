//go:build !linux

package conduit

import "runtime"

// yieldCPU gives the CPU to another goroutine (sched_yield on Linux).
func yieldCPU() { runtime.Gosched() }
