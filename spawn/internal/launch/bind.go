package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// bindOrder returns the CPUs to which the L spawner binds its count
// workers, worker i to cpus[i % len(cpus)], where bind is set and they
// outnumber the CPUs the console may run on (allowed, its affinity mask):
// allowed itself. Elsewhere it returns nil, and the kernel places and
// moves the workers. Bound from the start, each CPU runs as many ranks as
// the others: left to the kernel, a crowded host's ranks were measured to
// run 9 on one CPU and 7 on the other for the first 100-170 ms of a job
// of 16, and a barrier takes a turn on its CPU for each (BENCHMARKS.md).
func bindOrder(count int, bind bool, allowed []int) []int {
	if !bind || !ctl.Oversubscribed(count, len(allowed)) {
		return nil
	}
	return allowed
}

// formatCPUs and parseCPUs carry a bindOrder to the fork server
// (ctl.EnvBind).
func formatCPUs(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

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
