//go:build linux

package launch

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/internal/varenc"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// envChild makes the test binary a worker of the tests below: it reads the
// console's greeting on descriptor 3, answers with its index there, prints
// its pid and index on stdout, and ends with its index modulo 3 as its code
// ("sleep": it sleeps instead, until killed; "now": it ends at once with
// code 7, reading nothing).
const envChild = "UDPCONDUIT_LAUNCH_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envChild); mode != "" {
		os.Exit(testChild(mode))
	}
	os.Exit(m.Run())
}

func testChild(mode string) int {
	if mode == "now" {
		return 7
	}
	i, _ := strconv.Atoi(os.Getenv(ctl.EnvIndex))
	c := os.NewFile(3, "control")
	hello := make([]byte, 5)
	if _, err := io.ReadFull(c, hello); err != nil || hello[0] != ctl.FrameHello {
		fmt.Fprintf(os.Stderr, "child %d: greeting %q, %v\n", i, hello, err)
		return 100
	}
	fmt.Fprintf(c, "hi from %d\n", i)
	fmt.Printf("pid %d index %d\n", os.Getpid(), i)
	if mode == "sleep" {
		time.Sleep(time.Hour)
	}
	return i % 3
}

// served starts n test children through the fork server, whatever n, and
// returns the launch, each child's first line on its control connection and
// on its stdout, by index.
func served(t *testing.T, n int, mode string) (Launch, []chan string, []chan string) {
	t.Helper()
	old := forkServerMin
	forkServerMin = 1
	t.Cleanup(func() { forkServerMin = old })
	ctrl, outs := make([]chan string, n), make([]chan string, n)
	for i := range n {
		ctrl[i], outs[i] = make(chan string, 1), make(chan string, 1)
	}
	spec := &Spec{Count: n, Program: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{ctl.EnvSecret + "=abcdef", envChild + "=" + mode},
		Output: func(i, stream int, r *os.File) {
			go func() {
				defer r.Close()
				br := bufio.NewReader(r)
				if stream == 1 {
					line, _ := br.ReadString('\n')
					outs[i] <- line
				}
				io.Copy(io.Discard, br)
			}()
		},
		Control: func(i int, c net.Conn) {
			go func() {
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(testbound.For(t, 30*time.Second)))
				line, _ := bufio.NewReader(c).ReadString('\n')
				ctrl[i] <- line
			}()
		},
	}
	l, err := Local{}.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l, ctrl, outs
}

// TestForkServer: through the fork server every worker starts with its
// index, its output pipes and its control connection (greeted with the
// Hello), and each one's end comes back with its pid and exit code; the
// exits channel closes once all have ended.
func TestForkServer(t *testing.T) {
	const n = 20
	l, ctrl, outs := served(t, n, "exit")
	pids := make(map[int]int)
	for i := range n {
		if got, want := <-ctrl[i], fmt.Sprintf("hi from %d\n", i); got != want {
			t.Errorf("worker %d's control connection: %q, want %q", i, got, want)
		}
		var pid, idx int
		if _, err := fmt.Sscanf(<-outs[i], "pid %d index %d", &pid, &idx); err != nil || idx != i {
			t.Errorf("worker %d's stdout: pid %d index %d, %v", i, pid, idx, err)
		}
		pids[i] = pid
	}
	seen := 0
	for e := range l.Exits() {
		seen++
		if e.Code != e.Index%3 || e.PID != pids[e.Index] || e.Clean != (e.Code == 0) {
			t.Errorf("%s: code %d (%s), want %d, pid %d", e.Who(), e.Code, e.Status, e.Index%3, pids[e.Index])
		}
	}
	if seen != n {
		t.Errorf("%d exits reported, want %d", seen, n)
	}
}

// TestForkServerKilled: Kill ends workers started through the fork
// server; and when the server itself is killed, its workers die with it and
// the console reports each one's end, naming why, with no process left.
func TestForkServerKilled(t *testing.T) {
	const n = 5
	l, _, outs := served(t, n, "sleep")
	for i := range n {
		<-outs[i] // started
	}
	l.Kill(0)
	for e := range l.Exits() {
		if e.Code != 128+int(syscall.SIGTERM) && e.Code != 128+int(syscall.SIGKILL) {
			t.Errorf("%s after Kill: %s", e.Who(), e.Status)
		}
	}

	l, _, outs = served(t, n, "sleep")
	server := serverOf(t)
	var pids []int
	for i := range n {
		var pid, idx int
		fmt.Sscanf(<-outs[i], "pid %d index %d", &pid, &idx)
		pids = append(pids, pid)
	}
	// What the server is for: its descriptor table stays small, whatever
	// the number of workers it has started (its stdio, its socket,
	// /dev/null, what the runtime and the test keep open: 3 more per
	// worker would be 15 more here).
	if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", server)); err != nil || len(fds) > 12 {
		var what []string
		for _, f := range fds {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", server, f.Name()))
			what = append(what, f.Name()+"="+l)
		}
		t.Errorf("the fork server of %d running workers holds %d descriptors (%v), want a few: %s", n, len(fds), err, what)
	}
	syscall.Kill(server, syscall.SIGKILL)
	for e := range l.Exits() {
		if e.Clean || !strings.Contains(e.Status, "fork server") {
			t.Errorf("%s after the server's death: %s", e.Who(), e.Status)
		}
	}
	deadline := time.Now().Add(testbound.For(t, 30*time.Second))
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("worker pid %d outlived its fork server", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestForkServerEarlyExit: workers that end before the console has greeted
// them are reported with their own exit code, not as a failure to start.
func TestForkServerEarlyExit(t *testing.T) {
	const n = 20
	l, _, _ := served(t, n, "now")
	seen := 0
	for e := range l.Exits() {
		seen++
		if e.Code != 7 {
			t.Errorf("%s: %s, want exit status 7", e.Who(), e.Status)
		}
	}
	if seen != n {
		t.Errorf("%d exits reported, want %d", seen, n)
	}
}

// serverOf returns the pid of this test's running fork server: a child
// of this process with the server's marker.
func serverOf(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(testbound.For(t, 30*time.Second))
	for time.Now().Before(deadline) {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			// Only this process's children: their parent first (stat:
			// pid (comm) state ppid ...; comm may hold blanks), then the
			// marker in their environment.
			stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
			if len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
				continue
			}
			if env, err := os.ReadFile("/proc/" + e.Name() + "/environ"); err == nil && strings.Contains(string(env), ctl.EnvForkServer+"=") {
				return pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no fork server found")
	return 0
}

// TestServeMessages: the console's side of the fork server's socket. A
// worker the server could not start makes Start fail naming it and why;
// messages that do not decode are ignored (their descriptors closed); a
// server that ends before starting every worker makes Start fail.
func TestServeMessages(t *testing.T) {
	run := func(msgs ...[]byte) error {
		s, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET, 0)
		if err != nil {
			t.Fatal(err)
		}
		l := &localLaunch{exits: make(chan ProcExit, 2), done: make([]bool, 2)}
		spec := &Spec{Count: 2, Output: func(int, int, *os.File) {}, Control: func(int, net.Conn) {}}
		var pipes []string
		for _, m := range msgs {
			// Each garbage message carries a descriptor, which serve
			// must close; a failure carries none.
			var oob []byte
			if m[0] != msgFailed {
				r, w, _ := os.Pipe()
				oob = syscall.UnixRights(int(r.Fd()))
				defer r.Close()
				defer w.Close()
				link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", r.Fd()))
				if err != nil {
					t.Fatal(err)
				}
				pipes = append(pipes, link)
			}
			if err := syscall.Sendmsg(s[1], m, oob, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		syscall.Close(s[1])
		started := make(chan error, 1)
		l.serve(spec, s[0], "h", nil, started)
		syscall.Close(s[0])
		// Only our two ends of each pipe may remain: a third
		// descriptor on it is the one the message carried.
		for _, p := range pipes {
			if n := openOn(t, p); n != 2 {
				t.Errorf("%d descriptors open on %s after serve, want our 2: the one the message carried was not closed", n, p)
			}
		}
		return <-started
	}
	failed := varenc.AppendString(varenc.AppendUint([]byte{msgFailed}, 1), "starting /x: no such file")
	if err := run(failed); err == nil || !strings.Contains(err.Error(), "worker 1: starting /x: no such file") {
		t.Errorf("a failed start: %v", err)
	}
	for _, garbage := range [][]byte{{'S'}, {'S', 1, 2}, {'S', 1, 0}, {'S', 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 1, 5},
		{'E', 9, 1, 0}, {'E', 1, 5, 0}, {'Z', 0}, {'F', 0, 200}} {
		if err := run(garbage); err == nil || !strings.Contains(err.Error(), "ended before starting every worker") {
			t.Errorf("% x, then the end: %v", garbage, err)
		}
	}
}

// openOn counts this process's descriptors whose /proc/self/fd link
// reads target (such as "pipe:[1234]").
func openOn(t *testing.T, target string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, fd := range fds {
		if link, err := os.Readlink("/proc/self/fd/" + fd.Name()); err == nil && link == target {
			n++
		}
	}
	return n
}
