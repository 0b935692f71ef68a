package ctl

import "testing"

// TestSharesMemory: a host's ranks share memory unless
// GASNET_SUPERNODE_MAXSIZE=1, or they are more than ShmRanksPerCPU to a
// CPU and the variable is not set; a host of unknown CPUs shares it.
func TestSharesMemory(t *testing.T) {
	for _, c := range []struct {
		max         int
		set         bool
		ranks, cpus int
		want        bool
	}{
		{0, false, 2, 2, true},
		{0, false, 64, 2, true},
		{0, false, 1024, 2, true},  // 512 to a CPU
		{0, false, 1025, 2, false}, // more
		{0, false, 4096, 2, false},
		{0, true, 4096, 2, true},
		{2, true, 9, 2, true},
		{1, true, 2, 2, false},
		{1, false, 2, 2, false},
		{0, false, 1024, 0, true}, // CPUs unknown
	} {
		if got := SharesMemory(c.max, c.set, c.ranks, c.cpus); got != c.want {
			t.Errorf("SharesMemory(%d, %v, %d ranks, %d CPUs) = %v, want %v", c.max, c.set, c.ranks, c.cpus, got, c.want)
		}
	}
}
