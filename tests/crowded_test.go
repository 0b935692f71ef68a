package tests

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCrowdedRanksRunOneP: ranks that outnumber their host's CPUs run
// with GOMAXPROCS=1 (the L spawner starts them so, and takes the setting
// out of their environment again), as rank 0 says in verbose mode; ranks
// that fit keep the runtime's default; the user's GOMAXPROCS, in the
// console's environment or forwarded, wins.
func TestCrowdedRanksRunOneP(t *testing.T) {
	cpus := runtime.NumCPU()
	// The runtime's own choice, which a cgroup's CPU limit may set below
	// cpus (and which ignores a GOMAXPROCS this process was given).
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	for _, tt := range []struct {
		env   []string
		n     int
		procs int    // each rank's GOMAXPROCS
		seen  string // the GOMAXPROCS its environment shows
		say   string // rank 0's verbose line, "" for none
	}{
		{[]string{"GOMAXPROCS="}, cpus + 1, 1, "", fmt.Sprintf("GOMAXPROCS=1: %d ranks share this host's %d CPUs (set GOMAXPROCS to choose)", cpus+1, cpus)},
		{[]string{"GOMAXPROCS="}, 1, def, "", ""},
		{[]string{"GOMAXPROCS=2"}, cpus + 1, 2, "2", ""},
		{[]string{"GOMAXPROCS=", "GASNET_FORWARD_ENV=GOMAXPROCS=3"}, cpus + 1, 3, "3", ""},
	} {
		env := append([]string{"GASNET_VERBOSEENV=1", "PRINT_PROCS=1", "PRINT_ENV=GOMAXPROCS"}, tt.env...)
		r := run(t, t.Name(), env, "printer", strconv.Itoa(tt.n))
		if r.code != 0 {
			t.Errorf("printer %d with %q: exit %d\nstderr:\n%s", tt.n, tt.env, r.code, r.stderr)
			continue
		}
		for rank := range tt.n {
			for _, w := range []string{fmt.Sprintf("rank %d: GOMAXPROCS %d\n", rank, tt.procs), fmt.Sprintf("rank %d: GOMAXPROCS=%q\n", rank, tt.seen)} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("printer %d with %q: want %q in stdout:\n%s", tt.n, tt.env, w, r.stdout)
				}
			}
		}
		if said := strings.Contains(r.stderr, "rank 0: GOMAXPROCS="); said != (tt.say != "") || !strings.Contains(r.stderr, tt.say) {
			t.Errorf("printer %d with %q: want rank 0 to say %q; stderr:\n%s", tt.n, tt.env, tt.say, r.stderr)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestCrowdedRanksWithoutRseq: ranks that outnumber their host's CPUs,
// started by the L spawner directly and through its fork server, start
// with GLIBC_TUNABLES=glibc.pthread.rseq=0, so that glibc registers no
// restartable-sequences area for their threads, and the program sees the
// environment its user gave; ranks that fit, and ranks whose user set
// GLIBC_TUNABLES, start as given, with glibc's area.
func TestCrowdedRanksWithoutRseq(t *testing.T) {
	cpus := runtime.NumCPU()
	const off = "glibc.pthread.rseq=0"
	for _, tt := range []struct {
		env     []string
		n       int
		rseq    string // rseqState's word
		started string // GLIBC_TUNABLES at the worker's start
		seen    string // GLIBC_TUNABLES as the program sees it
	}{
		{[]string{"GLIBC_TUNABLES="}, cpus + 1, "none", off, ""},
		{[]string{"GLIBC_TUNABLES="}, max(16, cpus+1), "none", off, ""}, // through the fork server
		{[]string{"GLIBC_TUNABLES="}, 1, "registered", "", ""},
		{[]string{"GLIBC_TUNABLES=glibc.malloc.check=0"}, cpus + 1, "registered", "glibc.malloc.check=0", "glibc.malloc.check=0"},
	} {
		env := append([]string{"GASNET_SPAWNFN=L", "PRINT_RSEQ=1", "PRINT_ENV=GLIBC_TUNABLES"}, tt.env...)
		r := run(t, t.Name(), env, "printer", strconv.Itoa(tt.n))
		if r.code != 0 {
			t.Errorf("printer %d with %q: exit %d\nstderr:\n%s", tt.n, tt.env, r.code, r.stderr)
			continue
		}
		if strings.Contains(r.stdout, "rseq no glibc") {
			t.Fatalf("the printer is not linked with glibc (built without cgo?); this test needs it:\n%s", r.stdout)
		}
		for rank := range tt.n {
			for _, w := range []string{
				fmt.Sprintf("rank %d: rseq %s; started with GLIBC_TUNABLES=%q\n", rank, tt.rseq, tt.started),
				fmt.Sprintf("rank %d: GLIBC_TUNABLES=%q\n", rank, tt.seen),
			} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("printer %d with %q: want %q in stdout:\n%s", tt.n, tt.env, w, r.stdout)
				}
			}
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}
