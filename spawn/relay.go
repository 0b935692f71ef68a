package spawn

import (
	"encoding/json"
	"fmt"
	"math/bits"
)

// The address table reaches the workers through a binomial tree rooted at
// rank 0 (DESIGN.md §7): the console sends the whole table to rank 0 only,
// and every other worker only the addresses of itself, its tree parent and
// its tree children, so the console sends O(N) bytes in all instead of
// O(N²). Each worker then receives the table from its parent and passes it
// on to its children over the job's own network (conduit does the relay).

// TreeParent returns the parent of rank r > 0 in the relay tree: r without
// its highest set bit.
func TreeParent(r int) int {
	return r &^ (1 << (bits.Len(uint(r)) - 1))
}

// TreeChildren returns the children of rank r in the relay tree of n
// ranks: r + 2^k for every 2^k above r, while below n.
func TreeChildren(r, n int) []int {
	var out []int
	for k := 1 << bits.Len(uint(r)); r+k < n; k <<= 1 {
		out = append(out, r+k)
	}
	return out
}

// Table is what the relay carries: every rank's UDP address and host
// identity.
type Table struct {
	Addrs []string `json:"addrs"`
	Hosts []string `json:"hosts"`
}

// welcomes builds each rank's Welcome: the whole table for rank 0, and for
// the others only the addresses of their tree neighbours.
func welcomes(tab Table, env map[string]string) []Welcome {
	n := len(tab.Addrs)
	out := make([]Welcome, n)
	onHost := map[string]int{}
	for _, h := range tab.Hosts {
		onHost[h]++
	}
	for r := range out {
		w := Welcome{Rank: r, Size: n, Env: env, HostCount: onHost[tab.Hosts[r]]}
		if r == 0 {
			w.Addrs, w.Hosts = tab.Addrs, tab.Hosts
		} else {
			w.Peers = map[int]string{r: tab.Addrs[r], TreeParent(r): tab.Addrs[TreeParent(r)]}
			for _, c := range TreeChildren(r, n) {
				w.Peers[c] = tab.Addrs[c]
			}
		}
		out[r] = w
	}
	return out
}

// EncodeTable and DecodeTable are the relay's wire form of a Table.
func EncodeTable(t Table) []byte {
	b, _ := json.Marshal(t) // strings only: cannot fail
	return b
}

// DecodeTable parses a relayed table of n ranks.
func DecodeTable(b []byte, n int) (Table, error) {
	var t Table
	if err := json.Unmarshal(b, &t); err != nil || len(t.Addrs) != n || len(t.Hosts) != n {
		return Table{}, fmt.Errorf("relayed address table is malformed (%d bytes for %d ranks)", len(b), n)
	}
	return t, nil
}
