// Package testbound gives the tests their hang bounds: how long a test
// waits for what should happen before it calls it a hang. A bound is the
// time the work takes on a quiet machine with room to spare, times Factor:
// the race detector's slowdown when the test binary is built with -race,
// the machine's load (other jobs share its CPUs), and
// $UDPCONDUIT_TEST_SLOWDOWN for a machine slower than these. A bound only
// ends a wait; no test compares a time it measured with one.
package testbound

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// RaceFactor is how much longer the work takes under the race detector
// (Go's documentation gives 2 to 20 times; the tests' jobs, which spend
// their time on synchronisation, measure 3 to 5 here).
const RaceFactor = 5

// maxLoadFactor caps what the load adds: a bound is for a hang, and a
// machine loaded beyond this is told by $UDPCONDUIT_TEST_SLOWDOWN.
const maxLoadFactor = 8

// Race reports whether the test binary is built with -race.
const Race = race

// Factor is how much slower than a quiet machine the tests may run now:
// RaceFactor under -race, times the load (the 1-minute load average per
// CPU, at least 1, at most maxLoadFactor), times $UDPCONDUIT_TEST_SLOWDOWN
// (a number >= 1) when set.
func Factor() float64 {
	f := 1.0
	if Race {
		f = RaceFactor
	}
	f *= loadFactor()
	if v, err := strconv.ParseFloat(os.Getenv("UDPCONDUIT_TEST_SLOWDOWN"), 64); err == nil && v > 1 && !math.IsInf(v, 0) {
		f *= v
	}
	return f
}

// loadFactor is the load average over the last minute per CPU of this
// machine, in [1, maxLoadFactor]; 1 when it cannot be read.
func loadFactor() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 1
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 1
	}
	return min(max(load/float64(runtime.NumCPU()), 1), maxLoadFactor)
}

// Scale is d, the time some work takes on a quiet machine without the
// race detector (with room to spare), as a hang bound: d times Factor.
func Scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Factor())
}

// Work is the hang bound of n pieces of work that take per each: the
// bound grows with the work (ranks, iterations, jobs).
func Work(per time.Duration, n int) time.Duration {
	return Scale(per * time.Duration(max(n, 1)))
}

// Deadliner is a test (testing.T): a bound never runs past its deadline.
type Deadliner interface {
	Deadline() (time.Time, bool)
}

// For is Scale(d) for test t, cut short so that a wait that reaches it
// ends, and the test says what it waited for, before go test's -timeout
// ends the whole binary (which says only where every goroutine was): at
// most 90% of the time t has left, and not less than d. t is a
// *testing.T, or a testing.TB, which is cut short only if it is a
// Deadliner (a *testing.T is; a benchmark is not).
func For(t any, d time.Duration) time.Duration {
	b := Scale(d)
	dl, ok := t.(Deadliner)
	if !ok {
		return b
	}
	if end, ok := deadline(dl); ok {
		if left := time.Until(end) * 9 / 10; b > left {
			b = max(left, d)
		}
	}
	return b
}

// deadline is t's deadline, if it has one and says it: inside a synctest
// bubble (virtual time, where no bound needs scaling) testing.T.Deadline
// panics.
func deadline(t Deadliner) (end time.Time, ok bool) {
	defer func() {
		if recover() != nil {
			end, ok = time.Time{}, false
		}
	}()
	return t.Deadline()
}
