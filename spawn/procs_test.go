package spawn

import "testing"

func TestWorkerProcs(t *testing.T) {
	tests := []struct {
		workers, cpus int
		set           bool
		want          string
		ok            bool
	}{
		{1024, 2, false, "GOMAXPROCS=1", true},
		{3, 2, false, "GOMAXPROCS=1", true},
		{2, 2, false, "", false},   // one CPU each: the runtime's default
		{1, 8, false, "", false},   // a rank may use the host
		{1024, 2, true, "", false}, // the user's setting stands
	}
	for _, tt := range tests {
		got, ok := workerProcs(tt.workers, tt.cpus, tt.set)
		if got != tt.want || ok != tt.ok {
			t.Errorf("workerProcs(%d, %d, %v) = %q, %v; want %q, %v", tt.workers, tt.cpus, tt.set, got, ok, tt.want, tt.ok)
		}
	}
}
