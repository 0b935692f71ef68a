package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// bindOrder returns the CPUs to which the L spawner binds its count
// workers, worker i to the (i+from)-th of allowed (the CPUs the console
// may run on, its affinity mask) in turn, where bind is set, the workers
// outnumber those CPUs, and each CPU gets as many as the others (count a
// multiple of len(allowed)): allowed, rotated by from so that the jobs
// of one host do not all begin with its first CPU. Elsewhere it returns
// nil, and the kernel places and moves the workers: bound unevenly, a
// rank of a CPU with more could never move to one with fewer. Left to
// the kernel, a crowded job of 16 ranks was traced running 9 on one CPU
// and 7 on the other from its first barrier to 110 ms, where a barrier
// takes a turn on its CPU for each rank (BENCHMARKS.md).
func bindOrder(count int, bind bool, allowed []int, from int) []int {
	if !bind || !ctl.Oversubscribed(count, len(allowed)) || count%len(allowed) != 0 {
		return nil
	}
	k := from % len(allowed)
	return append(append([]int(nil), allowed[k:]...), allowed[:k]...)
}

// formatCPUs writes a bindOrder for the fork server (ctl.EnvBind).
func formatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// parseCPUs reads what formatCPUs wrote, as the fork server gets it.
func parseCPUs(s string) ([]int, error) {
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		c, err := strconv.Atoi(f)
		if err != nil || c < 0 || c >= maxCPUs {
			return nil, fmt.Errorf("%s=%q: accepted: CPU numbers 0 to %d, comma-separated (the console sets it)", ctl.EnvBind, s, maxCPUs-1)
		}
		cpus = append(cpus, c)
	}
	return cpus, nil
}

// maxCPUs is the number of CPUs an affinity mask holds here (unix.CPUSet).
const maxCPUs = 1024

// cpuFor returns the CPU worker i is bound to in order, or -1 for none.
func cpuFor(order []int, i int) int {
	if len(order) == 0 {
		return -1
	}
	return order[i%len(order)]
}
