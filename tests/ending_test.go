package tests

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestEndAfterCollectives: a job whose last calls are collectives followed
// at once by Exit(0) gets their results on every rank, with shared memory
// on (every rank reads the others' shared words, which stay mapped however
// early their owners end) and off.
func TestEndAfterCollectives(t *testing.T) {
	for _, c := range []struct {
		n    int
		coll string
		shm  string
	}{{4, "broadcast", "0"}, {8, "broadcast", "0"}, {4, "allreduce", "0"}, {8, "allreduce", "0"}, {8, "allreduce", "1"}} {
		n := c.n
		t.Run(fmt.Sprintf("%d/%s/supernode=%s", n, c.coll, c.shm), func(t *testing.T) {
			var want []string
			for r := range n {
				if c.coll == "broadcast" {
					want = append(want, fmt.Sprintf("rank %d: broadcast \"from %d\"", r, n-1))
				} else {
					want = append(want, fmt.Sprintf("rank %d: sum %d", r, n*(n-1)/2))
				}
			}
			for i := range 3 {
				marker := fmt.Sprint(t.Name(), i)
				r := run(t, marker, []string{"GASNET_SPAWNFN=L", "GASNET_SUPERNODE_MAXSIZE=" + c.shm}, "ending", fmt.Sprint(n), c.coll)
				got := strings.Split(strings.TrimSpace(r.stdout), "\n")
				sort.Strings(got)
				sort.Strings(want)
				if d := cmp.Diff(want, got); r.code != 0 || d != "" || r.stderr != "" {
					t.Fatalf("run %d: exit %d, output (-want +got):\n%s\nstderr:\n%s", i, r.code, d, r.stderr)
				}
				checkNoSurvivors(t, marker, 3*time.Second)
			}
		})
	}
}

// TestEndLastCall: rank 0 makes one more remote call after the final
// barrier. When the others end the job with Exit(0), rank 0 is ended in
// that call and says so in one line; when every rank ends with Finalize,
// the call is answered and its result printed.
func TestEndLastCall(t *testing.T) {
	const n = 4
	ended := regexp.MustCompile(`^ending: rank 0 was ended in Get by rank [1-3]'s Exit\(0\)$`)
	r := run(t, t.Name()+"exit", []string{"GASNET_SPAWNFN=L"}, "ending", fmt.Sprint(n), "lastget-exit")
	if r.code != 0 || r.stdout != "" || !ended.MatchString(strings.TrimSpace(r.stderr)) {
		t.Errorf("Exit: exit %d, stdout %q, stderr %q; want 0, nothing, and the line %v", r.code, r.stdout, r.stderr, ended)
	}
	checkNoSurvivors(t, t.Name()+"exit", 3*time.Second)
	for i := range 3 {
		marker := fmt.Sprint(t.Name(), "final", i)
		r = run(t, marker, []string{"GASNET_SPAWNFN=L"}, "ending", fmt.Sprint(n), "lastget-final")
		if want := "rank 0 got 1003 from rank 3\n"; r.code != 0 || r.stdout != want || r.stderr != "" {
			t.Errorf("Finalize: exit %d, stdout %q, stderr %q; want 0, %q and nothing", r.code, r.stdout, r.stderr, want)
		}
		checkNoSurvivors(t, marker, 3*time.Second)
	}
}

// TestFinalizeCodes: a job that every rank ends with Finalize ends with
// the highest code passed.
func TestFinalizeCodes(t *testing.T) {
	for n, want := range map[int]int{1: 0, 2: 1, 5: 2} {
		marker := fmt.Sprint(t.Name(), n)
		r := run(t, marker, []string{"GASNET_SPAWNFN=L"}, "ending", fmt.Sprint(n), "final-codes")
		if r.code != want || r.stderr != "" {
			t.Errorf("%d ranks: exit %d, want %d\nstderr:\n%s", n, r.code, want, r.stderr)
		}
		checkNoSurvivors(t, marker, 3*time.Second)
	}
}

// TestFinalizeMisuse: a rank in Finalize while the others wait in a
// barrier is a hang the console ends (GASNET_HANG_WARN), naming Finalize;
// an Exit(0) after a rank's Finalize(3) keeps the 3, said in one line.
func TestFinalizeMisuse(t *testing.T) {
	r := run(t, t.Name()+"barrier", []string{"GASNET_SPAWNFN=L", "GASNET_HANG_WARN=500ms"}, "ending", "3", "final-barrier")
	if r.code != 1 || !regexp.MustCompile(`rank 0 in Finalize; ranks 1-2 in barrier \d+`).MatchString(r.stderr) {
		t.Errorf("Finalize beside a barrier: exit %d, want 1 and a line naming both\nstderr:\n%s", r.code, r.stderr)
	}
	checkNoSurvivors(t, t.Name()+"barrier", 3*time.Second)
	r = run(t, t.Name()+"exit", []string{"GASNET_SPAWNFN=L"}, "ending", "3", "final-exit")
	if r.code != 3 || !regexp.MustCompile(`rank [12] called Exit\(0\) after rank 0 called Finalize\(3\): the job ends with 3`).MatchString(r.stderr) {
		t.Errorf("Exit(0) after Finalize(3): exit %d, want 3 and the line\nstderr:\n%s", r.code, r.stderr)
	}
	checkNoSurvivors(t, t.Name()+"exit", 3*time.Second)
}
