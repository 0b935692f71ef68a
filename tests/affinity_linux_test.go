package tests

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// onOneCPU runs f, which starts a job, with the job's processes on one
// CPU, the first of those this test may run on: they inherit the affinity
// of the thread that starts them, this one's, locked to it meanwhile.
func onOneCPU(t *testing.T, f func() result) result {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatalf("sched_getaffinity: %v", err)
	}
	for c := 0; one.Count() == 0 && c < len(all)*64; c++ {
		if all.IsSet(c) {
			one.Set(c)
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		t.Fatalf("sched_setaffinity: %v", err)
	}
	defer func() {
		if err := unix.SchedSetaffinity(0, &all); err != nil {
			t.Errorf("sched_setaffinity back: %v", err)
		}
	}()
	return f()
}
