package worker

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// TestSetTable: a worker has its relay neighbours' addresses from the
// welcome and every rank's once SetTable took a table that agrees with
// them; a table that names another address for a neighbour, or does not
// decode, is refused and leaves the worker without one.
func TestSetTable(t *testing.T) {
	const n = 4
	tab := ctl.Table{Addrs: make([]netip.AddrPort, n), Hosts: []string{"a", "a", "b", "b"}, Inboxes: []string{"", "/proc/7/fd/3", "", ""}}
	for r := range n {
		tab.Addrs[r] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(r)}), uint16(9000+r))
	}
	blob := ctl.EncodeTable(tab)
	welcome := func() *Worker {
		return &Worker{wel: ctl.Welcome{Rank: 1, Size: n, Peers: map[int]string{0: "10.0.0.0:9000", 1: "10.0.0.1:9001", 3: "10.0.0.3:9003"}}}
	}

	w := welcome()
	if w.HasTable() {
		t.Fatal("a welcome without the table has it")
	}
	got, err := w.Addrs()
	if err != nil || got[3] != tab.Addrs[3] || got[2].IsValid() {
		t.Fatalf("before the table: %v, %v", got, err)
	}
	if err := w.SetTable(blob); err != nil {
		t.Fatal(err)
	}
	got, err = w.Addrs()
	if err != nil || !w.HasTable() || len(got) != n || got[2] != tab.Addrs[2] {
		t.Fatalf("after the table: %v, %v", got, err)
	}
	if w.Hosts()[3] != "b" || w.Inboxes()[1] != "/proc/7/fd/3" || string(w.EncodedTable()) != string(blob) {
		t.Errorf("hosts %q, inboxes %q, relayed %d bytes", w.Hosts(), w.Inboxes(), len(w.EncodedTable()))
	}

	other := tab
	other.Addrs = append([]netip.AddrPort(nil), tab.Addrs...)
	other.Addrs[3] = netip.MustParseAddrPort("10.9.9.9:9003")
	for name, b := range map[string][]byte{"another address for rank 3": ctl.EncodeTable(other), "truncated": blob[:len(blob)-1]} {
		w := welcome()
		if err := w.SetTable(b); err == nil || w.HasTable() {
			t.Errorf("%s: accepted (%v)", name, err)
		} else if name == "another address for rank 3" && !strings.Contains(err.Error(), "rank 3") {
			t.Errorf("%s: %v does not name rank 3", name, err)
		}
	}
}
