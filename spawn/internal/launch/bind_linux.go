package launch

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// allowedCPUs returns the CPUs the calling thread may run on and that are
// online (sched_getaffinity), in increasing order: the process's unless
// a startOn is in progress on the thread; nil when the kernel does not
// say.
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
// the thread runs where it did before. Binding only speeds a crowded
// job: where the kernel refuses it (a seccomp filter, a CPU gone
// offline), the process starts unbound. cpu < 0: start runs as it is.
// A thread that cannot be given back its mask, nor every CPU, stays
// locked to the calling goroutine, so that no other goroutine runs
// bound; if that goroutine then ended, its thread would end with it, and
// the processes forked there with a parent-death signal would get it.
func startOn(cpu int, start func() error) error {
	if cpu < 0 {
		return start()
	}
	runtime.LockOSThread()
	var was, one unix.CPUSet
	one.Set(cpu)
	if unix.SchedGetaffinity(0, &was) != nil || unix.SchedSetaffinity(0, &one) != nil {
		runtime.UnlockOSThread()
		return start()
	}
	err := start()
	if unix.SchedSetaffinity(0, &was) == nil {
		runtime.UnlockOSThread()
		return err
	}
	var every unix.CPUSet
	for c := range maxCPUs {
		every.Set(c)
	}
	if unix.SchedSetaffinity(0, &every) == nil {
		runtime.UnlockOSThread()
	}
	return err
}
