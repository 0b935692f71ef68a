package conduit

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/udpconduit/udpconduit/conduit/internal/coll"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestShmGroup: ranks share memory with the ranks of their host that have
// an inbox, in groups of GASNET_SUPERNODE_MAXSIZE consecutive ones.
func TestShmGroup(t *testing.T) {
	hosts := []string{"a", "b", "a", "a", "b", "a", "a"}
	in := []string{"/p/0", "/p/1", "/p/2", "", "/p/4", "/p/5", "/p/6"}
	for _, c := range []struct {
		rank, max int
		want      []int
	}{
		{0, 0, []int{0, 2, 5, 6}},
		{5, 0, []int{0, 2, 5, 6}},
		{1, 0, []int{1, 4}},
		{3, 0, []int{3}}, // no inbox
		{0, 1, []int{0}},
		{0, 2, []int{0, 2}},
		{5, 2, []int{5, 6}},
		{6, 3, []int{6}},
		{2, 3, []int{0, 2, 5}},
	} {
		if got := shmGroup(shmLeaders(hosts, in, c.max), c.rank); !cmp.Equal(got, c.want) {
			t.Errorf("rank %d, max %d: %v, want %v", c.rank, c.max, got, c.want)
		}
	}
}

// TestHierTree: the members of a group have its leader as parent and no
// children; the leaders form a binomial tree rooted at rank 0 and each
// gathers its group's members too; every rank but 0 has one parent, and
// parents and children agree.
func TestHierTree(t *testing.T) {
	hosts := []string{"a", "b", "a", "a", "b", "a", "a", "c", "c", "b"}
	in := []string{"/p/0", "/p/1", "/p/2", "", "/p/4", "/p/5", "/p/6", "/p/7", "/p/8", "/p/9"}
	leaders := shmLeaders(hosts, in, 3)
	if want := []int{0, 1, 0, 3, 1, 0, 6, 7, 7, 1}; !cmp.Equal(leaders, want) {
		t.Fatalf("leaders %v, want %v", leaders, want)
	}
	if !hierarchical(leaders) || hierarchical(shmLeaders(hosts, in, 1)) || hierarchical([]int{0, 0, 0}) {
		t.Error("hierarchical is wrong")
	}
	// Leaders 0, 1, 3, 6, 7 (indexes 0..4): binomial parents 1→0, 2→0,
	// 3→2, 4→0.
	want := map[int]place{
		0: {-1, []int{1, 2, 3, 5, 7}}, 1: {0, []int{4, 9}}, 2: {0, nil}, 3: {0, []int{6}},
		4: {1, nil}, 5: {0, nil}, 6: {3, nil}, 7: {0, []int{8}}, 8: {7, nil}, 9: {1, nil},
	}
	check := func(leaders []int, want map[int]place) {
		t.Helper()
		plan := &coll.Plan{Leaders: leaders}
		for r, w := range want {
			parent, children := plan.Tree(0, r, len(leaders), nil)
			if parent != w.parent || !cmp.Equal(children, w.children, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b int) bool { return a < b })) {
				t.Errorf("leaders %v: rank %d: parent %d, children %v; want %d, %v", leaders, r, parent, children, w.parent, w.children)
			}
		}
	}
	check(leaders, want)
	// Whole hosts: a: 0 2 5 6, b: 1 4 9, c: 7 8, and 3 alone. Leaders
	// 0, 1, 3, 7; within a, ranks 2 and 5 below 0, and 6 below 5.
	check(shmLeaders(hosts, in, 0), map[int]place{
		0: {-1, []int{1, 3, 2, 5}}, 1: {0, []int{4, 9}}, 2: {0, nil}, 3: {0, []int{7}}, 4: {1, nil},
		5: {0, []int{6}}, 6: {5, nil}, 7: {3, []int{8}}, 8: {7, nil}, 9: {1, nil},
	})
}

// place is a rank's parent and children in a barrier's tree.
type place struct {
	parent   int
	children []int
}

// TestHierTreeShape: for host layouts of 1 to 40 ranks and every root, the
// two-level tree of a broadcast or reduction (coll.Plan.Tree) spans every
// rank from root, parents and children agree, and only the heads (root,
// and the other groups' leaders) exchange messages across groups.
func TestHierTreeShape(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		n := 1 + rng.IntN(40)
		hosts, in := make([]string, n), make([]string, n)
		for r := range n {
			hosts[r] = fmt.Sprint("h", rng.IntN(4))
			if rng.IntN(8) > 0 {
				in[r] = "/p"
			}
		}
		leaders := shmLeaders(hosts, in, rng.IntN(5))
		for root := range n {
			isHead := func(r int) bool { return r == root || (leaders[r] == r && leaders[r] != leaders[root]) }
			plan := &coll.Plan{Leaders: leaders}
			parents := make([]int, n)
			for r := range n {
				p, children := plan.Tree(root, r, n, nil)
				parents[r] = p
				if (r == root) != (p < 0) {
					t.Fatalf("trial %d, root %d: rank %d has parent %d", trial, root, r, p)
				}
				for _, c := range children {
					if cp, _ := plan.Tree(root, c, n, nil); cp != r {
						t.Fatalf("trial %d, root %d: rank %d lists %d as a child, whose parent is %v", trial, root, r, c, cp)
					}
					if leaders[c] != leaders[r] && !(isHead(r) && isHead(c)) {
						t.Fatalf("trial %d, root %d: link %d→%d crosses groups between ranks that are not heads", trial, root, r, c)
					}
				}
			}
			for r := range n {
				x, steps := r, 0
				for x != root {
					if x = parents[x]; x < 0 || steps > n {
						t.Fatalf("trial %d, root %d: rank %d does not reach the root", trial, root, r)
					}
					steps++
				}
			}
		}
	}
}

// TestNbrhdViewUnmappable: a group rank whose segment cannot be mapped has
// no view, on the first look and on every later one (Put and Get then send
// messages); a rank outside the group has none either.
func TestNbrhdViewUnmappable(t *testing.T) {
	var n nbrhd
	n.group = []int{0, 1, 2}
	n.setPaths([]string{"", "/proc/0/fd/999999", "/proc/0/fd/999998", "/proc/0/fd/3"})
	for range 3 {
		for r := range 4 {
			if v := n.view(r, 4096); v != nil {
				t.Fatalf("rank %d: a view of %d bytes, want nil", r, len(v))
			}
		}
	}
}
