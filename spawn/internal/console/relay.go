package console

import (
	"github.com/udpconduit/udpconduit/internal/binomial"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// The address table reaches the workers through a binomial tree rooted at
// rank 0 (DESIGN.md §7): the console sends the whole table to rank 0 only,
// and every other worker only the addresses of itself, its tree parent and
// its tree children, so the console sends O(N) bytes in all instead of
// O(N²). Each worker then receives the table from its parent and passes it
// on to its children over the job's own network (conduit does the relay).

// welcomes builds each rank's Welcome: the whole table for rank 0, in the
// relay's wire form, and for the others only the addresses of their tree
// neighbours. cpus and masks
// hold the CPUs each rank may use, as a count (0: unknown) and as its
// affinity mask (see ctl.HostCPUs).
//
// A rank whose host does not share memory (shares, ctl.SharesMemory of its
// ranks and CPUs) has its inbox left out of the table: it releases it.
func welcomes(tab ctl.Table, cpus []int, masks []string, env map[string]string, shares func(ranks, cpus int) bool) []ctl.Welcome {
	n := len(tab.Addrs)
	out := make([]ctl.Welcome, n)
	tab, place := ctl.Place(tab, cpus, masks, shares)
	for r := range out {
		w := place.Welcome(tab, r)
		w.Env = env
		if r == 0 {
			w.Table = ctl.EncodeTable(tab)
		} else {
			p := binomial.Parent(r)
			w.Peers = map[int]string{r: tab.Addrs[r].String(), p: tab.Addrs[p].String()}
			for _, c := range binomial.Children(r, n) {
				w.Peers[c] = tab.Addrs[c].String()
			}
		}
		out[r] = w
	}
	return out
}
