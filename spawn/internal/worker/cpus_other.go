//go:build !linux

package worker

// cpuMask returns "" (unknown) where affinity masks are not read: the
// console then counts a host's CPUs from its ranks' runtime.NumCPU.
func cpuMask() string { return "" }
