package spawn

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/binomial"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// TestRelayTree: every rank but 0 has one parent, below it, that lists it
// as a child; the tree reaches every rank within ⌈log2 N⌉ hops.
func TestRelayTree(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 9, 64, 1000} {
		depth := map[int]int{0: 0}
		queue := []int{0}
		for len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			for _, c := range binomial.Children(r, n) {
				if _, seen := depth[c]; seen || c <= r || c >= n {
					t.Fatalf("n=%d: child %d of %d is out of place", n, c, r)
				}
				if p := binomial.Parent(c); p != r {
					t.Fatalf("n=%d: binomial.Parent(%d) = %d, but it is a child of %d", n, c, p, r)
				}
				depth[c] = depth[r] + 1
				queue = append(queue, c)
			}
		}
		if len(depth) != n {
			t.Fatalf("n=%d: the tree reaches %d ranks", n, len(depth))
		}
		for r, d := range depth {
			if d > bits.Len(uint(n-1)) {
				t.Errorf("n=%d: rank %d is %d hops deep", n, r, d)
			}
		}
	}
}

func table(n int) Table {
	t := Table{Addrs: make([]string, n), Hosts: make([]string, n)}
	for r := range n {
		t.Addrs[r] = fmt.Sprintf("10.0.%d.%d:%d", r/250, r%250, 20000+r)
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
		sum, tab := 0, table(n)
		for r, w := range welcomes(tab, make([]int, n), make([]string, n), map[string]string{"GASNET_X": "1"}) {
			sum += len(ctl.EncodeFrame(ctl.FrameWelcome, w))
			if r == 0 {
				continue
			}
			want := append([]int{r, binomial.Parent(r)}, binomial.Children(r, n)...)
			for _, k := range want {
				if w.Peers[k] != tab.Addrs[k] {
					t.Fatalf("n=%d: rank %d lacks the address of %d", n, r, k)
				}
			}
			if len(w.Peers) != len(want) || w.Addrs != nil {
				t.Fatalf("n=%d: rank %d gets %d addresses, want %d", n, r, len(w.Peers)+len(w.Addrs), len(want))
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
	tab := table(8) // two hosts of 4 ranks
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
		for r, w := range welcomes(tab, c.cpus, c.masks, nil) {
			if w.Crowded != c.want || w.HostCPUs != c.hostCPUs[r/4] || w.HostCount != 4 {
				t.Errorf("%s: rank %d: Crowded %v, HostCPUs %d, HostCount %d; want %v, %d, 4", c.name, r, w.Crowded, w.HostCPUs, w.HostCount, c.want, c.hostCPUs[r/4])
			}
		}
	}
}

// TestMaskText: a CPU mask's text form reads back as written, drops
// trailing zero words, and refuses what is not one.
func TestMaskText(t *testing.T) {
	words := []uint64{0x3, 0, 1 << 63, 0, 0}
	s := formatMask(words)
	if s != "3.0.8000000000000000" {
		t.Errorf("formatMask = %q", s)
	}
	if got, ok := parseMask(s); !ok || !cmp.Equal(got, words[:3]) {
		t.Errorf("parseMask(%q) = %x, %v", s, got, ok)
	}
	for _, bad := range []string{"g", "1..2", "10000000000000000", strings.Repeat("1.", 64) + "1"} {
		if _, ok := parseMask(bad); ok {
			t.Errorf("parseMask(%q) accepted", bad)
		}
	}
	if m := cpuMask(); runtime.GOOS == "linux" && m == "" {
		t.Error("cpuMask read no affinity mask on Linux")
	}
}

func TestTableRoundTrip(t *testing.T) {
	tab := table(300)
	got, err := DecodeTable(EncodeTable(tab), 300)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tab, got); d != "" {
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
	if got, err := DecodeTable(b, 5); err != nil || got.Hosts[4] != "node0001" || got.Addrs[4] != "10.0.0.4:20004" {
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
	if _, err := DecodeTable([]byte{tableVersion, 1, 1, 'h', 1, 1, 1, 'a'}, 1); err == nil {
		t.Error("a host index out of range was accepted")
	}
	if _, err := DecodeTable([]byte{tableVersion, 1, 1, 'h', 1, 0, 200, 'a'}, 1); err == nil {
		t.Error("an address longer than the table was accepted")
	}
	if _, err := DecodeTable([]byte{tableVersion + 1, 1, 1, 'h', 1, 0, 1, 'a'}, 1); err == nil {
		t.Error("another version was accepted")
	}
	// Found by FuzzDecodeTable: a table of no ranks with a host, which
	// EncodeTable would not write back (no job has 0 ranks).
	if _, err := DecodeTable([]byte{tableVersion, 1, 0, 0}, 0); err == nil {
		t.Error("a table of 0 ranks was accepted")
	}
	if _, err := DecodeTable([]byte{tableVersion, 2, 1, 'h', 1, 'i', 1, 0, 1, 'a'}, 1); err == nil {
		t.Error("more hosts than ranks were accepted")
	}
}

// FuzzDecodeTable: whatever a tree parent sends, DecodeTable returns a
// table of exactly n ranks or an error, and a table it accepts encodes to
// a form that decodes to the same table.
func FuzzDecodeTable(f *testing.F) {
	f.Add(EncodeTable(table(3)), 3)
	f.Add(EncodeTable(table(1)), 1)
	f.Add([]byte{tableVersion, 1, 0, 1, 0, 0}, 1)
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
		if d := cmp.Diff(tab, again); d != "" {
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

// TestLocalProcs: the L spawner starts workers with one P when they
// outnumber the CPUs and the user did not set GOMAXPROCS, with the marker
// that has each worker take it out of its environment.
func TestLocalProcs(t *testing.T) {
	for _, c := range []struct {
		count, cpus int
		set         bool
		want        []string
	}{
		{3, 2, false, []string{"GOMAXPROCS=1", envProcs + "=1"}},
		{1024, 2, false, []string{"GOMAXPROCS=1", envProcs + "=1"}},
		{2, 2, false, nil},
		{1, 8, false, nil},
		{1024, 2, true, nil},
	} {
		if d := cmp.Diff(c.want, localProcs(c.count, c.cpus, c.set)); d != "" {
			t.Errorf("localProcs(%d, %d, %v) (-want +got):\n%s", c.count, c.cpus, c.set, d)
		}
	}
}
