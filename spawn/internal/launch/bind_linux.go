package launch

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs this process may run on (the affinity mask
// of the calling thread, which is the process's unless a startOn is in
// progress on it), in increasing order; nil when the kernel does not say.
func allowedCPUs() []int {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return nil
	}
	var cpus []int
	for c := range maxCPUs {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// startOn runs start, which forks a process from the calling goroutine
// (exec.Cmd.Start, syscall.ForkExec), on a thread bound to cpu alone, so
// that the process starts bound to it, and every thread it makes; then
// the thread runs where it did before. cpu < 0: start runs as it is.
// Where the thread cannot be given back its mask it stays locked to its
// goroutine, and ends with it: no other goroutine runs bound.
func startOn(cpu int, start func() error) error {
	if cpu < 0 {
		return start()
	}
	runtime.LockOSThread()
	var was, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &was); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("reading this thread's CPUs: %w", err)
	}
	one.Set(cpu)
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("binding to CPU %d: %w", cpu, err)
	}
	err := start()
	if rerr := unix.SchedSetaffinity(0, &was); rerr != nil {
		return errors.Join(err, fmt.Errorf("unbinding from CPU %d: %w", cpu, rerr))
	}
	runtime.UnlockOSThread()
	return err
}
