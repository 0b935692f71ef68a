package console

import (
	"fmt"
	"sort"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// assignRanks gives each of the n joined workers its rank (DESIGN.md §7).
// When any worker requested a rank, all must have, with disjoint values in
// [0, n). Otherwise workers on one host get contiguous ranks: hosts in the
// order they first joined, and within a host by spawn index, then join
// order; but when listed is set (the S spawner, whose server list the user
// wrote in rank order), rank i is the worker of spawn index i. joins is in
// join order; the result is indexed like it.
func assignRanks(joins []ctl.Join, n int, listed bool) ([]int, error) {
	if len(joins) != n {
		return nil, fmt.Errorf("spawn: %d workers joined, want %d", len(joins), n)
	}
	requested := 0
	for _, j := range joins {
		if j.Rank >= 0 {
			requested++
		}
	}
	ranks := make([]int, n)
	if requested > 0 {
		if requested != n {
			return nil, fmt.Errorf("GASNET_WORKER_RANK: set for %d of %d workers: set it for all or none", requested, n)
		}
		seen := make(map[int]string, n)
		for i, j := range joins {
			if j.Rank >= n {
				return nil, fmt.Errorf("GASNET_WORKER_RANK=%d on %s: accepted 0..%d", j.Rank, j.Name, n-1)
			}
			if other, dup := seen[j.Rank]; dup {
				return nil, fmt.Errorf("GASNET_WORKER_RANK=%d claimed by two workers (%s and %s): ranks must be disjoint", j.Rank, other, j.Name)
			}
			seen[j.Rank] = j.Name
			ranks[i] = j.Rank
		}
		return ranks, nil
	}
	if listed {
		seen := make([]bool, n)
		for i, j := range joins {
			if j.Index < 0 || j.Index >= n || seen[j.Index] {
				return nil, fmt.Errorf("spawn: worker on %s joined with spawn index %d: want each of 0..%d once", j.Name, j.Index, n-1)
			}
			seen[j.Index] = true
			ranks[i] = j.Index
		}
		return ranks, nil
	}
	hostOrder := map[string]int{}
	for _, j := range joins {
		if _, ok := hostOrder[j.Host]; !ok {
			hostOrder[j.Host] = len(hostOrder)
		}
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ja, jb := joins[order[a]], joins[order[b]]
		if ha, hb := hostOrder[ja.Host], hostOrder[jb.Host]; ha != hb {
			return ha < hb
		}
		if ja.Index >= 0 && jb.Index >= 0 && ja.Index != jb.Index {
			return ja.Index < jb.Index
		}
		return false
	})
	for rank, i := range order {
		ranks[i] = rank
	}
	return ranks, nil
}
