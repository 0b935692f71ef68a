package launch

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSpawnTree: for every size and out-degree, the console and the
// workers together start each worker exactly once, a worker only after its
// parent (a lower index), no process more than d, and treeDepth is the
// longest chain.
func TestSpawnTree(t *testing.T) {
	for d := 1; d <= 5; d++ {
		for n := 1; n <= 200; n++ {
			started := make([]int, n)
			depth := make([]int, n)
			for i := -1; i < n; i++ {
				first, count := spawnChildren(i, d, n)
				if count > d {
					t.Fatalf("d=%d n=%d: %d starts %d", d, n, i, count)
				}
				for c := first; c < first+count; c++ {
					if c <= i {
						t.Fatalf("d=%d n=%d: %d starts %d", d, n, i, c)
					}
					started[c]++
					depth[c] = 1
					if i >= 0 {
						depth[c] = depth[i] + 1
					}
				}
			}
			most := 0
			for c, k := range started {
				if k != 1 {
					t.Fatalf("d=%d n=%d: worker %d started %d times", d, n, c, k)
				}
				most = max(most, depth[c])
			}
			if n > d && treeDepth(d, n) != most {
				t.Fatalf("d=%d n=%d: treeDepth %d, longest chain %d", d, n, treeDepth(d, n), most)
			}
		}
	}
	if treeDepth(0, 100) != 1 || treeDepth(4, 4) != 1 {
		t.Error("without a tree the depth is 1")
	}
}

// TestTreeLine: a spawn tree worker's TreeInfo survives its session line,
// and a line that is not one is refused.
func TestTreeLine(t *testing.T) {
	in := &TreeInfo{Servers: []string{"a", "b:2222", "user@c"}, Degree: 2, Program: "/p q", Args: []string{"x y", ""}, Dir: "/d"}
	line := treeLine(in)
	if strings.ContainsAny(line, "\n ") {
		t.Fatalf("line %q holds a newline or a space", line)
	}
	out, err := ParseTreeLine(line + "\n")
	if err != nil || !cmp.Equal(in, out) {
		t.Errorf("ParseTreeLine: %+v, %v; want %+v", out, err, in)
	}
	for _, bad := range []string{"zz", line[:len(line)-2], line + "00"} {
		if _, err := ParseTreeLine(bad); err == nil {
			t.Errorf("ParseTreeLine(%q) accepted", bad)
		}
	}
}
