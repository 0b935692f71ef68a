package spawn

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"testing"

	"github.com/google/go-cmp/cmp"
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
			for _, c := range TreeChildren(r, n) {
				if _, seen := depth[c]; seen || c <= r || c >= n {
					t.Fatalf("n=%d: child %d of %d is out of place", n, c, r)
				}
				if p := TreeParent(c); p != r {
					t.Fatalf("n=%d: TreeParent(%d) = %d, but it is a child of %d", n, c, p, r)
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
		for r, w := range welcomes(tab, map[string]string{"GASNET_X": "1"}) {
			b, _ := json.Marshal(w)
			sum += len(b)
			if r == 0 {
				continue
			}
			want := append([]int{r, TreeParent(r)}, TreeChildren(r, n)...)
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
