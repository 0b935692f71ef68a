package binomial

import (
	"math/bits"
	"testing"
)

// TestTree: for every n up to 300 and every root, each rank but the root
// has exactly one parent, which lists it among its children; the ranks
// reached from the root are all n; the depth is ⌈log2 n⌉; a subtree holds
// consecutive relative ranks; and a child's round is its lowest set bit.
func TestTree(t *testing.T) {
	for n := 1; n <= 300; n++ {
		depth := 0
		for 1<<depth < n {
			depth++
		}
		for _, root := range []int{0, n / 2, n - 1} {
			seen := make([]int, n)
			// walk visits v's subtree and returns its highest rank and
			// its size: consecutive ranks when hi-v+1 == size.
			var walk func(v, d int) (hi, size int)
			walk = func(v, d int) (int, int) {
				seen[v]++
				if d > depth {
					t.Fatalf("n=%d root=%d: rank %d at depth %d > %d", n, root, v, d, depth)
				}
				hi, size := v, 1
				for m := Span(v, n) >> 1; m > 0; m >>= 1 {
					c := v + m
					if c >= n {
						continue
					}
					if Parent(c) != v || Round(c) != Round(m) {
						t.Fatalf("n=%d: child %d of %d: Parent %d, Round %d (m=%d)", n, c, v, Parent(c), Round(c), m)
					}
					chi, cs := walk(c, d+1)
					hi, size = max(hi, chi), size+cs
				}
				if hi-v+1 != size {
					t.Fatalf("n=%d: the subtree of %d (%d ranks) reaches %d: not consecutive", n, v, size, hi)
				}
				return hi, size
			}
			if hi, size := walk(0, 0); hi != n-1 || size != n {
				t.Fatalf("n=%d: the tree holds %d ranks up to %d", n, size, hi)
			}
			for v, k := range seen {
				if k != 1 {
					t.Fatalf("n=%d root=%d: relative rank %d reached %d times", n, root, v, k)
				}
				if r := Abs(v, root, n); Rel(r, root, n) != v {
					t.Fatalf("n=%d root=%d: Rel(Abs(%d)) = %d", n, root, v, Rel(r, root, n))
				}
			}
		}
	}
	if got := Children(0, 6); len(got) != 3 || got[0] != 4 || got[1] != 2 || got[2] != 1 {
		t.Errorf("Children(0, 6) = %v, want [4 2 1]", got)
	}
	if got := Children(4, 6); len(got) != 1 || got[0] != 5 {
		t.Errorf("Children(4, 6) = %v, want [5]", got)
	}
}

// TestChildren: every rank but 0 has one parent, below it, that lists it
// as a child; the tree reaches every rank within ⌈log2 N⌉ hops.
func TestChildren(t *testing.T) {
	for _, n := range []int{1, 2, 3, 7, 8, 9, 64, 1000} {
		depth := map[int]int{0: 0}
		queue := []int{0}
		for len(queue) > 0 {
			r := queue[0]
			queue = queue[1:]
			for _, c := range Children(r, n) {
				if _, seen := depth[c]; seen || c <= r || c >= n {
					t.Fatalf("n=%d: child %d of %d is out of place", n, c, r)
				}
				if p := Parent(c); p != r {
					t.Fatalf("n=%d: Parent(%d) = %d, but it is a child of %d", n, c, p, r)
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
