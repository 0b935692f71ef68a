package conduit

// yieldCPU gives the CPU to another process of the host that is ready to
// run: sched_yield, in assembly (yield_linux_amd64.s) as the runtime's
// own osyield, without the frames of package syscall's wrappers, whose
// code a crowded rank would fetch again after each context switch
// (wordWait). The Go runtime does not see this thread leave, so its
// monitor does not hand the rank's P to another thread (and wake it)
// while the call waits for its turn.
func yieldCPU()
