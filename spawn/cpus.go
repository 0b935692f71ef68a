package spawn

import (
	"math/bits"
	"strconv"
	"strings"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// Oversubscribed is the one rule by which udpconduit judges a host
// crowded: its ranks outnumber the CPUs they may run on together (cpus; 0:
// unknown, never crowded). The console counts those CPUs as the union of
// the ranks' affinity masks (hostCPUs), not one rank's mask: ranks that a
// launcher binds one to a core each (mpirun's default) have one CPU each
// and are not crowded, while ranks all bound to one core (taskset -c 0)
// are. On a crowded host a rank polls politely, runs one P (GOMAXPROCS=1),
// waits longer before its first retransmission, and the job uses the
// barrier that wakes each rank least (conduit chooses by this rule, from
// Welcome.HostCount and Welcome.HostCPUs; the L spawner by the console's
// own mask, which its workers inherit).
func Oversubscribed(ranks, cpus int) bool { return ctl.Oversubscribed(ranks, cpus) }

// A CPU mask is a set of CPU numbers in the text form a Join carries: its
// 64-bit words in hexadecimal, lowest first, separated by dots ("3" is
// CPUs 0 and 1; "" is unknown).

// formatMask writes the words of a CPU mask in its text form.
func formatMask(words []uint64) string {
	end := len(words)
	for end > 0 && words[end-1] == 0 {
		end--
	}
	parts := make([]string, end)
	for i, w := range words[:end] {
		parts[i] = strconv.FormatUint(w, 16)
	}
	return strings.Join(parts, ".")
}

// parseMask reads a CPU mask's text form; ok is false for a malformed one.
func parseMask(s string) (words []uint64, ok bool) {
	if s == "" {
		return nil, true
	}
	parts := strings.Split(s, ".")
	if len(parts) > 64 { // 4096 CPUs
		return nil, false
	}
	for _, p := range parts {
		w, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return nil, false
		}
		words = append(words, w)
	}
	return words, true
}

// hostCPUs returns, for each host of the table, how many CPUs its ranks
// may run on together: the size of the union of their masks. A rank whose
// mask is unknown (or malformed) counts with its CPU count instead: the
// host then has at least the most any of its ranks may use.
func hostCPUs(hosts []string, masks []string, counts []int) map[string]int {
	union := map[string][]uint64{}
	most := map[string]int{}
	for r, h := range hosts {
		most[h] = max(most[h], counts[r])
		words, ok := parseMask(masks[r])
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
