// Package tests holds the end-to-end tests: they build the programs and run
// real jobs of real processes.
package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
)

var bin string

// cleanups run after every test: they stop daemons the tests started.
var cleanups []func()

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "udpconduit-e2e")
	if err != nil {
		panic(err)
	}
	bin = dir
	build := exec.Command("go", "build", "-o", dir+"/", "../cmd/hello", "../cmd/amudprun", "../cmd/testam", "../cmd/testcore", "../cmd/testexit", "./testdata/printer", "./testdata/progress", "./testdata/attacker", "./testdata/ending", "./testdata/mismatch", "../spawn/internal/pmi/testdata/pmiprobe")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the programs:", err)
		os.Exit(1)
	}
	// hello without the S spawner (TestBuiltWithoutSSH).
	build = exec.Command("go", "build", "-tags", "udpconduit_nossh", "-o", dir+"/nossh/", "../cmd/hello")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building hello with -tags udpconduit_nossh:", err)
		os.Exit(1)
	}
	// Programs whose tests rely on the race detector.
	build = exec.Command("go", "build", "-race", "-o", dir+"/race/", "./testdata/misuse")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the -race programs:", err)
		os.Exit(1)
	}
	code := m.Run()
	for _, f := range cleanups {
		f()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestHello runs hello with args on 1, 2, 4 and 16 workers, with output
// routed over TCP through the console (the default) and, once, not routed.
func TestHello(t *testing.T) {
	host, _ := os.Hostname()
	for _, tc := range []struct {
		n     int
		route string
	}{{1, "1"}, {2, "1"}, {4, "1"}, {16, "1"}, {4, "0"}} {
		t.Run(fmt.Sprintf("%d/route=%s", tc.n, tc.route), func(t *testing.T) {
			marker := t.Name()
			r := run(t, marker, []string{"GASNET_SPAWNFN=L", "GASNET_ROUTE_OUTPUT=" + tc.route}, "hello", fmt.Sprint(tc.n), "a", "b c")
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
			}
			var want []string
			for i := range tc.n {
				want = append(want, fmt.Sprintf("hello from rank %d of %d on %s args=[\"a\" \"b c\"]", i, tc.n, host))
			}
			got := strings.Split(strings.TrimSpace(r.stdout), "\n")
			sort.Strings(got)
			sort.Strings(want)
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("output (-want +got):\n%s", d)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
}

type scenario struct {
	k, want int
	name    string
}

// scenarios reads the table from `testexit -list`: "K WANT NAME".
func scenarios(t *testing.T) []scenario {
	out, err := exec.Command(filepath.Join(bin, "testexit"), "-list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var list []scenario
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var s scenario
		if _, err := fmt.Sscan(l, &s.k, &s.want); err != nil {
			t.Fatalf("bad -list line %q", l)
		}
		s.name = strings.Join(strings.Fields(l)[2:], " ")
		list = append(list, s)
	}
	if len(list) < 12 {
		t.Fatalf("%d scenarios, want at least 12", len(list))
	}
	return list
}

func TestExitScenarios(t *testing.T) {
	n := 4
	for _, s := range scenarios(t) {
		t.Run(fmt.Sprintf("%02d", s.k), func(t *testing.T) {
			marker := t.Name()
			r := run(t, marker, nil, "testexit", fmt.Sprint(n), fmt.Sprint(s.k))
			ok := r.code == s.want
			switch s.want {
			case -1:
				ok = r.code >= 20 && r.code < 20+n
			case -2: // testexit's WantPanic
				ok = r.code == 2 && strings.Contains(r.stderr, "panic: ") || r.code == 0 && !strings.Contains(r.stderr, "panic: ")
			}
			if !ok {
				t.Errorf("%s: console exit %d, want %d\nstderr:\n%s", s.name, r.code, s.want, r.stderr)
			}
			checkNoSurvivors(t, marker, 3*time.Second)
		})
	}
}

func TestCrashIsReported(t *testing.T) {
	r := run(t, t.Name(), nil, "testexit", "3", "15") // panic on rank 0
	if !strings.Contains(r.stderr, "panic: testexit: deliberate panic") || !strings.Contains(r.stderr, "goroutine 1 [running]") {
		t.Errorf("the panic trace did not reach the console:\n%s", r.stderr)
	}
	r = run(t, t.Name(), nil, "testexit", "3", "17") // kill -9 of rank 0
	if !regexp.MustCompile(`rank 0 \(pid \d+ on \S+\) ended without exiting: killed by signal killed`).MatchString(r.stderr) {
		t.Errorf("the console did not name the killed rank:\n%s", r.stderr)
	}
	// Each crash's own words reach the console, and the console names
	// the rank that crashed.
	named := regexp.MustCompile(`rank 0 \(pid \d+ on \S+\) ended without exiting: exit status 2; aborting the job`)
	for k, words := range map[int]string{
		29: "SIGQUIT: quit", 30: "SIGABRT: abort", 31: "fatal error: concurrent map writes",
		32: "[signal SIGSEGV: segmentation violation", 33: "[signal SIGBUS: bus error",
		34: "panic: runtime error: integer divide by zero", 35: "panic: testexit: panic in a goroutine",
	} {
		r := run(t, fmt.Sprint(t.Name(), k), nil, "testexit", "3", fmt.Sprint(k))
		if !strings.Contains(r.stderr, words) || !named.MatchString(r.stderr) {
			t.Errorf("scenario %d: want %q and the rank named:\n%s", k, words, r.stderr)
		}
	}
}

// TestBadScenarioSaidOnce: a bad or missing K is one line, not one per
// rank, and exit 1.
func TestBadScenarioSaidOnce(t *testing.T) {
	for _, args := range [][]string{{"4", "99"}, {"4", "x"}, {"4"}} {
		r := run(t, t.Name(), nil, "testexit", args...)
		if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 || r.stderr == "" {
			t.Errorf("testexit %v: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
	}
}

// programs are the names TestBadInput recognises as the first of its args.
var programs = map[string]bool{"amudprun": true, "testam": true, "testcore": true}

func TestBadInput(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string // of hello, unless the first is a program's name
		want string
	}{
		{"no N", nil, nil, "missing N: usage: hello N [args...]  (each worker prints them)"},
		{"N zero", nil, []string{"0"}, `N="0": accepted: a positive integer; usage: hello N [args...]  (each worker prints them)`},
		{"N negative", nil, []string{"-3"}, `N="-3": accepted: a positive integer`},
		{"N not a number", nil, []string{"four"}, `N="four": accepted: a positive integer; usage: hello N [args...]  (each worker prints them)`},
		{"testam N not a number", nil, []string{"testam", "abc"}, `testam: N="abc": accepted: a positive integer; usage: testam N [-json] [-iters K] [-sizes LIST] [-np-gb] [-coll | -barrier | -allreduce | -atomics | -rma] [-cpuprofile FILE]`},
		{"testam -np-gb with -coll", nil, []string{"testam", "2", "-np-gb", "-coll"}, `testam: -np-gb: accepted only with the AM tests (none of -coll, -barrier, -allreduce, -atomics, -rma)`},
		{"unknown spawner", []string{"GASNET_SPAWNFN=Z"}, []string{"2"}, "GASNET_SPAWNFN=Z: accepted: L"},
		{"malformed int via AMUDP_", []string{"AMUDP_NETWORKDEPTH=deep"}, []string{"2"}, `AMUDP_NETWORKDEPTH="deep": accepted: a decimal integer`},
		{"depth out of range", []string{"GASNET_NETWORKDEPTH=5000"}, []string{"2"}, "GASNET_NETWORKDEPTH=5000: accepted: a decimal integer from 1 to 1024"},
		{"depth in hex", []string{"GASNET_NETWORKDEPTH=0x10"}, []string{"2"}, `GASNET_NETWORKDEPTH="0x10": accepted: a decimal integer from 1 to 1024`},
		{"malformed bool", []string{"GASNET_ROUTE_OUTPUT=maybe"}, []string{"2"}, `GASNET_ROUTE_OUTPUT="maybe": accepted: 1, 0, true or false`},
		{"host detect", []string{"GASNET_HOST_DETECT=dns"}, []string{"2"}, "GASNET_HOST_DETECT=dns: accepted: conduit, hostid or hostname"},
		{"bare name not documented", []string{"NETWORKDEPTH=0", "GASNET_REQUESTTIMEOUT_INITIAL=0"}, []string{"2"}, "GASNET_REQUESTTIMEOUT_INITIAL=0: accepted: a decimal integer from 100 to 60000000"},
		{"worker rank under L", []string{"GASNET_WORKER_RANK=1"}, []string{"2"}, "GASNET_WORKER_RANK=1: the L spawner numbers its workers itself"},
		{"worker rank for every worker", []string{"GASNET_WORKER_RANK=1", "GASNET_SPAWNFN=C", "GASNET_CSPAWN_CMD=sh -c %C"}, []string{"2"}, "GASNET_WORKER_RANK=1: every worker would ask for rank 1"},
		{"exit timeout too short", []string{"GASNET_EXIT_TIMEOUT=1ms"}, []string{"64"}, `GASNET_EXIT_TIMEOUT=1ms: accepted: a duration from 100ms to 1h`},
		{"line buffer too large", []string{"GASNET_LINEBUFFERSZ=9223372036854775807"}, []string{"2"}, `GASNET_LINEBUFFERSZ=9223372036854775807: accepted: a decimal number of bytes from 1 to 1048576, with an optional K, M or G suffix (times 1024, 1024² or 1024³); or 0 (unbuffered)`},
		{"request timeout that would wrap", []string{"GASNET_REQUESTTIMEOUT_MAX=18446744073709552"}, []string{"2"}, `GASNET_REQUESTTIMEOUT_MAX=18446744073709552: accepted: a decimal integer from 1000 to 3600000000`},
		{"negative socket buffer named", []string{"GASNET_SOCKETBUFFER_MAX=-5"}, []string{"2"}, `GASNET_SOCKETBUFFER_MAX=-5: accepted: a decimal number of bytes from 4096`},
		{"duration with no unit", []string{"GASNET_CONNECT_TIMEOUT=abc"}, []string{"2"}, `GASNET_CONNECT_TIMEOUT="abc": accepted: a duration from 100ms to 24h`},
		{"worker ip on no interface", []string{"GASNET_WORKERIP=198.51.100.0/24"}, []string{"2"}, `GASNET_WORKERIP=198.51.100.0/24: no interface of this host is on that subnet`},
		{"amudprun without -np", nil, []string{"amudprun", "hello"}, "amudprun: missing -np N"},
		{"amudprun -np zero", nil, []string{"amudprun", "-np", "0", "hello"}, "amudprun: -np 0: accepted: a positive integer"},
		{"amudprun unknown spawner", nil, []string{"amudprun", "-np", "2", "-spawn", "X", "hello"}, "amudprun: -spawn X: accepted: L"},
		{"amudprun unknown flag", nil, []string{"amudprun", "-nq", "2", "hello"}, "amudprun: flag provided but not defined: -nq"},
		{"amudprun no program", nil, []string{"amudprun", "-np", "2"}, "amudprun: missing the program"},
		{"amudprun missing program", nil, []string{"amudprun", "-np", "2", "./no-such-program"}, "amudprun: program ./no-such-program"},
		{"amudprun not a udpconduit program", nil, []string{"amudprun", "-np", "2", "/bin/true"}, "is it a program built on udpconduit"},
		{"amudprun malformed env", []string{"GASNET_LINEBUFFERSZ=big"}, []string{"amudprun", "-np", "2", filepath.Join(bin, "hello")}, `GASNET_LINEBUFFERSZ="big": accepted: a decimal number of bytes`},
		{"testam bad iters", nil, []string{"testam", "3", "-iters", "0"}, "testam: -iters 0: accepted: a positive count"},
		{"testam bad size", nil, []string{"testam", "2", "-sizes", "10,70000"}, `testam: -sizes 10,70000: "70000" is not a size`},
		{"testam profile in no folder", nil, []string{"testam", "2", "-cpuprofile", "/no-such-folder/p"}, "testam: -cpuprofile /no-such-folder/p: no such file or directory; accepted: a file this rank can create; usage: testam N"},
		{"testcore bad flag", nil, []string{"testcore", "3", "-msg", "5"}, "testcore: flag provided but not defined: -msg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			marker := t.Name()
			prog, args := "hello", tc.args
			if len(args) > 0 && programs[args[0]] {
				prog, args = args[0], args[1:]
			}
			r := run(t, marker, tc.env, prog, args...)
			if r.code != 1 {
				t.Errorf("exit %d, want 1", r.code)
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf("stderr %q, want one line containing %q", r.stderr, tc.want)
			}
			if r.stdout != "" {
				t.Errorf("a worker ran: %q", r.stdout)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
}

func TestOutputLinesNeverTear(t *testing.T) {
	const n, lines = 8, 300
	r := run(t, t.Name(), []string{"LINES=" + fmt.Sprint(lines)}, "printer", fmt.Sprint(n))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	re := regexp.MustCompile(`^rank (\d+) goroutine (\d) line (\d+) x{300} end$`)
	got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	seen := map[string]bool{}
	for _, l := range got {
		if m := re.FindStringSubmatch(l); m == nil {
			t.Fatalf("torn or foreign line: %.120q", l)
		}
		seen[l] = true
	}
	if len(got) != n*4*lines || len(seen) != n*4*lines {
		t.Errorf("%d lines (%d distinct), want %d", len(got), len(seen), n*4*lines)
	}
}

// TestSlowReaderGetsAllOutput: the console's stdout read at 2 MB/s (a
// pipe into a slow program) still delivers every line the workers wrote,
// although the job ends long before the reader has them and
// GASNET_EXIT_TIMEOUT is 200 ms; a reader that goes away after 100 bytes
// makes the console say how much it lost and exit 1, not 0 (nor die of
// SIGPIPE), with no worker left behind.
func TestSlowReaderGetsAllOutput(t *testing.T) {
	const n, lines = 4, 1000 // 4 goroutines each: 5.4 MB
	for _, broken := range []bool{false, true} {
		marker := fmt.Sprint(t.Name(), broken)
		ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 60*time.Second))
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "printer"), fmt.Sprint(n))
		cmd.Env = append(os.Environ(), markerVar(marker), "GASNET_SPAWNFN=L", "GASNET_EXIT_TIMEOUT=200ms", "LINES="+fmt.Sprint(lines))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		buf := make([]byte, 64<<10)
		for start := time.Now(); ; {
			k, err := out.Read(buf)
			got.Write(buf[:k])
			if err != nil || broken && got.Len() >= 100 {
				break
			}
			time.Sleep(time.Until(start.Add(time.Duration(got.Len()) * time.Second / 2e6)))
		}
		out.Close()
		err = cmd.Wait()
		if ctx.Err() != nil {
			t.Fatalf("printer: timed out\nstderr:\n%s", stderr.String())
		}
		code := cmd.ProcessState.ExitCode()
		if broken {
			if code != 1 || !regexp.MustCompile(`routed output lost: \d+ bytes of the workers' stdout \(write /dev/stdout: broken pipe\)`).MatchString(stderr.String()) {
				t.Errorf("reader gone: exit %d (%v), want 1 and the loss said; stderr:\n%s", code, err, stderr.String())
			}
		} else if c := strings.Count(got.String(), " end\n"); code != 0 || c != n*4*lines {
			t.Errorf("slow reader: exit %d, %d lines of %d; stderr:\n%s", code, c, n*4*lines, stderr.String())
		}
		checkNoSurvivors(t, marker, 3*time.Second)
	}
}

func TestSignalsStopTheJob(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}, {syscall.SIGHUP, 129}, {syscall.SIGQUIT, 131},
		{syscall.SIGUSR1, -1}} { // forwarded to every worker: the job goes on
		t.Run(tc.sig.String(), func(t *testing.T) {
			marker := t.Name()
			cmd, out := startWaitingJob(t, marker)
			cmd.Process.Signal(tc.sig)
			if tc.want < 0 {
				waitFor(t, func() bool { return strings.Count(out.String(), "got SIGUSR1") == 4 })
				cmd.Process.Signal(syscall.SIGTERM)
				tc.want = 143
			}
			waitEnd(t, cmd, out, 10*time.Second)
			if got := cmd.ProcessState.ExitCode(); got != tc.want {
				t.Errorf("exit %d, want %d\n%s", got, tc.want, out.String())
			}
			if strings.Contains(out.String(), "goroutine 1 [") {
				t.Errorf("a goroutine dump:\n%s", out.String())
			}
			checkNoSurvivors(t, marker, 3*time.Second)
		})
	}
}

func TestKillConsoleEndsWorkers(t *testing.T) {
	marker := t.Name()
	cmd, _ := startWaitingJob(t, marker)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	checkNoSurvivors(t, marker, 2*time.Second)
}

// TestWorkersEndWithoutTheirConsole: workers that hear nothing from their
// console for GASNET_LIVENESS_TIMEOUT (1 s here; the console, stopped with
// SIGSTOP, sends no ping) end themselves, idle as they are in the network,
// saying why, instead of waiting for a console that may never come back
// (a host cut off from it). 15 s (scaled) bounds a hang.
func TestWorkersEndWithoutTheirConsole(t *testing.T) {
	marker := t.Name()
	cmd, out := startWaitingJob(t, marker, "GASNET_LIVENESS_TIMEOUT=1s")
	cmd.Process.Signal(syscall.SIGSTOP)
	console := fmt.Sprint(cmd.Process.Pid)
	var left []string
	for deadline := time.Now().Add(testbound.For(t, 15*time.Second)); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		left = left[:0]
		for _, s := range survivors(marker) {
			if !strings.HasPrefix(s, console+" ") {
				left = append(left, s)
			}
		}
		if len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("workers still alive 15 s after their console stopped: %v", left)
	}
	cmd.Process.Signal(syscall.SIGCONT)
	waitEnd(t, cmd, out, 30*time.Second)
	if n := strings.Count(out.String(), "lost the console (no word from it for 1s, GASNET_LIVENESS_TIMEOUT); exiting"); n != 4 {
		t.Errorf("%d ranks said they lost the console, want 4:\n%s", n, out.String())
	}
	if cmd.ProcessState.ExitCode() == 0 {
		t.Errorf("the job exited 0 although its workers lost the console:\n%s", out.String())
	}
}

// TestExitNeverHidesOutputOrCrash repeats the exit races of the
// hardening issue: rank 0's summary printed after the final barrier while
// the others already called Exit(0) always reaches the console (scenario
// 19), and a panic in a handler racing the others' Exit(0) is never
// reported as success: when its trace is printed, the code is 2 (scenario
// 20). Scenario 21: os.Exit(0) without conduit.Exit while others wait is an
// abnormal end, named by rank.
func TestExitNeverHidesOutputOrCrash(t *testing.T) {
	panics := 0
	for i := range 12 {
		r := run(t, fmt.Sprint(t.Name(), i), nil, "testexit", "3", "19")
		if r.code != 0 || !strings.Contains(r.stdout, "summary: 3 ranks done") {
			t.Errorf("run %d of scenario 19: exit %d, stdout %q\nstderr:\n%s", i, r.code, r.stdout, r.stderr)
		}
		r = run(t, fmt.Sprint(t.Name(), i), nil, "testexit", "4", "20")
		panicked := strings.Contains(r.stderr, "panic: testexit: panic in a handler")
		if panicked {
			panics++
		}
		if panicked && r.code != 2 || !panicked && r.code != 0 {
			t.Errorf("run %d of scenario 20: exit %d with the panic trace printed: %v\nstderr:\n%s", i, r.code, panicked, r.stderr)
		}
		checkNoSurvivors(t, fmt.Sprint(t.Name(), i), 3*time.Second)
	}
	if panics == 0 {
		t.Error("no run of scenario 20 panicked before the job ended: the test proved nothing")
	}
	r := run(t, t.Name(), nil, "testexit", "3", "21")
	if r.code != 1 || !strings.Contains(r.stderr, "rank 0 ended with status 0 without calling conduit.Finalize or conduit.Exit") {
		t.Errorf("scenario 21: exit %d\nstderr:\n%s", r.code, r.stderr)
	}
}

// TestAbortNeverEndsInSuccess: a rank whose handler 0 says it aborts the
// job (a request to a handler its destination never registered) makes the
// job's code 1 although every other rank then calls Exit(0), and it does
// not go on to run the program past the call that polled (scenario 36).
func TestAbortNeverEndsInSuccess(t *testing.T) {
	for i := range 6 {
		marker := fmt.Sprint(t.Name(), i)
		r := run(t, marker, nil, "testexit", "3", "36")
		if r.code != 1 || !strings.Contains(r.stderr, "no handler registered at that index; aborting the job") ||
			strings.Contains(r.stdout, "rank 0 left the barrier") {
			t.Errorf("run %d: exit %d (want 1, the abort said, rank 0 stopped)\nstdout:\n%s\nstderr:\n%s", i, r.code, r.stdout, r.stderr)
		}
		checkNoSurvivors(t, marker, 3*time.Second)
	}
}

// TestSplitBarrierKeepsTheEnd: the Wait of a BarrierNB on a rank whose barrier the
// others completed (and then called Exit(0)) completes it and returns, so
// the lines printed after it reach the console, as after a plain Barrier
// (scenario 37 on 2 ranks: rank 1's message reaches rank 0 before it
// starts it, and rank 0 sleeps 50 ms between BarrierNB and its Wait,
// so that rank 1 completes the barrier and calls Exit(0) first).
func TestSplitBarrierKeepsTheEnd(t *testing.T) {
	for i := range 6 {
		r := run(t, fmt.Sprint(t.Name(), i), nil, "testexit", "2", "37")
		for rank := range 2 {
			for _, l := range []string{"notified", "waited"} {
				if want := fmt.Sprintf("rank %d %s\n", rank, l); r.code != 0 || !strings.Contains(r.stdout, want) {
					t.Errorf("run %d: exit %d, no %q in stdout:\n%s\nstderr:\n%s", i, r.code, want, r.stdout, r.stderr)
				}
			}
		}
	}
}

// TestComputingRankAnswers: ranks that compute without calling the
// library on their one P (GOMAXPROCS=1), right after a barrier they slept
// in parked in the runtime's poller (GASNET_POLL_SPIN=0, as on a crowded
// host), go on answering the console's pings: the job ends 0, not
// aborted after GASNET_LIVENESS_TIMEOUT (2 s here, the computation 4 s)
// as a stopped rank's would be (scenario 39). The Go runtime's monitor
// thread, asleep while every P was idle, is not woken when the poller
// hands the rank's goroutine its P back; without the system call that
// wakes it (amudp's wakeMonitor) every run of this test failed.
func TestComputingRankAnswers(t *testing.T) {
	for i := range 2 {
		marker := fmt.Sprint(t.Name(), i)
		r := run(t, marker, computingEnv, "testexit", "3", "39")
		if r.code != 0 {
			t.Errorf("run %d: exit %d, want 0\nstderr:\n%s", i, r.code, r.stderr)
		}
		checkNoSurvivors(t, marker, 3*time.Second)
	}
}

// computingEnv is scenario 39's: its ranks wait parked, compute on one
// P, and are pinged every half second.
var computingEnv = []string{"GASNET_LIVENESS_TIMEOUT=2s", "GASNET_POLL_SPIN=0", "GOMAXPROCS=1"}

// TestConsoleCostPerWorker: the console waits for its local workers
// without a thread each (their fork server reaps them), and holds the
// descriptors per worker that the README states and the N check assumes
// (3 with routed output: control, stdout, stderr).
func TestConsoleCostPerWorker(t *testing.T) {
	const n = 64
	cmd, _ := startPrinter(t, t.Name(), n, "wait", "waiting", "LINES=1")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var threads int
	for _, l := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if threads == 0 || threads > 24 {
		t.Errorf("the console of %d workers has %d threads, want a few, not one per worker", n, threads)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) > 3*n+32 {
		t.Errorf("the console of %d workers holds %d descriptors, more than 3 per worker and 32", n, len(fds))
	}
	t.Logf("console of %d workers: %d threads, %d descriptors", n, threads, len(fds))
}

// TestSecretOutOfLocalWorkersEnvironment: under L, the job secret is in no
// environment (/proc/PID/environ lasts a process's life) nor on any
// command line of the job's processes; the workers read it from the control connection they
// inherit (a socket, not a TCP connection to the console).
func TestSecretOutOfLocalWorkersEnvironment(t *testing.T) {
	marker := t.Name()
	cmd, _ := startWaitingJob(t, marker, "GASNET_SPAWNFN=L")
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	workers := 0
	for _, dir := range ownProcs(marker) {
		env, _ := os.ReadFile(dir + "/environ")
		if bytes.Contains(env, []byte("GASNET_SPAWN_SECRET=")) {
			t.Errorf("pid %s has the job secret in its environment", filepath.Base(dir))
		}
		if cmdline, _ := os.ReadFile(dir + "/cmdline"); bytes.Contains(cmdline, []byte("GASNET_SPAWN_SECRET")) {
			t.Errorf("pid %s has the job secret on its command line", filepath.Base(dir))
		}
		if hasMarker(env, marker) && bytes.Contains(env, []byte("GASNET_SPAWN_CONN_FD=3")) {
			workers++
		}
	}
	if workers != 4 {
		t.Errorf("found %d workers with GASNET_SPAWN_CONN_FD, want 4", workers)
	}
}

// TestHostRanks: every rank of a local job, not only rank 0, knows that
// all ranks share its host.
func TestHostRanks(t *testing.T) {
	r := run(t, t.Name(), []string{"GASNET_SPAWNFN=L", "HOSTRANKS=1", "LINES=0"}, "printer", "4")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	for rank := range 4 {
		if want := fmt.Sprintf("rank %d shares its host with [0 1 2 3]\n", rank); !strings.Contains(r.stdout, want) {
			t.Errorf("missing %q in\n%s", want, r.stdout)
		}
	}
}

// TestStoppedRank: a rank stopped (SIGSTOP) while the others wait for it in
// a barrier ends the job after GASNET_LIVENESS_TIMEOUT with one line naming
// it, its pid and host, and no process of the job left; stopped for less
// than that and continued, the job completes.
func TestStoppedRank(t *testing.T) {
	host, _ := os.Hostname()
	start := func(t *testing.T) (*exec.Cmd, *syncBuffer, int) {
		cmd, out := startPrinter(t, t.Name(), 4, "late", "ready rank", "LINES=0", "GASNET_LIVENESS_TIMEOUT=2s")
		return cmd, out, lastRankPID(t, out, 4)
	}
	t.Run("stays stopped", func(t *testing.T) {
		cmd, out, pid := start(t)
		syscall.Kill(pid, syscall.SIGSTOP)
		stopped := time.Now()
		waitEnd(t, cmd, out, 20*time.Second) // a hang bound, not a speed
		el := time.Since(stopped)
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Errorf("exit %d, want 1\n%s", code, out.String())
		}
		want := fmt.Sprintf("rank 3 (pid %d on %s) has not answered the console for ", pid, host)
		if n := strings.Count(out.String(), want); n != 1 {
			t.Errorf("%d lines %q, want 1:\n%s", n, want, out.String())
		}
		// The console's own account of the silence: never less than the
		// timeout (the rule; its clock, not the test's).
		_, rest, _ := strings.Cut(out.String(), want)
		if silent, err := time.ParseDuration(strings.Fields(rest + " x")[0]); err != nil || silent < 2*time.Second {
			t.Errorf("the console aborted after %v (%v) of silence, want at least GASNET_LIVENESS_TIMEOUT=2s:\n%s", silent, err, out.String())
		}
		t.Logf("SIGSTOP to the console's exit: %v", el.Round(time.Millisecond))
		checkNoSurvivors(t, t.Name(), 2*time.Second)
	})
	t.Run("continued in time", func(t *testing.T) {
		cmd, out, pid := start(t)
		syscall.Kill(pid, syscall.SIGSTOP)
		time.Sleep(time.Second)
		syscall.Kill(pid, syscall.SIGCONT)
		time.Sleep(2 * time.Second) // past the timeout, counted from the stop
		syscall.Kill(pid, syscall.SIGUSR2)
		waitEnd(t, cmd, out, 10*time.Second)
		if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Count(out.String(), "done rank") != 4 {
			t.Errorf("exit %d, want 0 and 4 ranks done:\n%s", code, out.String())
		}
	})
}

// TestUnreachableRankOneLineEach: when a rank stops answering datagrams
// while the others send to it, each of them says so in one line naming the
// rank and host, however many requests come back, and the console adds
// one summary line.
func TestUnreachableRankOneLineEach(t *testing.T) {
	host, _ := os.Hostname()
	cmd, out := startPrinter(t, t.Name(), 4, "flood", "ready rank", "LINES=0", "GASNET_LIVENESS_TIMEOUT=0",
		"GASNET_REQUESTTIMEOUT_INITIAL=1000", "GASNET_REQUESTTIMEOUT_MAX=500000")
	syscall.Kill(lastRankPID(t, out, 4), syscall.SIGSTOP)
	stopped := time.Now()
	for bound := testbound.For(t, 20*time.Second); !strings.Contains(out.String(), "is unreachable") && time.Since(stopped) < bound; {
		time.Sleep(time.Millisecond)
	}
	said := time.Since(stopped)
	waitEnd(t, cmd, out, 20*time.Second)
	// The stopped rank cannot exit: the console kills it after
	// GASNET_EXIT_TIMEOUT (2 s).
	t.Logf("SIGSTOP during traffic to the first abort line: %v (give-up after 1.01 s of silence); to the console's exit: %v",
		said.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond))
	if code := cmd.ProcessState.ExitCode(); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	s := out.String()
	for r := range 3 {
		line := fmt.Sprintf("printer: rank %d: rank 3 on %s (", r, host)
		if n := strings.Count(s, line); n > 1 {
			t.Errorf("rank %d said %d times that rank 3 is unreachable", r, n)
		}
	}
	if n := strings.Count(s, "is unreachable"); n < 2 || n > 4 { // the ranks' lines and the summary
		t.Errorf("%d lines about the unreachable rank:\n%s", n, s)
	}
	if n := strings.Count(s, " aborted the job (code 1): rank 3 on "+host); n != 1 {
		t.Errorf("%d summary lines from the console, want 1:\n%s", n, s)
	}
	checkNoSurvivors(t, t.Name(), 3*time.Second)
}
