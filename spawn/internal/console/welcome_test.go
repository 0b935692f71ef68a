package console

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/udpconduit/udpconduit/internal/binomial"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

func testTable(n int) ctl.Table {
	t := ctl.Table{Addrs: make([]netip.AddrPort, n), Hosts: make([]string, n)}
	for r := range n {
		t.Addrs[r] = netip.MustParseAddrPort(fmt.Sprintf("10.0.%d.%d:%d", r/250, r%250, 20000+r))
		t.Hosts[r] = fmt.Sprintf("node%04d", r/4)
	}
	return t
}

// TestWelcomesSendLinearBytes: the console's welcomes carry the whole table
// to rank 0 only; the others get their tree neighbours, so the total grows
// linearly with N (DESIGN.md §7), and each rank can reach its parent and
// children.
func TestWelcomesSendLinearBytes(t *testing.T) {
	total := func(n int) int {
		sum, tab := 0, testTable(n)
		for r, w := range welcomes(tab, make([]int, n), make([]string, n), map[string]string{"GASNET_X": "1"}, all) {
			sum += len(ctl.EncodeFrame(ctl.FrameWelcome, w))
			if r == 0 {
				continue
			}
			want := append([]int{r, binomial.Parent(r)}, binomial.Children(r, n)...)
			for _, k := range want {
				if w.Peers[k] != tab.Addrs[k].String() {
					t.Fatalf("n=%d: rank %d lacks the address of %d", n, r, k)
				}
			}
			if len(w.Peers) != len(want) || w.Table != nil {
				t.Fatalf("n=%d: rank %d gets %d addresses and a table of %d bytes, want %d and none", n, r, len(w.Peers), len(w.Table), len(want))
			}
		}
		return sum
	}
	small, big := total(512), total(4096)
	if ratio := float64(big) / float64(small); ratio > 10 {
		t.Errorf("welcome bytes grow %.1f× for 8× the ranks (%d → %d): not linear", ratio, small, big)
	}
}

// TestWelcomesSayCrowded: every rank's welcome says how many CPUs the
// ranks of its host may run on together (the union of their affinity
// masks, not one rank's: ranks bound one to a core each are not crowded)
// and whether some host has more ranks than that, the same for all, so
// that all choose the same barrier (GASNET_BARRIER).
func TestWelcomesSayCrowded(t *testing.T) {
	tab := testTable(8) // two hosts of 4 ranks
	four := func(m string) []string { return []string{m, m, m, m} }
	for _, c := range []struct {
		name     string
		masks    []string
		cpus     []int
		hostCPUs [2]int
		want     bool
	}{
		{"enough CPUs everywhere", append(four("f"), four("ff")...), []int{4, 4, 4, 4, 8, 8, 8, 8}, [2]int{4, 8}, false},
		{"bound one to a core each (mpirun)", append([]string{"1", "2", "4", "8"}, four("f")...), []int{1, 1, 1, 1, 4, 4, 4, 4}, [2]int{4, 4}, false},
		{"all bound to one core (taskset -c 0)", append(four("1"), four("f")...), []int{1, 1, 1, 1, 4, 4, 4, 4}, [2]int{1, 4}, true},
		{"overlapping masks of three CPUs", append([]string{"3", "3", "6", "6"}, four("f")...), []int{2, 2, 2, 2, 4, 4, 4, 4}, [2]int{3, 4}, true},
		{"CPUs past the first word", append([]string{"0.1", "0.2", "1", "2"}, four("f")...), []int{1, 1, 1, 1, 4, 4, 4, 4}, [2]int{4, 4}, false},
		{"unknown masks, counts enough", make([]string, 8), []int{4, 4, 4, 4, 4, 4, 4, 4}, [2]int{4, 4}, false},
		{"unknown masks, counts short", make([]string, 8), []int{2, 2, 2, 2, 8, 8, 8, 8}, [2]int{2, 8}, true},
		{"a malformed mask counts its count", append([]string{"zz", "1", "1", "1"}, four("f")...), []int{8, 1, 1, 1, 4, 4, 4, 4}, [2]int{8, 4}, false},
	} {
		for r, w := range welcomes(tab, c.cpus, c.masks, nil, all) {
			if w.Crowded != c.want || w.HostCPUs != c.hostCPUs[r/4] || w.HostCount != 4 {
				t.Errorf("%s: rank %d: Crowded %v, HostCPUs %d, HostCount %d; want %v, %d, 4", c.name, r, w.Crowded, w.HostCPUs, w.HostCount, c.want, c.hostCPUs[r/4])
			}
		}
	}
}

// all is a host rule under which every host shares memory.
func all(int, int) bool { return true }

// TestWelcomesDropInboxes: the inboxes of the ranks of a host that does not
// share memory (ctl.SharesMemory) are left out of the table rank 0 gets;
// the others stay, and the console's table is not changed.
func TestWelcomesDropInboxes(t *testing.T) {
	// Two hosts: 1025 ranks on 2 CPUs (more than 512 to a CPU), 4 on 8.
	const n = 1029
	tab := ctl.Table{Addrs: make([]netip.AddrPort, n), Hosts: make([]string, n), Inboxes: make([]string, n)}
	cpus := make([]int, n)
	for r := range n {
		tab.Addrs[r] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(r >> 8), byte(r)}), uint16(20000+r))
		tab.Hosts[r], cpus[r] = "crowded", 2
		if r >= 1025 {
			tab.Hosts[r], cpus[r] = "roomy", 8
		}
		tab.Inboxes[r] = fmt.Sprintf("/proc/%d/fd/3", 100+r)
	}
	for _, c := range []struct {
		max  int
		set  bool
		kept int // ranks whose inbox is kept: the last kept ones
	}{
		{0, false, 4}, // the crowded host uses UDP
		{0, true, n},  // unless the variable is set
		{4, true, n},
		{1, true, 0}, // 1: no shared memory anywhere
	} {
		w0 := welcomes(tab, cpus, make([]string, n), nil, func(ranks, cpus int) bool {
			return ctl.SharesMemory(c.max, c.set, ranks, cpus)
		})[0]
		got, err := ctl.DecodeTable(w0.Table, n)
		if err != nil {
			t.Fatal(err)
		}
		for r, in := range got.Inboxes {
			if keep := r >= n-c.kept; (in != "") != keep || (keep && in != tab.Inboxes[r]) {
				t.Errorf("GASNET_SUPERNODE_MAXSIZE=%d (set %v): rank %d's inbox is %q", c.max, c.set, r, in)
			}
		}
		if tab.Inboxes[0] == "" {
			t.Fatal("welcomes changed the console's table")
		}
	}
}
