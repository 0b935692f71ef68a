package console

import (
	"fmt"
	"github.com/udpconduit/udpconduit/spawn/internal/launch"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostLimits are the limits of this host that bound how many workers a
// job may have.
type hostLimits struct {
	NoFile  uint64 // RLIMIT_NOFILE, soft (Go raises it to the hard limit at start)
	NProc   uint64 // RLIMIT_NPROC, soft; 0 when it does not apply (root)
	PIDMax  uint64 // kernel.pid_max; 0 when unknown
	OpenFDs uint64 // descriptors this process has open now
}

// Descriptors the console keeps per worker: its control connection, two
// routed output streams when output is routed, and a pidfd per local
// process that it starts itself (see watch; those that the fork server
// starts, it reaps); and what it keeps for itself (the listener, its own
// streams, the runtime's poller, a launcher's pipes).
const (
	fdsPerWorker = 1
	fdsRouted    = 2
	fdsLocal     = 1
	fdsReserve   = 32
)

// fdsPer returns the descriptors the console holds per worker of n.
func fdsPer(n int, local, routed bool) uint64 {
	per := uint64(fdsPerWorker)
	if routed {
		per += fdsRouted
	}
	if local && !launch.ForkServed(n, routed) {
		per += fdsLocal
	}
	return per
}

// capacityError says why this host cannot run a job of n workers, or
// returns nil. local: the workers are processes of this host (L); routed:
// each sends its output over two connections of its own.
func capacityError(n int, lim hostLimits, local, routed bool) error {
	per := fdsPer(n, local, routed)
	need := uint64(n)*per + lim.OpenFDs + fdsReserve
	if lim.NoFile > 0 && need > lim.NoFile {
		most := (lim.NoFile - min(lim.NoFile, lim.OpenFDs+fdsReserve)) / per
		//lint:ignore ST1005 the message starts with the name of the argument, N
		return fmt.Errorf("N=%d: the console needs about %d file descriptors (%d per worker) and RLIMIT_NOFILE is %d (ulimit -n): at most %d workers; raise the limit or run fewer",
			n, need, per, lim.NoFile, most)
	}
	if !local {
		return nil
	}
	if lim.NProc > 0 && uint64(n) >= lim.NProc {
		//lint:ignore ST1005 the message starts with the name of the argument, N
		return fmt.Errorf("N=%d: RLIMIT_NPROC is %d processes for this user (ulimit -u): raise it or run fewer workers", n, lim.NProc)
	}
	if lim.PIDMax > 0 && uint64(n) >= lim.PIDMax {
		//lint:ignore ST1005 the message starts with the name of the argument, N
		return fmt.Errorf("N=%d: this host has at most %d process ids (kernel.pid_max): run fewer workers", n, lim.PIDMax)
	}
	return nil
}

// readLimits reads this host's limits; a limit it cannot read is 0
// (unknown, not checked).
func readLimits() hostLimits {
	var lim hostLimits
	var r unix.Rlimit
	// Unlimited is the largest value (or -1, where the field is signed).
	finite := func(c uint64) uint64 {
		if c >= 1<<62 {
			return 0
		}
		return c
	}
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) == nil {
		lim.NoFile = finite(uint64(r.Cur))
	}
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &r) == nil {
		lim.NProc = finite(uint64(r.Cur))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/pid_max"); err == nil {
		lim.PIDMax, _ = strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		lim.OpenFDs = uint64(len(ents))
	}
	return lim
}
