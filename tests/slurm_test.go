package tests

import (
	"bytes"
	"fmt"
	"os/exec"
	"sync"
	"testing"
	"time"
)

// The SLURM the srun tests run their jobs in.

var slurm struct {
	once sync.Once
	err  error
}

// needSlurm starts a one-node SLURM (scripts/slurm-local.sh) unless one
// answers already, and stops it after the tests if it started it.
func needSlurm(t *testing.T) {
	t.Helper()
	needCommand("srun", "slurm-client")(t)
	slurm.once.Do(func() {
		if exec.Command("sinfo", "-h").Run() == nil && exec.Command("srun", "-n", "1", "--immediate=5", "true").Run() == nil {
			return
		}
		out, err := exec.Command("../scripts/slurm-local.sh", "up").CombinedOutput()
		if err != nil {
			slurm.err = fmt.Errorf("starting SLURM with scripts/slurm-local.sh up: %v\n%s", err, out)
			return
		}
		cleanups = append(cleanups, func() { exec.Command("../scripts/slurm-local.sh", "down").Run() })
	})
	if slurm.err != nil {
		t.Fatal(slurm.err)
	}
}

// slurmIdle waits (at most 30 s) until SLURM runs no job: the node of a
// cancelled job stays COMPLETING for a while, and a new srun queues behind
// it.
func slurmIdle(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("squeue", "-h").CombinedOutput()
		if err == nil && len(bytes.TrimSpace(out)) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SLURM still has jobs after 30 s: %v\n%s", err, out)
		}
	}
}
