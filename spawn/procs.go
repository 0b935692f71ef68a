package spawn

import "strconv"

// EnvGoMaxProcs is the Go runtime's variable for the number of threads that
// run Go code at once (its Ps).
const EnvGoMaxProcs = "GOMAXPROCS"

// workerProcs returns the GOMAXPROCS setting the L spawner gives its workers:
// when they outnumber the host's CPUs and the user set none, one each. More
// would only add runtime threads (and their monitor's wake-ups) that
// compete for the same cores; hello 1024 on 2 cores takes 13% less CPU
// (DESIGN.md §7). It is the same condition as polite progress (conduit). set
// reports whether the user set GOMAXPROCS.
func workerProcs(workers, cpus int, set bool) (kv string, ok bool) {
	if set || workers <= cpus {
		return "", false
	}
	return EnvGoMaxProcs + "=" + strconv.Itoa(1), true
}
