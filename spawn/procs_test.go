package spawn

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWorkerProcs(t *testing.T) {
	one := []string{"GOMAXPROCS=1", "GASNET_SPAWN_GOMAXPROCS=1"}
	tests := []struct {
		workers, cpus int
		set           bool
		want          []string
	}{
		{1024, 2, false, one},
		{3, 2, false, one},
		{2, 2, false, nil},   // one CPU each: the runtime's default
		{1, 8, false, nil},   // a rank may use the host
		{1024, 2, true, nil}, // the user's setting stands
	}
	for _, tt := range tests {
		got := workerProcs(tt.workers, tt.cpus, tt.set)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("workerProcs(%d, %d, %v) (-want +got):\n%s", tt.workers, tt.cpus, tt.set, d)
		}
	}
}

// TestRestoreProcs: a worker started with GOMAXPROCS=1 by the L spawner gets
// the runtime's default back, and neither variable stays in its
// environment; any other process keeps what it has.
func TestRestoreProcs(t *testing.T) {
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	t.Cleanup(runtime.SetDefaultGOMAXPROCS)
	if def == 1 {
		t.Log("this machine's default is 1: the restore cannot be told from no restore")
	}
	runtime.GOMAXPROCS(1)
	RestoreProcs() // not started by the L spawner: nothing changes
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("without %s: GOMAXPROCS %d, want 1 kept", EnvStartProcs, got)
	}
	for _, kv := range workerProcs(2, 1, false) {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	RestoreProcs()
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("GOMAXPROCS %d after RestoreProcs, want the default %d", got, def)
	}
	for _, k := range []string{EnvGoMaxProcs, EnvStartProcs} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%s left in the environment", k, v)
		}
	}
}
