package worker

import (
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"golang.org/x/sys/unix"
)

// maxMaskCPUs is the number of CPUs a unix.CPUSet holds.
const maxMaskCPUs = 1024

// cpuMask returns the CPUs this process may run on (its affinity mask) in
// a Join's text form; "" when the kernel does not say.
func cpuMask() string {
	var set unix.CPUSet
	if unix.SchedGetaffinity(0, &set) != nil {
		return ""
	}
	words := make([]uint64, maxMaskCPUs/64)
	for c := range maxMaskCPUs {
		if set.IsSet(c) {
			words[c/64] |= 1 << (c % 64)
		}
	}
	return ctl.FormatMask(words)
}
