package console

import (
	"math/bits"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// A CPU mask is a set of CPU numbers in the text form a Join carries: its
// 64-bit words in hexadecimal, lowest first, separated by dots ("3" is
// CPUs 0 and 1; "" is unknown).

// hostCPUs returns, for each host of the table, how many CPUs its ranks
// may run on together: the size of the union of their masks. A rank whose
// mask is unknown (or malformed) counts with its CPU count instead: the
// host then has at least the most any of its ranks may use.
func hostCPUs(hosts []string, masks []string, counts []int) map[string]int {
	union := map[string][]uint64{}
	most := map[string]int{}
	for r, h := range hosts {
		most[h] = max(most[h], counts[r])
		words, ok := ctl.ParseMask(masks[r])
		if !ok {
			continue
		}
		u := union[h]
		for len(u) < len(words) {
			u = append(u, 0)
		}
		for i, w := range words {
			u[i] |= w
		}
		union[h] = u
	}
	out := map[string]int{}
	for h, m := range most {
		n := 0
		for _, w := range union[h] {
			n += bits.OnesCount64(w)
		}
		out[h] = max(n, m)
	}
	return out
}
