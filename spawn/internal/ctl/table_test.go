package ctl

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTableRoundTrip(t *testing.T) {
	tab := table(300)
	got, err := DecodeTable(EncodeTable(tab), 300)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tab, got, eqAddr); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := DecodeTable(EncodeTable(tab), 301); err == nil {
		t.Error("a table of 300 ranks was accepted for 301")
	}
	if _, err := DecodeTable([]byte("{garbage"), 1); err == nil {
		t.Error("garbage was accepted")
	}
}

// TestTableMalformed: every truncation of a table, a byte past its end, a
// host index out of range and a length past the end are refused.
func TestTableMalformed(t *testing.T) {
	b := EncodeTable(table(5))
	if got, err := DecodeTable(b, 5); err != nil || got.Hosts[4] != "node0001" || got.Addrs[4] != netip.MustParseAddrPort("10.0.0.4:20004") {
		t.Fatalf("the table itself: %+v, %v", got, err)
	}
	for i := range len(b) {
		if _, err := DecodeTable(b[:i], 5); err == nil {
			t.Errorf("truncated to %d of %d bytes: accepted", i, len(b))
		}
	}
	if _, err := DecodeTable(append(b[:len(b):len(b)], 0), 5); err == nil {
		t.Error("a byte past the end was accepted")
	}
	// Version, 1 host "h", 1 rank of host 1 (there is only host 0).
	if _, err := DecodeTable(cat([]byte{tableVersion, 1, 1, 'h', 1, 1}, addrA, []byte{0}), 1); err == nil {
		t.Error("a host index out of range was accepted")
	}
	if _, err := DecodeTable(cat([]byte{tableVersion + 1, 1, 1, 'h', 1, 0}, addrA, []byte{0}), 1); err == nil {
		t.Error("another version was accepted")
	}
	// Found by FuzzDecodeTable: a table of no ranks with a host, which
	// EncodeTable would not write back (no job has 0 ranks).
	if _, err := DecodeTable([]byte{tableVersion, 1, 0, 0}, 0); err == nil {
		t.Error("a table of 0 ranks was accepted")
	}
	if _, err := DecodeTable(cat([]byte{tableVersion, 2, 1, 'h', 1, 'i', 1, 0}, addrA, []byte{0}), 1); err == nil {
		t.Error("more hosts than ranks were accepted")
	}
}

// TestTableInboxForms: an inbox takes 3 to 7 bytes as /proc/PID/fd/N and
// is spelt out otherwise; an unknown form, a truncated one and an empty
// spelt-out path are refused.
func TestTableInboxForms(t *testing.T) {
	one := func(inbox string) []byte {
		return EncodeTable(Table{Addrs: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.1:20000")}, Hosts: []string{"h"}, Inboxes: []string{inbox}})
	}
	base := len(one("")) - 1 // the table without the inbox byte of ""
	for _, c := range []struct {
		inbox string
		extra int
	}{
		{"/proc/4194304/fd/1023", 1 + 4 + 2}, // the largest PID, a high descriptor
		{"/proc/7/fd/3", 1 + 1 + 1},
		{"/proc/007/fd/3", 1 + 1 + len("/proc/007/fd/3")},
		{"/dev/shm/x", 1 + 1 + len("/dev/shm/x")},
		{"/proc/7/fd/", 1 + 1 + len("/proc/7/fd/")},
	} {
		b := one(c.inbox)
		if got := len(b) - base; got != c.extra {
			t.Errorf("inbox %q costs %d bytes, want %d", c.inbox, got, c.extra)
		}
		tab, err := DecodeTable(b, 1)
		if err != nil || tab.Inboxes[0] != c.inbox {
			t.Errorf("inbox %q decoded as %q, %v", c.inbox, tab.Inboxes, err)
		}
	}
	head := cat([]byte{tableVersion, 1, 1, 'h', 1, 0}, addrA)
	for _, tail := range [][]byte{{3}, {inboxProc, 7}, {inboxPath, 0}, {inboxPath, 2, 'x'}} {
		if _, err := DecodeTable(append(head[:len(head):len(head)], tail...), 1); err == nil {
			t.Errorf("inbox form % x was accepted", tail)
		}
	}
}

// addrA is 10.0.0.1:20000 in the table's form.
var addrA = []byte{addrV4, 10, 0, 0, 1, 0x4e, 0x20}

// cat returns the concatenation of bs.
func cat(bs ...[]byte) []byte {
	var out []byte
	for _, b := range bs {
		out = append(out, b...)
	}
	return out
}

// TestTableAddressForms: an IPv4 address takes 7 bytes, an IPv6 one 20
// and its zone; each decodes to the address encoded (an IPv4-mapped IPv6
// address stays one); an unknown form, a truncated address and port 0
// are refused.
func TestTableAddressForms(t *testing.T) {
	one := func(a netip.AddrPort) []byte {
		return EncodeTable(Table{Addrs: []netip.AddrPort{a}, Hosts: []string{"h"}, Inboxes: []string{""}})
	}
	base := len(one(netip.MustParseAddrPort("10.0.0.1:9"))) - 7
	for _, c := range []struct {
		addr string
		size int
	}{
		{"10.0.0.1:20000", 7},
		{"255.255.255.255:65535", 7},
		{"[::1]:9", 20},
		{"[fe80::1%eth0]:9", 24},
		{"[::ffff:10.0.0.1]:9", 20},
	} {
		a := netip.MustParseAddrPort(c.addr)
		b := one(a)
		if got := len(b) - base; got != c.size {
			t.Errorf("%s costs %d bytes, want %d", c.addr, got, c.size)
		}
		tab, err := DecodeTable(b, 1)
		if err != nil || tab.Addrs[0] != a {
			t.Errorf("%s decoded as %v, %v", c.addr, tab.Addrs, err)
		}
	}
	head := []byte{tableVersion, 1, 1, 'h', 1, 0}
	for _, addr := range [][]byte{
		{5, 10, 0, 0, 1, 0, 9},                                // no such form
		{addrV4, 10, 0, 0, 1, 0, 0},                           // port 0
		{addrV4, 10, 0, 0, 1, 0},                              // truncated port
		{addrV6, 0, 0, 0, 0, 0, 0, 1},                         // truncated address
		cat([]byte{addrV6}, make([]byte, 16), []byte{5, 'e'}), // zone past the end
	} {
		if _, err := DecodeTable(cat(head, addr, []byte{inboxNone}), 1); err == nil {
			t.Errorf("address % x was accepted", addr)
		}
	}
	if _, err := DecodeTable(one(netip.AddrPort{}), 1); err == nil {
		t.Error("a table with an invalid address was accepted")
	}
}

// FuzzDecodeTable: whatever a tree parent sends, DecodeTable returns a
// table of exactly n ranks or an error, and a table it accepts encodes to
// a form that decodes to the same table.
func FuzzDecodeTable(f *testing.F) {
	f.Add(EncodeTable(table(3)), 3)
	f.Add(EncodeTable(table(1)), 1)
	f.Add([]byte{tableVersion, 1, 0, 1, 0, addrV4, 1, 2, 3, 4, 0, 9, 0}, 1)
	f.Add(cat([]byte{tableVersion, 1, 1, 'h', 1, 0}, addrA, []byte{inboxProc, 7, 3}), 1)
	f.Add(cat([]byte{tableVersion, 1, 1, 'h', 1, 0, addrV6}, make([]byte, 16), []byte{2, 'e', '0', 0, 9, 0}), 1)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 4096 {
			return
		}
		tab, err := DecodeTable(b, n)
		if err != nil {
			return
		}
		if len(tab.Addrs) != n || len(tab.Hosts) != n {
			t.Fatalf("%d ranks decoded as %d addresses, %d hosts", n, len(tab.Addrs), len(tab.Hosts))
		}
		again, err := DecodeTable(EncodeTable(tab), n)
		if err != nil {
			t.Fatalf("re-encoded table refused: %v", err)
		}
		if d := cmp.Diff(tab, again, eqAddr); d != "" {
			t.Fatalf("round trip (-first +second):\n%s", d)
		}
	})
}

// BenchmarkDecodeTable decodes the table of 1024 ranks on 256 hosts, as
// every worker of such a job does once, against encoding/json's decoding
// of the same table (the relay's earlier form).
func BenchmarkDecodeTable(b *testing.B) {
	tab := table(1024)
	blob := EncodeTable(tab)
	js, _ := json.Marshal(tab)
	b.Run("binary", func(b *testing.B) {
		b.ReportMetric(float64(len(blob)), "bytes/table")
		for b.Loop() {
			if _, err := DecodeTable(blob, 1024); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportMetric(float64(len(js)), "bytes/table")
		for b.Loop() {
			var t Table
			if err := json.Unmarshal(js, &t); err != nil {
				b.Fatal(err)
			}
		}
	})
}
func table(n int) Table {
	t := Table{Addrs: make([]netip.AddrPort, n), Hosts: make([]string, n), Inboxes: make([]string, n)}
	for r := range n {
		t.Addrs[r] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(r / 250), byte(r % 250)}), uint16(20000+r))
		t.Hosts[r] = fmt.Sprintf("node%04d", r/4)
		switch {
		case r%7 == 0: // a path that is not /proc/PID/fd/N, spelt out
			t.Inboxes[r] = fmt.Sprintf("/proc/0%d/fd/7", r)
		case r%3 != 0:
			t.Inboxes[r] = fmt.Sprintf("/proc/%d/fd/%d", 1000+r, r)
		}
	}
	return t
}

// eqAddr compares addresses as Go's == does (go-cmp does not look into
// netip's unexported fields).
var eqAddr = cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })

// eqPrefix compares prefixes as Go's == does.
var eqPrefix = cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

// withNets gives the ranks of tab's hosts published addresses: a network
// of its own per host (10.H/16 with H the host's number), a shared data
// network (an IPv6 /64) with jumbo frames, and none for every fifth host.
func withNets(tab Table, perHost int) Table {
	tab.Nets = make([][]Net, len(tab.Addrs))
	for r := range tab.Addrs {
		h := r / perHost
		if h%5 == 4 {
			continue
		}
		v6 := netip.AddrFrom16([16]byte{0xfd, 0, 15: byte(h), 14: byte(h >> 8)})
		tab.Nets[r] = []Net{
			{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(h >> 8), byte(h), 1}), 16), 1500},
			{netip.PrefixFrom(v6, 64), 9000},
		}
	}
	return tab
}

// TestTableNets: published addresses go round the table; ranks that
// publish the same addresses share one set, whose every field is kept.
func TestTableNets(t *testing.T) {
	tab := withNets(table(300), 4)
	got, err := DecodeTable(EncodeTable(tab), 300)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tab, got, eqAddr, eqPrefix); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if &got.Nets[0][0] != &got.Nets[3][0] {
		t.Error("ranks of one host do not share their set")
	}
	if got.Nets[16] != nil {
		t.Errorf("rank 16 published nothing but decodes %v", got.Nets[16])
	}
	blob := EncodeTable(tab)
	for i := range len(blob) - 1 {
		if _, err := DecodeTable(blob[:i], 300); err == nil {
			t.Fatalf("truncated at %d of %d bytes: accepted", i, len(blob))
		}
	}
}

// TestTableNetsSize measures what published addresses add to the table of
// 16384 ranks, per rank (DESIGN.md §7.2): with one rank a host, each
// rank's set once; with 32 a host, a set per host shared by its ranks.
func TestTableNetsSize(t *testing.T) {
	const n = 16384
	for _, perHost := range []int{1, 32} {
		plain := table(n)
		for r := range plain.Hosts {
			plain.Hosts[r] = fmt.Sprintf("node%05d", r/perHost)
		}
		added := float64(len(EncodeTable(withNets(plain, perHost)))-len(EncodeTable(plain))) / n
		t.Logf("%d ranks a host: %.1f bytes a rank for 2 addresses (IPv4 and IPv6)", perHost, added)
		// A set is 1 + (1+4+1+2) + (1+16+1+2) = 29 bytes, and each rank
		// its set's index, up to 3 bytes.
		if limit := 29.0/float64(perHost) + 3; added > limit {
			t.Errorf("%d ranks a host: %.1f bytes a rank, above %.1f", perHost, added, limit)
		}
	}
}

// TestJoinNets: a Join's addresses go round its codec.
func TestJoinNets(t *testing.T) {
	j := Join{Rank: -1, Index: 3, UDP: "10.0.0.1:4000", Nets: withNets(table(1), 1).Nets[0]}
	var got Join
	if err := DecodeBody(j.AppendBody(nil), &got); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(j, got, eqPrefix); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	j.Nets = make([]Net, MaxNets+1)
	for i := range j.Nets {
		j.Nets[i] = Net{netip.MustParsePrefix("10.0.0.1/24"), 1500}
	}
	if err := DecodeBody(j.AppendBody(nil), &got); err == nil {
		t.Errorf("a Join of %d addresses was accepted", len(j.Nets))
	}
}
