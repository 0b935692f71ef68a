package spawn

import (
	"os"
	"runtime"
)

// EnvGoMaxProcs is the Go runtime's variable for the number of threads that
// run Go code at once (its Ps).
const EnvGoMaxProcs = "GOMAXPROCS"

// EnvStartProcs marks a worker that the L spawner started with
// GOMAXPROCS=1 for its start only (see workerProcs and RestoreProcs).
const EnvStartProcs = "GASNET_SPAWN_GOMAXPROCS"

// workerProcs returns the environment the L spawner adds for its workers:
// when they outnumber the host's CPUs and the user set no GOMAXPROCS, each
// Go runtime starts with one P, and RestoreProcs gives the program the
// default once the job has started. The runtime's start with more Ps only
// adds threads (and their monitor's wake-ups) that compete for the same
// cores: hello 1024 on 2 cores takes 13% less CPU (DESIGN.md §7). After the
// start one P would cost every blocking wait a thread hand-off (testam 8
// -coll: barrier 1190 µs against 750). It is the same condition as polite
// progress (conduit). set reports whether the user set GOMAXPROCS.
func workerProcs(workers, cpus int, set bool) []string {
	if set || workers <= cpus {
		return nil
	}
	return []string{EnvGoMaxProcs + "=1", EnvStartProcs + "=1"}
}

// RestoreProcs gives a worker that the L spawner started with GOMAXPROCS=1
// the runtime's default GOMAXPROCS and removes both variables from its
// environment, so the program sees neither. Init calls it once the job has
// started; elsewhere it does nothing.
func RestoreProcs() {
	if os.Getenv(EnvStartProcs) == "" {
		return
	}
	os.Unsetenv(EnvStartProcs)
	os.Unsetenv(EnvGoMaxProcs)
	runtime.SetDefaultGOMAXPROCS()
}
