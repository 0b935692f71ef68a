package ctl

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// Table is what the relay carries: every rank's UDP address, host
// identity, shared-memory inbox ("" for none) and published addresses
// (Join.Nets; none for a rank that has only its UDP address). Ranks that
// publish the same addresses share one slice of Nets.
type Table struct {
	Addrs   []netip.AddrPort
	Hosts   []string
	Inboxes []string
	Nets    [][]Net
}

// The relay's wire form of a Table (DESIGN.md §7), encoded once by the
// console and forwarded unchanged by every rank, so that each worker
// decodes it once and encodes nothing:
//
//	byte     tableVersion
//	uvarint  number of distinct hosts H, then H × (uvarint length, bytes)
//	uvarint  number of distinct sets of published addresses S, then S ×
//	         nets
//	uvarint  number of ranks N, then N × (uvarint host index < H,
//	         address, inbox, uvarint set: 0 none, else index + 1)
//
// where nets are a uvarint count, then each net's form (addrV4 or
// addrV6), its 4 or 16 bytes, its prefix length (a byte) and MTU (uvarint).
// The ranks of a host publish the same addresses, so a set costs each
// of them about a byte, and a host of one rank its set once (11 bytes an
// IPv4 address with the MTU of an Ethernet; TestTableNetsSize).
//
// where an address is its form, then its bytes, then the port (2 bytes,
// big-endian): addrV4 and 4 bytes, or addrV6 and 16 bytes and the zone (a
// uvarint length, bytes; usually empty); and an inbox is a uvarint form: 0
// none; 1 a /proc/PID/fd/FD path as uvarint PID, uvarint FD; 2 any other
// path as uvarint length, bytes. A job's ranks share a few hosts, so each
// rank costs 8 bytes of address and five to seven of the rest; spelt out,
// the paths about doubled the table, and the addresses as text cost each
// worker a parse per rank (half of decoding a table of 1024 ranks).
const tableVersion = 5

// The forms of an address in the table.
const (
	addrV4 = 4
	addrV6 = 6
)

// The forms of an inbox in the table.
const (
	inboxNone = iota
	inboxProc
	inboxPath
)

// maxAddrLen bounds an encoded address without its zone.
const maxAddrLen = 1 + 16 + binary.MaxVarintLen64 + 2

// EncodeTable returns the relay's wire form of t, whose Addrs and Hosts
// have one entry per rank (package varenc's encoding). An address that is
// not valid is written as 0.0.0.0 port 0, which DecodeTable refuses.
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
	// The distinct sets, by their encoding.
	setIndex := map[string]int{}
	var sets []byte
	setOf := make([]int, len(t.Addrs)) // 0 none, else index + 1
	for r := range t.Addrs {
		if r >= len(t.Nets) || len(t.Nets[r]) == 0 {
			continue
		}
		enc := string(appendNets(nil, t.Nets[r]))
		i, ok := setIndex[enc]
		if !ok {
			i = len(setIndex)
			setIndex[enc] = i
			sets = append(sets, enc...)
		}
		setOf[r] = i + 1
	}
	size += binary.MaxVarintLen64 + len(sets)
	for r, a := range t.Addrs {
		size += 5*binary.MaxVarintLen64 + maxAddrLen + len(a.Addr().Zone()) + len(inbox(t, r))
	}
	b := append(make([]byte, 0, size), tableVersion)
	b = varenc.AppendStrings(b, hosts)
	b = append(varenc.AppendUint(b, uint64(len(setIndex))), sets...)
	b = varenc.AppendUint(b, uint64(len(t.Addrs)))
	for r, a := range t.Addrs {
		b = appendAddr(varenc.AppendUint(b, uint64(index[t.Hosts[r]])), a)
		b = appendInbox(b, inbox(t, r))
		b = varenc.AppendUint(b, uint64(setOf[r]))
	}
	return b
}

// appendNets appends nets' form in the table and in a Join.
func appendNets(b []byte, nets []Net) []byte {
	b = varenc.AppendUint(b, uint64(len(nets)))
	for _, n := range nets {
		a := n.Prefix.Addr()
		if a.Is4() {
			a4 := a.As4()
			b = append(append(b, addrV4), a4[:]...)
		} else {
			a16 := a.As16()
			b = append(append(b, addrV6), a16[:]...)
		}
		b = varenc.AppendUint(append(b, byte(n.Prefix.Bits())), uint64(max(n.MTU, 0)))
	}
	return b
}

// readNets reads nets that appendNets wrote: at most MaxNets, each a valid
// prefix of an address without a zone, and an MTU below 1<<20.
func readNets(d *varenc.Decoder) []Net {
	n := d.Count()
	if d.Bad || n > MaxNets {
		d.Bad = true
		return nil
	}
	if n == 0 {
		return nil
	}
	out := make([]Net, n)
	for i := range out {
		if len(d.B) < 1 {
			d.Bad = true
			return nil
		}
		var a netip.Addr
		switch form := d.B[0]; {
		case form == addrV4 && len(d.B) >= 1+4+1:
			a = netip.AddrFrom4([4]byte(d.B[1:5]))
			d.B = d.B[5:]
		case form == addrV6 && len(d.B) >= 1+16+1:
			a = netip.AddrFrom16([16]byte(d.B[1:17]))
			d.B = d.B[17:]
		default:
			d.Bad = true
			return nil
		}
		bits := int(d.B[0])
		d.B = d.B[1:]
		mtu := d.Uint()
		p := netip.PrefixFrom(a, bits)
		if d.Bad || !p.IsValid() || mtu >= 1<<20 {
			d.Bad = true
			return nil
		}
		out[i] = Net{Prefix: p, MTU: int(mtu)}
	}
	return out
}

// appendAddr appends a's form in the table.
func appendAddr(b []byte, a netip.AddrPort) []byte {
	ip := a.Addr()
	if ip.Is6() {
		b16 := ip.As16()
		b = varenc.AppendString(append(append(b, addrV6), b16[:]...), ip.Zone())
	} else {
		var b4 [4]byte
		if ip.Is4() {
			b4 = ip.As4()
		}
		b = append(append(b, addrV4), b4[:]...)
	}
	return binary.BigEndian.AppendUint16(b, a.Port())
}

// readAddr reads an address that appendAddr wrote; port 0 is refused (no
// rank's socket has it).
func readAddr(d *varenc.Decoder) netip.AddrPort {
	if d.Bad || len(d.B) == 0 {
		d.Bad = true
		return netip.AddrPort{}
	}
	var ip netip.Addr
	switch form := d.B[0]; {
	case form == addrV4 && len(d.B) >= 1+4+2:
		ip = netip.AddrFrom4([4]byte(d.B[1:5]))
		d.B = d.B[5:]
	case form == addrV6 && len(d.B) >= 1+16:
		ip = netip.AddrFrom16([16]byte(d.B[1:17]))
		d.B = d.B[17:]
		if zone := d.String(); zone != "" {
			ip = ip.WithZone(zone)
		}
	default:
		d.Bad = true
		return netip.AddrPort{}
	}
	if d.Bad || len(d.B) < 2 {
		d.Bad = true
		return netip.AddrPort{}
	}
	port := binary.BigEndian.Uint16(d.B)
	d.B = d.B[2:]
	if port == 0 {
		d.Bad = true
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ip, port)
}

// appendInbox appends path's form in the table.
func appendInbox(b []byte, path string) []byte {
	if path == "" {
		return varenc.AppendUint(b, inboxNone)
	}
	if pid, fd, ok := procPath(path); ok {
		return varenc.AppendUint(varenc.AppendUint(varenc.AppendUint(b, inboxProc), pid), fd)
	}
	return varenc.AppendString(varenc.AppendUint(b, inboxPath), path)
}

// readInbox reads an inbox that appendInbox wrote: a path spelt out, or,
// for the /proc/PID/fd/FD form, "" and the path written to procs (one
// buffer for the n ranks' paths, cut into each one's at the end).
func readInbox(d *varenc.Decoder, procs *strings.Builder, n int) (path string, proc bool) {
	switch d.Uint() {
	case inboxNone:
		return "", false
	case inboxProc:
		pid, fd := d.Uint(), d.Uint()
		if d.Bad {
			return "", false
		}
		if procs.Cap() == 0 {
			// Room for every rank's path: the PIDs and descriptors of
			// one job have about as many digits.
			procs.Grow(n * 24)
		}
		var b [64]byte
		procs.Write(appendProcFD(b[:0], pid, fd))
		return "", true
	case inboxPath:
		if s := d.String(); s != "" {
			return s, false
		}
	}
	d.Bad = true
	return "", false
}

// procFD is the path of descriptor fd of process pid.
func procFD(pid, fd uint64) string { return string(appendProcFD(nil, pid, fd)) }

// appendProcFD appends procFD(pid, fd) to b.
func appendProcFD(b []byte, pid, fd uint64) []byte {
	b = strconv.AppendUint(append(b, "/proc/"...), pid, 10)
	return strconv.AppendUint(append(b, "/fd/"...), fd, 10)
}

// procPath parses a path that procFD writes, and only those.
func procPath(path string) (pid, fd uint64, ok bool) {
	rest, found := strings.CutPrefix(path, "/proc/")
	if !found {
		return 0, 0, false
	}
	p, f, found := strings.Cut(rest, "/fd/")
	if !found {
		return 0, 0, false
	}
	pid, err1 := strconv.ParseUint(p, 10, 64)
	fd, err2 := strconv.ParseUint(f, 10, 64)
	if err1 != nil || err2 != nil || procFD(pid, fd) != path {
		return 0, 0, false
	}
	return pid, fd, true
}

// inbox is rank r's inbox in t, "" when t has none.
func inbox(t Table, r int) string {
	if r < len(t.Inboxes) {
		return t.Inboxes[r]
	}
	return ""
}

// DecodeTable parses a relayed table of n ranks. Its strings share one
// copy of b.
func DecodeTable(b []byte, n int) (Table, error) {
	bad := fmt.Errorf("relayed address table is malformed (%d bytes for %d ranks)", len(b), n)
	if len(b) == 0 || b[0] != tableVersion {
		return Table{}, bad
	}
	d := varenc.Shared(b[1:])
	hosts := d.Strings()
	if d.Bad || len(hosts) == 0 || len(hosts) > n { // distinct hosts of n >= 1 ranks
		return Table{}, bad
	}
	ns := d.Count()
	if d.Bad || ns > n {
		return Table{}, bad
	}
	sets := make([][]Net, ns)
	for i := range sets {
		if sets[i] = readNets(&d); d.Bad || len(sets[i]) == 0 {
			return Table{}, bad
		}
	}
	if nr := d.Uint(); d.Bad || nr != uint64(n) {
		return Table{}, bad
	}
	t := Table{Addrs: make([]netip.AddrPort, n), Hosts: make([]string, n), Inboxes: make([]string, n)}
	if ns > 0 {
		t.Nets = make([][]Net, n)
	}
	// The /proc paths are built into one buffer; ends holds, by rank,
	// where each one ends there (0: none).
	var procs strings.Builder
	var ends []int32
	for r := range n {
		h := d.Uint()
		if d.Bad || h >= uint64(len(hosts)) {
			return Table{}, bad
		}
		t.Hosts[r], t.Addrs[r] = hosts[h], readAddr(&d)
		var proc bool
		if t.Inboxes[r], proc = readInbox(&d, &procs, n); proc {
			if ends == nil {
				ends = make([]int32, n)
			}
			ends[r] = int32(procs.Len())
		}
		switch set := d.Uint(); {
		case d.Bad || set > uint64(ns):
			return Table{}, bad
		case set > 0:
			t.Nets[r] = sets[set-1]
		}
	}
	if d.Bad || len(d.B) != 0 {
		return Table{}, bad
	}
	all, start := procs.String(), int32(0)
	for r, e := range ends {
		if e > 0 {
			t.Inboxes[r], start = all[start:e], e
		}
	}
	return t, nil
}
