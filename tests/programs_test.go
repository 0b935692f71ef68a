package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestTestcore runs the AM core check (random short/medium/long requests
// from several goroutines per rank, exactly-once and checksums verified) on
// 4 and 8 workers, with their messages in shared memory and with every
// message on UDP (GASNET_SUPERNODE_MAXSIZE=1).
func TestTestcore(t *testing.T) {
	for _, n := range []int{4, 8} {
		for _, mode := range []string{"shm", "udp"} {
			t.Run(fmt.Sprintf("%d-%s", n, mode), func(t *testing.T) {
				marker := t.Name()
				// Shared memory asked for, whatever this host's CPUs.
				env := []string{"GASNET_STATS=1", "GASNET_SUPERNODE_MAXSIZE=0"}
				if mode == "udp" {
					env = append(env, udpOnly)
				}
				r := run(t, marker, env, "testcore", fmt.Sprint(n), "-msgs", "1500", "-threads", "3", "-seed", fmt.Sprint(n))
				if r.code != 0 {
					t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
				}
				want := fmt.Sprintf("testcore: %d ranks × 1500 requests (3 goroutines each): every request and reply ran exactly once", n)
				if !strings.Contains(r.stdout, want) {
					t.Errorf("stdout %q lacks %q", r.stdout, want)
				}
				// The ranks share this host: their messages, Puts and Gets
				// (one to each rank, and a strided Put and an indexed Get
				// to the next) took shared memory, or, with it turned
				// off, none did.
				group := "[0]"
				if mode == "shm" {
					group = fmt.Sprint(rankList(n))
				}
				if want := "testcore: rank 0 shares its segment with ranks " + group + "\n"; !strings.Contains(r.stdout, want) {
					t.Errorf("stdout %q lacks %q", r.stdout, want)
				}
				for rank, st := range jobStats(t, r.stderr, n) {
					if mode == "shm" && (st["shm-received"] == 0 || st["shm-sent"] == 0 || st["long-in-place"] == 0 || st["shm-put"] != n+1 || st["shm-get"] != n+1) {
						t.Errorf("rank %d exchanged nothing, or not every Put and Get, through shared memory: %v", rank, st)
					}
					if mode == "udp" && st["shm-sent"]+st["shm-received"]+st["long-in-place"] != 0 {
						t.Errorf("rank %d used shared memory with %s: %v", rank, udpOnly, st)
					}
				}
				checkNoSurvivors(t, marker, 2*time.Second)
			})
		}
	}
}

// TestTestamJSON checks testam's -json contract (DESIGN.md §11): one JSON
// object per measurement, every test and size present, times positive,
// bandwidth for floods. Ranks other than 0 and 1 wait.
func TestTestamJSON(t *testing.T) {
	r := run(t, t.Name(), nil, "testam", "3", "-json", "-iters", "50", "-sizes", "16,65000")
	if r.code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	type result struct {
		Test  string   `json:"test"`
		Bytes int      `json:"bytes"`
		Iters int      `json:"iters"`
		US    float64  `json:"us"`
		MBps  *float64 `json:"MBps"`
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m result
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %q is not a JSON object: %v", line, err)
		}
		if m.Iters != 50 || m.US <= 0 {
			t.Errorf("line %q: want iters 50 and a positive time", line)
		}
		if flood := strings.HasSuffix(m.Test, "_flood"); flood != (m.MBps != nil && *m.MBps > 0) {
			t.Errorf("line %q: MBps must be given for floods and only for them", line)
		}
		got = append(got, fmt.Sprintf("%s/%d", m.Test, m.Bytes))
	}
	want := []string{"short_rtt/0", "medium_rtt/16", "medium_rtt/65000", "long_rtt/16", "long_rtt/65000",
		"medium_flood/16", "medium_flood/65000", "long_flood/16", "long_flood/65000"}
	sort.Strings(got)
	sort.Strings(want)
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("measurements (-want +got):\n%s", d)
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestTestamCollectives: testam -coll runs every collective on 5 ranks
// (broadcast, all-gather and all-reduce check what they return on every
// rank) and reports each: on shared words, by default and under an
// algorithm set; over active messages under each barrier algorithm
// (GASNET_PSHM_BARRIER_HIER=0); and under the hierarchical barrier with
// shared-memory groups of two (ranks 0-1, 2-3 and 4), as rank 0 says in
// verbose mode.
func TestTestamCollectives(t *testing.T) {
	over := func(algo string) []string {
		return []string{"GASNET_BARRIER=" + algo, "GASNET_PSHM_BARRIER_HIER=0", "GASNET_VERBOSEENV=1"}
	}
	for _, c := range []struct {
		name string
		env  []string
		want string // a line of rank 0's in verbose mode
	}{
		{"default", nil, ""},
		{"AMDISSEM", over("AMDISSEM"), "rank 0: barrier AMDISSEM (GASNET_BARRIER as set)\n"},
		{"AMCENTRAL", over("AMCENTRAL"), "rank 0: barrier AMCENTRAL (GASNET_BARRIER as set)\n"},
		{"AMTREE", over("AMTREE"), "rank 0: barrier AMTREE (GASNET_BARRIER as set)\n"},
		{"AMDISSEM on words", []string{"GASNET_BARRIER=AMDISSEM", "GASNET_VERBOSEENV=1", "GASNET_SUPERNODE_MAXSIZE=0"},
			"rank 0: barrier AMDISSEM (GASNET_BARRIER as set), on shared words, by dissemination"},
		{"hierarchical", []string{"GASNET_SUPERNODE_MAXSIZE=2", "GASNET_VERBOSEENV=1"}, "rank 0: barrier in two levels, gathered and released"},
	} {
		r := run(t, t.Name(), c.env, "testam", "5", "-coll", "-iters", "30")
		if r.code != 0 {
			t.Fatalf("%s: exit %d\nstderr:\n%s", c.name, r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: want %q in stderr:\n%s", c.name, c.want, r.stderr)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			got = append(got, strings.Fields(line)[0])
		}
		if d := cmp.Diff([]string{"short_rtt", "barrier", "allgather", "broadcast", "allreduce", "allreduce_nb", "gather", "alltoall"}, got); d != "" {
			t.Errorf("%s: measurements (-want +got):\n%s\n%s", c.name, d, r.stdout)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestTestamLoops: testam -barrier and -allreduce on 5 ranks, sharing
// memory and over UDP, time six loops of the whole job's barrier or
// checked one-element all-reduce, blocking and non-blocking in turn, each
// of K calls, as GASNet's testbarrier times its six barriers.
func TestTestamLoops(t *testing.T) {
	for _, c := range []struct{ flag, name string }{{"-barrier", "barrier"}, {"-allreduce", "allreduce"}} {
		for _, maxsize := range []string{"0", "1"} {
			r := run(t, t.Name(), []string{"GASNET_SUPERNODE_MAXSIZE=" + maxsize}, "testam", "5", c.flag, "-iters", "200")
			if r.code != 0 {
				t.Fatalf("%s, GASNET_SUPERNODE_MAXSIZE=%s: exit %d\nstderr:\n%s", c.flag, maxsize, r.code, r.stderr)
			}
			var got []string
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				f := strings.Fields(line)
				if len(f) != 7 || f[4] != "µs/op" || f[5] != "5" {
					t.Fatalf("%s, GASNET_SUPERNODE_MAXSIZE=%s: line %q, want NAME K iters X µs/op 5 ranks", c.flag, maxsize, line)
				}
				if v, err := strconv.ParseFloat(f[3], 64); err != nil || v <= 0 {
					t.Errorf("%s, GASNET_SUPERNODE_MAXSIZE=%s: line %q: not a time", c.flag, maxsize, line)
				}
				got = append(got, f[0]+" "+f[1])
			}
			var want []string
			for range 3 {
				want = append(want, c.name+" 200", c.name+"_nb 200")
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s, GASNET_SUPERNODE_MAXSIZE=%s: loops (-want +got):\n%s\n%s", c.flag, maxsize, d, r.stdout)
			}
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestTestamAtomics: testam -atomics on 4 ranks, over UDP and with pairs
// sharing memory (one word changed by processor atomics and by requests at
// once), reports both phases, and rank 0 finds its counter exact (else
// testam exits 1).
func TestTestamAtomics(t *testing.T) {
	for _, maxsize := range []string{"1", "2"} {
		r := run(t, t.Name(), []string{"GASNET_SUPERNODE_MAXSIZE=" + maxsize}, "testam", "4", "-atomics", "-iters", "300")
		if r.code != 0 {
			t.Fatalf("GASNET_SUPERNODE_MAXSIZE=%s: exit %d\nstderr:\n%s", maxsize, r.code, r.stderr)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			if f := strings.Fields(line); len(f) > 4 && f[4] == "ops" {
				got = append(got, f[0]+" "+f[3])
			}
		}
		if d := cmp.Diff([]string{"atomic_one 900", "atomic_random 900"}, got); d != "" {
			t.Errorf("GASNET_SUPERNODE_MAXSIZE=%s: measurements (-want +got):\n%s\n%s", maxsize, d, r.stdout)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// crowdedBarrier is what rank 0 says of the barrier of up to 64 ranks
// that outnumber their host's CPUs, at most 512 to a CPU
// (spawn.ShmRanksPerCPU): they share memory unless
// GASNET_SUPERNODE_MAXSIZE=1.
func crowdedBarrier() string {
	if os.Getenv("GASNET_SUPERNODE_MAXSIZE") == "1" {
		return "barrier AMTREE: some host has more ranks than CPUs"
	}
	return "barrier on shared words, counted"
}

// TestAmudprun launches programs through amudprun: hello's args and ranks,
// testcore's verdict, and a scenario's exit code.
func TestAmudprun(t *testing.T) {
	marker := t.Name()
	r := run(t, marker, nil, "amudprun", "-np", "3", "-spawn", "L", filepath.Join(bin, "hello"), "x", "y z")
	if r.code != 0 || strings.Count(r.stdout, `of 3 on`) != 3 || strings.Count(r.stdout, `args=["x" "y z"]`) != 3 {
		t.Errorf("hello under amudprun: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, marker, nil, "amudprun", "-np", "4", filepath.Join(bin, "testcore"), "-msgs", "500")
	if r.code != 0 || !strings.Contains(r.stdout, "exactly once") {
		t.Errorf("testcore under amudprun: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, marker, nil, "amudprun", "-np", "2", filepath.Join(bin, "testexit"), "3")
	if r.code != 3 {
		t.Errorf("testexit 2 3 under amudprun: exit %d, want 3\nstderr:\n%s", r.code, r.stderr)
	}
	r = run(t, marker, []string{"GASNET_VERBOSEENV=0"}, "amudprun", "-v", "-np", "1", filepath.Join(bin, "hello"))
	if r.code != 0 || !strings.Contains(r.stderr, "spawner L; settings:") || !strings.Contains(r.stderr, "GASNET_VERBOSEENV") {
		t.Errorf("amudprun -v: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	checkNoSurvivors(t, marker, 2*time.Second)
}

// TestOversubscribedWorkers: when the workers outnumber the CPUs their
// blocking waits are polite and the barrier is the tree, as rank 0 says in
// verbose mode; a job that fits the CPUs spins and disseminates. The user's
// GASNET_POLL_SPIN and GASNET_BARRIER (or AMUDP_BARRIER, in any case) win,
// and a barrier not accepted ends the job before it starts with one line
// naming it.
func TestOversubscribedWorkers(t *testing.T) {
	cpus := runtime.NumCPU()
	crowded := "polite progress: " + strconv.Itoa(cpus+1) + " ranks share this host's " + strconv.Itoa(cpus) + " CPUs"
	for _, tt := range []struct {
		env  []string
		n    int
		want []string // lines of rank 0's, in stderr
	}{
		{nil, cpus + 1, []string{crowded, crowdedBarrier(), "rank 0: shared memory among the ranks of a host"}},
		{nil, 1, []string{"blocking waits spin 1ms before they sleep (1 ranks on this host's " + strconv.Itoa(cpus) + " CPUs)",
			"barrier AMDISSEM (set GASNET_BARRIER to choose)"}},
		{[]string{"GASNET_POLL_SPIN=50us", "AMUDP_BARRIER=DISSEM"}, cpus + 1, []string{
			"blocking waits spin 50µs before they sleep (GASNET_POLL_SPIN as set)", "barrier AMDISSEM (GASNET_BARRIER as set)"}},
		{[]string{"GASNET_BARRIER=amcentral", "GASNET_SUPERNODE_MAXSIZE=0"}, cpus + 1, []string{crowded, "barrier AMCENTRAL (GASNET_BARRIER as set), on shared words, counted"}},
		{[]string{"GASNET_BARRIER=AMCENTRAL", "GASNET_PSHM_BARRIER_HIER=0"}, cpus + 1, []string{crowded, "barrier AMCENTRAL (GASNET_BARRIER as set)\n"}},
		{[]string{"GASNET_BARRIER=AMTREE"}, 1, []string{"barrier AMTREE (GASNET_BARRIER as set)"}},
	} {
		r := run(t, t.Name(), append([]string{"GASNET_VERBOSEENV=1"}, tt.env...), "hello", strconv.Itoa(tt.n))
		if r.code != 0 || strings.Count(r.stdout, "hello from rank") != tt.n {
			t.Errorf("hello %d with %q: exit %d\nstdout:\n%s\nstderr:\n%s", tt.n, tt.env, r.code, r.stdout, r.stderr)
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("hello %d with %q: want %q in stderr:\n%s", tt.n, tt.env, w, r.stderr)
			}
		}
	}
	// Far more ranks than CPUs: the first retransmission waits 2 ms per
	// rank per CPU (here 128 ms) unless the user set it.
	n := 64 * cpus
	for _, env := range [][]string{{"GASNET_VERBOSEENV=1"}, {"GASNET_VERBOSEENV=1", "GASNET_REQUESTTIMEOUT_INITIAL=100000"}} {
		r := run(t, t.Name(), env, "hello", strconv.Itoa(n))
		want := fmt.Sprintf("rank 0: first retransmission after 128ms: %d ranks share this host's %d CPUs", n, cpus)
		if said := strings.Contains(r.stderr, want); r.code != 0 || said != (len(env) == 1) {
			t.Errorf("hello %d with %q: exit %d, said %q: %v\nstderr:\n%s", n, env, r.code, want, said, r.stderr)
		}
		// 64 ranks per CPU share memory by default.
		if os.Getenv("GASNET_SUPERNODE_MAXSIZE") == "" && (!strings.Contains(r.stderr, "rank 0: shared memory among the ranks of a host") || strings.Contains(r.stderr, "no shared memory")) {
			t.Errorf("hello %d with %q: rank 0 does not say it shares memory:\n%s", n, env, r.stderr)
		}
	}
	// More than 512 ranks per CPU (spawn.ShmRanksPerCPU): no shared
	// memory, as the default; on one CPU, 513 ranks.
	r := onOneCPU(t, func() result { return run(t, t.Name(), []string{"GASNET_VERBOSEENV=1"}, "hello", "513") })
	noShm := "rank 0: no shared memory between ranks: 513 ranks share this host's 1 CPUs, more than 512 to a CPU"
	if wantNoShm := os.Getenv("GASNET_SUPERNODE_MAXSIZE") == ""; r.code != 0 || strings.Contains(r.stderr, noShm) != wantNoShm {
		t.Errorf("hello 513 on one CPU: exit %d, %q said: %v, want %v\nstderr:\n%s", r.code, noShm, !wantNoShm, wantNoShm, r.stderr)
	}
	r = run(t, t.Name(), []string{"GASNET_BARRIER=butterfly"}, "hello", "2")
	want := "hello: GASNET_BARRIER=butterfly: accepted: AMDISSEM (or DISSEM), AMCENTRAL or AMTREE, or empty for the default\n"
	if r.code == 0 || r.stderr != want || r.stdout != "" {
		t.Errorf("GASNET_BARRIER=butterfly: exit %d, stderr %q, want %q; stdout %q", r.code, r.stderr, want, r.stdout)
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestReceiveThread: with GASNET_RCV_THREAD=1 a rank that computes without
// polling still runs handlers and replies (about 350 ms sooner here); without
// it, the reply waits until the rank polls again.
func TestReceiveThread(t *testing.T) {
	re := regexp.MustCompile(`reply after (\d+) ms`)
	for _, tc := range []struct {
		env  string
		fast bool
	}{{"GASNET_RCV_THREAD=1", true}, {"GASNET_RCV_THREAD=0", false}} {
		t.Run(tc.env, func(t *testing.T) {
			r := run(t, t.Name(), []string{tc.env}, "progress", "2")
			m := re.FindStringSubmatch(r.stdout)
			if r.code != 0 || m == nil {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			ms, _ := strconv.Atoi(m[1])
			if fast := ms < 150; fast != tc.fast {
				t.Errorf("reply after %d ms; want it fast (< 150 ms): %v", ms, tc.fast)
			}
			checkNoSurvivors(t, t.Name(), 2*time.Second)
		})
	}
}

// TestMisuse runs the misuse program (built with -race) on 3 workers, with
// and without the background progress goroutine: every wrong call returns
// its documented error and crashes no rank, collectives from two goroutines
// and Puts read after a non-blocking barrier raise no data race.
func TestMisuse(t *testing.T) {
	for _, rcv := range []string{"0", "1"} {
		t.Run("GASNET_RCV_THREAD="+rcv, func(t *testing.T) {
			marker := t.Name()
			r := run(t, marker, []string{"GASNET_RCV_THREAD=" + rcv}, "race/misuse", "3")
			out := r.stdout + r.stderr
			if r.code != 0 || strings.Contains(out, "FAIL") || strings.Contains(out, "DATA RACE") {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			}
			if ok := strings.Count(r.stdout, " ok "); ok != 3*59 {
				t.Errorf("%d checks passed, want %d:\n%s", ok, 3*59, r.stdout)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
}

// TestRaceStatusReachesTheConsole: a worker built with -race that calls
// Exit(0) after a data race ends with status 66; the job's code is 66 and
// the console names the rank, never 0.
func TestRaceStatusReachesTheConsole(t *testing.T) {
	r := run(t, t.Name(), nil, "race/misuse", "3", "race")
	// Rank 2 ends either by its own Exit(0) or told by the job's end,
	// whichever comes first; the console says which.
	if r.code != 66 || !regexp.MustCompile(`rank 2 \(pid \d+ on \S+\) ended with exit status 66 (although it called Exit\(0\)|after the job ended with code 0)`).MatchString(r.stderr) {
		t.Errorf("exit %d\nstderr:\n%s", r.code, r.stderr)
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestMismatchedCollectivesAreReported: ranks that call different
// collectives at one point of a team's order (an all-gather against
// barriers; reductions each to its own root, which wait for each other
// without a message; a gather against scatters, on the whole job's team
// and on a split of it; broadcasts each from its own root) never hang and
// never go on as if the calls had matched: with shared memory, every rank
// returns ErrCollectiveMismatch and the job ends 0; over UDP, every rank
// returns it, or a rank that had returned its result when the difference
// showed aborts the job with 1 naming it.
func TestMismatchedCollectivesAreReported(t *testing.T) {
	const mismatch = "the ranks called different collectives"
	for _, c := range []struct {
		n    int
		args []string
	}{{4, []string{"mismatch"}}, {3, []string{"roots"}}, {3, []string{"teams", "world"}}, {3, []string{"teams", "split"}}, {4, []string{"bcastroots"}}} {
		for _, shm := range []string{"0", "1"} {
			name := strings.Join(c.args, "-") + "/supernode=" + shm
			r := run(t, t.Name()+name, []string{"GASNET_SUPERNODE_MAXSIZE=" + shm}, "race/misuse", append([]string{fmt.Sprint(c.n)}, c.args...)...)
			lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
			errs := 0
			for _, l := range lines {
				if strings.Contains(l, mismatch) {
					errs++
				}
			}
			switch {
			case r.code == 0 && errs == c.n && r.stderr == "":
			case shm == "1" && r.code == 1 && strings.Contains(r.stderr, mismatch) && strings.Contains(r.stderr, "aborting the job"):
			default:
				t.Errorf("%s: exit %d, %d of %d ranks returned the mismatch; want 0 and every rank%s\nstdout:\n%s\nstderr:\n%s",
					name, r.code, errs, c.n, map[bool]string{true: ", or 1 and an abort naming it", false: ""}[shm == "1"], r.stdout, r.stderr)
			}
			checkNoSurvivors(t, t.Name()+name, 3*time.Second)
		}
	}
}

// TestHelp: -h, -help and --help as the first argument of any program print
// its usage, what a job is and the main settings on stdout and exit 0,
// starting no worker; after N they are the workers' arguments.
func TestHelp(t *testing.T) {
	for _, prog := range []string{"hello", "testam", "testcore", "testexit", "amudprun"} {
		for _, flag := range []string{"-h", "-help", "--help"} {
			r := run(t, t.Name()+prog, nil, prog, flag)
			if r.code != 0 || !strings.HasPrefix(r.stdout, "usage: "+prog+" ") {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", prog, flag, r.code, r.stdout, r.stderr)
			}
			if prog != "amudprun" && (!strings.Contains(r.stdout, "GASNET_SPAWNFN") || !strings.Contains(r.stdout, "GASNET_HANG_WARN=10s") ||
				strings.Contains(r.stdout, "README.md") || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "to follow a rank that ended with 0 without conduit.Exit")) {
				t.Errorf("%s %s: want the main settings' whole descriptions and every other setting, without pointing to a README the binary's user lacks:\n%s", prog, flag, r.stdout)
			}
		}
		checkNoSurvivors(t, t.Name()+prog, time.Second)
	}
	r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L"}, "hello", "1", "-h")
	if r.code != 0 || !strings.Contains(r.stdout, `args=["-h"]`) {
		t.Errorf("hello 1 -h: exit %d, stdout %q: -h after N is the workers'", r.code, r.stdout)
	}
}

// TestOutputLabelsAndFiles: amudprun -l (GASNET_OUTPUT_LABEL) prefixes each
// routed line with its rank, and stderr's with "stderr" too;
// GASNET_OUTPUT_DIR puts each rank's output in files of its own instead of
// the console's.
func TestOutputLabelsAndFiles(t *testing.T) {
	r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_STATS=1"}, "amudprun", "-np", "3", "-l", filepath.Join(bin, "testcore"), "-msgs", "20")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if !strings.HasPrefix(l, "[0] testcore: ") {
			t.Errorf("stdout line not labelled: %q", l)
		}
	}
	if !strings.Contains(r.stdout, "\n[0] testcore: 3 ranks") {
		t.Errorf("stdout lacks the labelled verdict: %q", r.stdout)
	}
	for rank := range 3 {
		if want := fmt.Sprintf("[%d stderr] testcore: rank %d stats: ", rank, rank); !strings.Contains(r.stderr, want) {
			t.Errorf("no line %q in stderr:\n%s", want, r.stderr)
		}
	}
	dir := t.TempDir() + "/out"
	r = run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_OUTPUT_DIR=" + dir}, "hello", "3", "a")
	if r.code != 0 || r.stdout != "" {
		t.Fatalf("exit %d, console stdout %q (want none)\n%s", r.code, r.stdout, r.stderr)
	}
	host, _ := os.Hostname()
	for rank := range 3 {
		b, err := os.ReadFile(fmt.Sprintf("%s/rank.%d.stdout", dir, rank))
		if want := fmt.Sprintf("hello from rank %d of 3 on %s args=[\"a\"]\n", rank, host); err != nil || string(b) != want {
			t.Errorf("rank %d's file: %q, %v; want %q", rank, b, err, want)
		}
	}
}

// TestLauncherFlagsAndWarnings: amudprun takes -n as -np and refuses the
// two when they disagree; --version names the module; a GASNET_ variable
// that no setting has gets one warning naming the nearest setting, and
// GASNET_OUTPUT_LABEL=1 without routed output says it has no effect; the
// job still runs and exits 0.
func TestLauncherFlagsAndWarnings(t *testing.T) {
	r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L"}, "amudprun", "-n", "2", filepath.Join(bin, "hello"))
	if r.code != 0 || strings.Count(r.stdout, "hello from rank") != 2 {
		t.Errorf("amudprun -n 2 hello: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = run(t, t.Name(), nil, "amudprun", "-n", "2", "-np", "3", filepath.Join(bin, "hello"))
	if r.code != 1 || !strings.Contains(r.stderr, "amudprun: -np 3 and -n 2 disagree") {
		t.Errorf("-n 2 -np 3: exit %d\n%s", r.code, r.stderr)
	}
	r = run(t, t.Name(), nil, "amudprun", "--version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "amudprun github.com/udpconduit/udpconduit ") {
		t.Errorf("--version: exit %d, %q", r.code, r.stdout)
	}
	r = run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_NETWORK_DEPTH=5", "GASNET_OUTPUT_LABEL=1", "GASNET_ROUTE_OUTPUT=0"}, "hello", "2")
	for _, want := range []string{
		"hello: warning: GASNET_NETWORK_DEPTH is not a setting of udpconduit and has no effect; did you mean GASNET_NETWORKDEPTH?\n",
		"hello: warning: GASNET_OUTPUT_LABEL=1 has no effect: the workers' output does not go through the console (GASNET_ROUTE_OUTPUT=0)\n",
	} {
		if r.code != 0 || strings.Count(r.stderr, want) != 1 {
			t.Errorf("exit %d, want 0 and once %q in stderr:\n%s", r.code, want, r.stderr)
		}
	}
	checkNoSurvivors(t, t.Name(), time.Second)
}

// rankList returns the ranks 0 to n-1.
func rankList(n int) []int {
	l := make([]int, n)
	for i := range l {
		l[i] = i
	}
	return l
}

// TestForwardedSettingsReachLocalWorkers: a setting given to the workers
// alone through GASNET_FORWARD_ENV=NAME=VALUE is in force in every worker
// of the L spawner, whether the console starts them (few) or its fork
// server does (16 or more), and a forwarded value that a setting does not
// accept is one line from the console.
func TestForwardedSettingsReachLocalWorkers(t *testing.T) {
	for _, n := range []int{2, 20} {
		r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_FORWARD_ENV=GASNET_STATS=1", "LINES=0"}, "printer", strconv.Itoa(n))
		if got := strings.Count(r.stderr, " stats: "); r.code != 0 || got != n {
			t.Errorf("printer %d: exit %d, %d stats lines, want %d; stderr:\n%s", n, r.code, got, n, r.stderr)
		}
	}
	r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_FORWARD_ENV=GASNET_NETWORKDEPTH=abc"}, "printer", "20")
	if want := `GASNET_FORWARD_ENV: GASNET_NETWORKDEPTH="abc": accepted: a decimal integer from 1 to 1024`; r.code != 1 || !strings.Contains(r.stderr, want) || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("a bad forwarded value: exit %d, stderr %q; want 1 and one line with %q", r.code, r.stderr, want)
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestConsoleOnEveryAddress: with GASNET_MASTERIP=0.0.0.0 (the console
// listens on every address) the L spawner's workers bind loopback, as a
// connection to the console would, and exchange their messages by UDP.
func TestConsoleOnEveryAddress(t *testing.T) {
	for _, n := range []string{"4", "20"} { // the console starts them; its fork server does
		r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_MASTERIP=0.0.0.0", udpOnly}, "testcore", n, "-msgs", "200")
		if want := "every request and reply ran exactly once"; r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("testcore %s: exit %d\nstdout:\n%s\nstderr:\n%s", n, r.code, r.stdout, r.stderr)
		}
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}
