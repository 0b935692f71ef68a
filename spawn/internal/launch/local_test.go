package launch

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// TestLocalProcs: the L spawner starts workers with one P when they
// outnumber the CPUs and the user did not set GOMAXPROCS, with the marker
// that has each worker take it out of its environment, and marks them to
// make no inbox when they are more than 4 to a CPU.
func TestLocalProcs(t *testing.T) {
	for _, c := range []struct {
		count, cpus int
		set         bool
		want        []string
	}{
		{3, 2, false, []string{"GOMAXPROCS=1", ctl.EnvProcs + "=1"}},
		{8, 2, false, []string{"GOMAXPROCS=1", ctl.EnvProcs + "=1"}},
		{9, 2, false, []string{ctl.EnvNoInbox + "=1", "GOMAXPROCS=1", ctl.EnvProcs + "=1"}},
		{1024, 2, false, []string{ctl.EnvNoInbox + "=1", "GOMAXPROCS=1", ctl.EnvProcs + "=1"}},
		{2, 2, false, nil},
		{1, 8, false, nil},
		{1024, 2, true, []string{ctl.EnvNoInbox + "=1"}},
	} {
		if d := cmp.Diff(c.want, localProcs(c.count, c.cpus, c.set)); d != "" {
			t.Errorf("localProcs(%d, %d, %v) (-want +got):\n%s", c.count, c.cpus, c.set, d)
		}
	}
}
