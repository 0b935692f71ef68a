package ctl

import (
	"math/bits"
	"slices"
)

// A CPU mask is a set of CPU numbers in the text form a Join carries: its
// 64-bit words in hexadecimal, lowest first, separated by dots ("3" is
// CPUs 0 and 1; "" is unknown).

// HostCPUs returns, for each host of the table, how many CPUs its ranks
// may run on together: the size of the union of their masks. A rank whose
// mask is unknown (or malformed) counts with its CPU count instead: the
// host then has at least the most any of its ranks may use.
func HostCPUs(hosts []string, masks []string, counts []int) map[string]int {
	union := map[string][]uint64{}
	most := map[string]int{}
	for r, h := range hosts {
		most[h] = max(most[h], counts[r])
		words, ok := ParseMask(masks[r])
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

// Placement is what a job's address table says of its hosts: how many
// ranks each has (by host identity), how many CPUs they may run on
// together (HostCPUs), and whether any host is oversubscribed.
type Placement struct {
	OnHost  map[string]int
	CPUs    map[string]int
	Crowded bool
}

// Welcome returns rank r's Welcome as the placement of tab (Place) says
// it: its rank, the job's size and its host's count of ranks and CPUs,
// and whether the job is crowded; the caller adds how the table reaches
// the rank.
func (p Placement) Welcome(tab Table, r int) Welcome {
	h := tab.Hosts[r]
	return Welcome{Rank: r, Size: len(tab.Addrs), HostCount: p.OnHost[h], HostCPUs: p.CPUs[h], Crowded: p.Crowded, Protocol: Protocol}
}

// Place returns the placement of tab's ranks, cpus and masks holding the
// CPUs each may use (a count, 0 unknown, and an affinity mask), and tab
// with the inboxes of the ranks of hosts that do not share memory (shares,
// SharesMemory of their ranks and CPUs) left out: those ranks release them.
func Place(tab Table, cpus []int, masks []string, shares func(ranks, cpus int) bool) (Table, Placement) {
	p := Placement{OnHost: map[string]int{}, CPUs: HostCPUs(tab.Hosts, masks, cpus)}
	for _, h := range tab.Hosts {
		p.OnHost[h]++
	}
	for h, k := range p.OnHost {
		p.Crowded = p.Crowded || Oversubscribed(k, p.CPUs[h])
	}
	tab.Inboxes = slices.Clone(tab.Inboxes)
	for r := range tab.Inboxes {
		if h := tab.Hosts[r]; !shares(p.OnHost[h], p.CPUs[h]) {
			tab.Inboxes[r] = ""
		}
	}
	return tab, p
}
