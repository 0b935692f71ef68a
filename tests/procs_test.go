package tests

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// The processes of a test's job: the ones left after it ends, and where
// the job secret shows. The tests look only at processes they started:
// the descendants of this test process (its sshd and what that starts, its
// consoles, launchers and their children), and the processes whose
// environment holds one of this run's markers (the tasks a launcher's
// daemons start, which descend from the daemon, not from this process).
// Whatever else runs on the machine, a user's job with its own
// GASNET_SPAWN_SECRET or another run of these tests, is none of theirs.

// runID makes this run's markers its own: this process's pid, unique among
// the live processes, and random bits, for a pid reused after a killed
// run left processes behind.
var runID = func() string {
	b := make([]byte, 4)
	rand.Read(b)
	return strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b)
}()

// markerVar is the environment variable that marks the processes of the
// job a test names marker (a test's name, mostly) as this run's.
func markerVar(marker string) string {
	return "UDPCONDUIT_TEST_MARKER=" + runID + "/" + marker
}

// hasMarker reports whether env, a /proc/PID/environ, holds marker.
func hasMarker(env []byte, marker string) bool {
	return bytes.Contains(env, []byte("\x00"+markerVar(marker)+"\x00")) || bytes.HasPrefix(env, []byte(markerVar(marker)+"\x00"))
}

// marked lists the /proc/PID directories of the live processes whose
// environment holds marker, zombies left out.
func marked(marker string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		if env, err := os.ReadFile(dir + "/environ"); err == nil && hasMarker(env, marker) && !zombie(dir) {
			out = append(out, dir)
		}
	}
	return out
}

func zombie(dir string) bool {
	st, _ := os.ReadFile(dir + "/status")
	return bytes.Contains(st, []byte("State:\tZ"))
}

// descendants lists the /proc/PID directories of the live processes that
// descend from this one (their parent's parent's ... parent is this test
// process), zombies left out.
func descendants() []string {
	parent := map[int]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range procs {
		pid, err1 := strconv.Atoi(filepath.Base(dir))
		stat, err2 := os.ReadFile(dir + "/stat")
		if err1 != nil || err2 != nil {
			continue
		}
		// stat: pid (comm) state ppid ...; comm may hold blanks and ")".
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	me := os.Getpid()
	var out []string
	for pid := range parent {
		for p, hops := parent[pid], 0; p > 1 && hops < len(parent); p, hops = parent[p], hops+1 {
			if p == me {
				if dir := "/proc/" + strconv.Itoa(pid); !zombie(dir) {
					out = append(out, dir)
				}
				break
			}
		}
	}
	return out
}

// ownProcs lists the /proc/PID directories of the processes of the job
// marker: the marked ones and this process's descendants.
func ownProcs(marker string) []string {
	seen := map[string]bool{}
	var out []string
	for _, dir := range append(marked(marker), descendants()...) {
		if !seen[dir] {
			seen[dir] = true
			out = append(out, dir)
		}
	}
	return out
}

// survivors lists the live processes whose environment holds marker.
func survivors(marker string) []string {
	var out []string
	for _, dir := range marked(marker) {
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		out = append(out, filepath.Base(dir)+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

// killMarked kills (SIGKILL) the live processes whose environment holds
// marker, and lists them.
func killMarked(marker string) []string {
	s := survivors(marker)
	for _, p := range s {
		pid, _ := strconv.Atoi(strings.Fields(p)[0])
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return s
}

// checkNoSurvivors fails the test if processes of the job marker are left
// after within (the time their end takes on a quiet machine; scaled).
func checkNoSurvivors(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	bound := testbound.For(t, within)
	deadline := time.Now().Add(bound)
	for {
		s := survivors(marker)
		if len(s) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the job survive after %v:\n%s", bound, strings.Join(s, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkSecretOffCommandLines reads the job secret from the environment of
// the job's workers and checks that no process on the host has it on its
// command line (the launcher, its daemons, the tasks). Every command line
// is read, since a launcher's daemons are not this process's descendants,
// but only this job's secret (16 random bytes) is looked for: another
// job's secret is none of the test's business.
func checkSecretOffCommandLines(t *testing.T, marker string) {
	t.Helper()
	var secret string
	for _, dir := range marked(marker) {
		env, _ := os.ReadFile(dir + "/environ")
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("GASNET_SPAWN_SECRET=")); ok && len(v) > 0 {
				secret = string(v)
			}
		}
	}
	if secret == "" {
		t.Fatal("no process of the job has GASNET_SPAWN_SECRET in its environment")
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, err := os.ReadFile(p + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(secret)) {
			t.Errorf("the job secret is on the command line of pid %s: %q", filepath.Base(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}
