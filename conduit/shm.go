package conduit

import "strconv"

// shmGroup returns the ranks that exchange messages with rank through
// shared memory: those of its host (the same host identity) that have an
// inbox, in groups of at most max consecutive ranks of the host (0: one
// group per host), GASNet's supernodes. rank is in its own group; a rank
// without an inbox is in none but its own.
func shmGroup(hosts, inboxes []string, rank, max int) []int {
	if rank >= len(inboxes) || inboxes[rank] == "" || max == 1 {
		return []int{rank}
	}
	var host []int // the host's ranks that have an inbox, in order
	me := 0
	for r, h := range hosts {
		if h == hosts[rank] && r < len(inboxes) && inboxes[r] != "" {
			if r == rank {
				me = len(host)
			}
			host = append(host, r)
		}
	}
	if max <= 0 {
		return host
	}
	first := me / max * max
	return host[first:min(first+max, len(host))]
}

// groupSize says the size of the shared-memory groups, for verbose mode.
func groupSize(max int) string {
	if max <= 0 {
		return "all of them"
	}
	return "at most " + strconv.Itoa(max)
}
