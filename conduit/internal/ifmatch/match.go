// Package ifmatch chooses which of two hosts' addresses carry the traffic
// between a pair of their ranks (DESIGN.md §7.2), as Open MPI's TCP
// transport does since it replaced netmask guessing with a matching of
// local and remote interfaces: a maximum-weight bipartite matching
// between the two hosts' addresses, where a shared subnet weighs more than
// a mere same family, computed in one orientation whichever side asks, so
// that both ranks of a pair get the same answer from the same inputs.
//
// It is pure: the addresses come from the ranks' joins, and whether this
// host's kernel routes a candidate is the caller's check (Routable), which
// drops candidates but never reorders them.
package ifmatch

import (
	"bytes"
	"net/netip"
	"slices"
)

// Weight ranks a pair of addresses.
type Weight int8

// The weights of a pair of addresses, one on each host.
const (
	// None: no traffic between them (other families; loopback or
	// link-local to anything but its own subnet).
	None Weight = iota
	// Family: the same family; whether the kernels route between them is
	// for the hosts to check.
	Family
	// Subnet: on one subnet (the shorter of the two prefixes covers both).
	Subnet
)

// Pair is a candidate: the index of the address on this side and on the
// other's, with its weight.
type Pair struct {
	Local, Remote int
	Weight        Weight
}

// Net is an address of a host with its interface's prefix and MTU (0:
// unknown), as ranks publish them.
type Net struct {
	Prefix netip.Prefix
	MTU    int
}

// maxMTU bounds the MTUs that score compares.
const maxMTU = 1<<20 - 1

// score orders the pairs of one weight by the smaller of their MTUs: a
// network of jumbo frames (a data network; with IP over InfiniBand, 65520)
// carries a 65000-byte datagram in fewer fragments than one of Ethernet
// frames. None stays 0.
func score(a, b Net) int {
	w := Between(a.Prefix, b.Prefix)
	if w == None {
		return 0
	}
	return int(w)<<20 | min(max(a.MTU, 0), max(b.MTU, 0), maxMTU)
}

// Between returns the weight of a pair of addresses, each with the prefix
// of its interface. It is symmetric.
func Between(a, b netip.Prefix) Weight {
	x, y := a.Addr().Unmap(), b.Addr().Unmap()
	if !x.IsValid() || !y.IsValid() || x.Is4() != y.Is4() {
		return None
	}
	bits := min(a.Bits(), b.Bits())
	if bits >= 0 {
		px, _ := x.Prefix(bits)
		py, _ := y.Prefix(bits)
		if px == py {
			return Subnet
		}
	}
	if x.IsLoopback() || y.IsLoopback() || x.IsLinkLocalUnicast() || y.IsLinkLocalUnicast() {
		return None
	}
	return Family
}

// Candidates returns the address pairs that may carry the traffic between
// rank local, whose host has the addresses mine, and rank remote, whose
// host has theirs, best first: the pairs of a maximum-weight matching of
// the two hosts' addresses (each address in at most one), heavier first
// and, of one weight, those of larger MTU (score) first, those of one
// weight and MTU in an order rotated by the ranks so that the pairs of
// ranks of two hosts spread over the matched pairs; then every other pair
// of weight above None, in the same order. An address that both hosts have
// (the same container bridge on every host, say) is in no pair, unless the
// lists are one host's (ranks of one host): then each address pairs with
// itself. Rank remote, calling it with the arguments swapped, gets the same
// pairs, mirrored.
func Candidates(mine, theirs []Net, local, remote int) []Pair {
	if slices.Equal(mine, theirs) {
		out := make([]Pair, len(mine))
		for i := range out {
			out[i] = Pair{i, i, Subnet}
		}
		rotate(out, spreadOf(local, remote))
		return out
	}
	// One orientation for both: the host whose address list sorts first
	// (or, one host, the lower rank) is the left.
	c := compareLists(mine, theirs)
	flip := c > 0 || c == 0 && local > remote
	left, right := mine, theirs
	if flip {
		left, right = theirs, mine
	}
	w := make([][]int, len(left))
	for i, a := range left {
		w[i] = make([]int, len(right))
		for j, b := range right {
			if !has(right, a.Prefix.Addr()) && !has(left, b.Prefix.Addr()) {
				w[i][j] = score(a, b)
			}
		}
	}
	pair := func(i, j int) Pair { return Pair{i, j, Between(left[i].Prefix, right[j].Prefix)} }
	byScore := func(x, y Pair) int { return w[y.Local][y.Remote] - w[x.Local][x.Remote] }
	matched := maxMatching(w)
	var out []Pair
	inMatch := make(map[[2]int]bool, len(matched))
	for _, m := range matched {
		inMatch[m] = true
		out = append(out, pair(m[0], m[1]))
	}
	// Heavier first, then by index; then each score's run rotated.
	slices.SortStableFunc(out, byScore)
	spread := spreadOf(local, remote)
	for lo := 0; lo < len(out); {
		hi := lo
		for hi < len(out) && byScore(out[hi], out[lo]) == 0 {
			hi++
		}
		rotate(out[lo:hi], spread)
		lo = hi
	}
	var rest []Pair
	for i := range left {
		for j := range right {
			if w[i][j] != 0 && !inMatch[[2]int{i, j}] {
				rest = append(rest, pair(i, j))
			}
		}
	}
	slices.SortStableFunc(rest, byScore)
	out = append(out, rest...)
	if flip {
		for k := range out {
			out[k].Local, out[k].Remote = out[k].Remote, out[k].Local
		}
	}
	return out
}

// rotate rotates run left by spread modulo its length.
func rotate(run []Pair, spread uint64) {
	if len(run) < 2 {
		return
	}
	k := int(spread % uint64(len(run)))
	slices.Reverse(run[:k])
	slices.Reverse(run[k:])
	slices.Reverse(run)
}

// has reports whether one of l's addresses is a.
func has(l []Net, a netip.Addr) bool {
	for _, n := range l {
		if n.Prefix.Addr().Unmap() == a.Unmap() {
			return true
		}
	}
	return false
}

// spreadOf mixes a pair of ranks, whichever way round, into the rotation
// of the matched pairs.
func spreadOf(a, b int) uint64 {
	lo, hi := uint64(min(a, b)), uint64(max(a, b))
	x := lo*0x9e3779b97f4a7c15 ^ hi
	x ^= x >> 31
	x *= 0xbf58476d1ce4e5b9
	return x ^ x>>29
}

// compareLists orders two address lists by their sorted addresses.
func compareLists(a, b []Net) int {
	key := func(l []Net) []byte {
		var k []byte
		s := slices.Clone(l)
		slices.SortFunc(s, func(x, y Net) int { return x.Prefix.Addr().Compare(y.Prefix.Addr()) })
		for _, n := range s {
			k = append(k, n.Prefix.Addr().AsSlice()...)
			k = append(k, byte(n.Prefix.Bits()), 0xff)
		}
		return k
	}
	return bytes.Compare(key(a), key(b))
}

// maxMatching returns a maximum-weight matching of the bipartite graph
// whose edge (i, j) weighs w[i][j] (0: no edge; weights below 1<<22), as
// (i, j) pairs in increasing i: the Hungarian algorithm on the costs
// max−w, over the smaller side, O(n²m). It is deterministic.
func maxMatching(w [][]int) [][2]int {
	n := len(w)
	if n == 0 || len(w[0]) == 0 {
		return nil
	}
	m := len(w[0])
	if n > m {
		t := make([][]int, m)
		for j := range t {
			t[j] = make([]int, n)
			for i := range n {
				t[j][i] = w[i][j]
			}
		}
		out := maxMatching(t)
		for k := range out {
			out[k][0], out[k][1] = out[k][1], out[k][0]
		}
		slices.SortFunc(out, func(x, y [2]int) int { return x[0] - y[0] })
		return out
	}
	// Rows 1..n, columns 1..m (n <= m); cost = top − weight.
	const inf, top = 1 << 62, 1 << 22
	u, v := make([]int, n+1), make([]int, m+1)
	p, way := make([]int, m+1), make([]int, m+1) // p[j]: row matched to column j
	cost := func(i, j int) int { return top - w[i-1][j-1] }
	minv, used := make([]int, m+1), make([]bool, m+1)
	for i := 1; i <= n; i++ {
		p[0] = i
		j0 := 0
		for j := range minv {
			minv[j], used[j] = inf, false
		}
		for {
			used[j0] = true
			i0, delta, j1 := p[j0], inf, 0
			for j := 1; j <= m; j++ {
				if used[j] {
					continue
				}
				if cur := cost(i0, j) - u[i0] - v[j]; cur < minv[j] {
					minv[j], way[j] = cur, j0
				}
				if minv[j] < delta {
					delta, j1 = minv[j], j
				}
			}
			for j := 0; j <= m; j++ {
				if used[j] {
					u[p[j]] += delta
					v[j] -= delta
				} else {
					minv[j] -= delta
				}
			}
			j0 = j1
			if p[j0] == 0 {
				break
			}
		}
		for j0 != 0 {
			j1 := way[j0]
			p[j0] = p[j1]
			j0 = j1
		}
	}
	var out [][2]int
	for j := 1; j <= m; j++ {
		if i := p[j]; i != 0 && w[i-1][j-1] != 0 {
			out = append(out, [2]int{i - 1, j - 1})
		}
	}
	slices.SortFunc(out, func(x, y [2]int) int { return x[0] - y[0] })
	return out
}
