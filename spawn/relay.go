package spawn

import (
	"encoding/binary"
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

// The relay's wire form of a Table (DESIGN.md §7), encoded once by rank 0
// and forwarded unchanged by every other rank, so that each worker decodes
// it once and encodes nothing:
//
//	byte     tableVersion
//	uvarint  number of distinct hosts H, then H × (uvarint length, bytes)
//	uvarint  number of ranks N, then N × (uvarint host index < H,
//	         uvarint length, address bytes)
//
// A job's ranks share a few hosts, so each rank costs its address and a
// byte or two (JSON, which this replaced, repeated every host name and was
// a fifth of the CPU of bootstrapping 1024 workers on 2 cores).
const tableVersion = 1

// EncodeTable returns the relay's wire form of t.
func EncodeTable(t Table) []byte {
	index := map[string]int{}
	var hosts []string
	size := 1 + 2*binary.MaxVarintLen64
	for _, h := range t.Hosts {
		if _, ok := index[h]; !ok {
			index[h] = len(hosts)
			hosts = append(hosts, h)
			size += binary.MaxVarintLen64 + len(h)
		}
	}
	for _, a := range t.Addrs {
		size += 2*binary.MaxVarintLen64 + len(a)
	}
	b := make([]byte, 0, size)
	b = append(b, tableVersion)
	b = binary.AppendUvarint(b, uint64(len(hosts)))
	for _, h := range hosts {
		b = binary.AppendUvarint(b, uint64(len(h)))
		b = append(b, h...)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Addrs)))
	for r, a := range t.Addrs {
		h := ""
		if r < len(t.Hosts) {
			h = t.Hosts[r]
		}
		b = binary.AppendUvarint(b, uint64(index[h]))
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	return b
}

// DecodeTable parses a relayed table of n ranks. Its strings share one
// copy of b.
func DecodeTable(b []byte, n int) (Table, error) {
	bad := func() (Table, error) {
		return Table{}, fmt.Errorf("relayed address table is malformed (%d bytes for %d ranks)", len(b), n)
	}
	if len(b) == 0 || b[0] != tableVersion {
		return bad()
	}
	d := tableDecoder{s: string(b), off: 1}
	nh := d.uvarint()
	if d.err || nh == 0 || nh > uint64(len(d.s)) {
		return bad()
	}
	hosts := make([]string, nh)
	for i := range hosts {
		hosts[i] = d.str()
	}
	if nr := d.uvarint(); d.err || nr != uint64(n) {
		return bad()
	}
	t := Table{Addrs: make([]string, n), Hosts: make([]string, n)}
	for r := range n {
		h := d.uvarint()
		if d.err || h >= nh {
			return bad()
		}
		t.Hosts[r], t.Addrs[r] = hosts[h], d.str()
	}
	if d.err || d.off != len(d.s) {
		return bad()
	}
	return t, nil
}

// tableDecoder reads DecodeTable's fields; err sticks at the first field
// that runs past the end.
type tableDecoder struct {
	s   string
	off int
	err bool
}

func (d *tableDecoder) uvarint() uint64 {
	var v uint64
	for shift := 0; shift < 64; shift += 7 {
		if d.off >= len(d.s) {
			break
		}
		c := d.s[d.off]
		d.off++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	d.err = true
	return 0
}

func (d *tableDecoder) str() string {
	l := d.uvarint()
	if d.err || l > uint64(len(d.s)-d.off) {
		d.err = true
		return ""
	}
	s := d.s[d.off : d.off+int(l)]
	d.off += int(l)
	return s
}
