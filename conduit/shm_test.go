package conduit

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
		if got := shmGroup(hosts, in, c.rank, c.max); !cmp.Equal(got, c.want) {
			t.Errorf("rank %d, max %d: %v, want %v", c.rank, c.max, got, c.want)
		}
	}
}
