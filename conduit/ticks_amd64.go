package conduit

// ticks returns the processor's time-stamp counter (RDTSC): a count that
// grows at a constant rate of at least a GHz on the processors that run
// a crowded host's ranks, read without a memory access.
func ticks() uint64
