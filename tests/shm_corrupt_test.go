package tests

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// inboxPath returns /proc/PID/fd/N of the shared-memory inbox of the
// process pid, a rank of a job this test started (its own output named
// the pid): the memfd its transport made ("memfd:udpconduit-inbox").
func inboxPath(t *testing.T, pid int) string {
	t.Helper()
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fd); err == nil && strings.Contains(l, "memfd:udpconduit-inbox") {
			return fd
		}
	}
	t.Fatalf("no inbox among the descriptors of pid %d", pid)
	return ""
}

// TestCorruptedInbox: a process of the user writes over the inbox of a
// rank of a running job whose ranks all share memory and keep sending
// (printer flood: ranks 0-2 flood rank 3 with requests, whose replies go
// to their inboxes), through /proc/PID/fd/N as a rank maps it: 0xff over
// its first 16 KiB (the ring's header and the collectives' words), or
// random bytes over all of it. The job ends within a few seconds, not at
// the 82 s of the give-up time, with a non-zero code and exactly one line
// naming the rank and its corrupted inbox (the console's: each rank that
// finds it aborts, the first says why); nothing panics, and no process of
// the job is left. Without the write the flood runs until SIGUSR2.
func TestCorruptedInbox(t *testing.T) {
	for _, tc := range []struct {
		name   string
		victim int
		spoil  func(size int) []byte
	}{
		// The flooded rank: three senders push into it.
		{"0xff over the header", 3, func(int) []byte { return []byte(strings.Repeat("\xff", 16384)) }},
		// A rank that gets replies, and sends.
		{"random over all of it", 1, func(size int) []byte { b := make([]byte, size); rand.Read(b); return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			marker := t.Name()
			cmd, out := startPrinter(t, marker, 4, "flood", "ready rank", "LINES=0", "GASNET_SUPERNODE_MAXSIZE=0")
			pid := rankPID(t, out, tc.victim)
			path := inboxPath(t, pid)
			time.Sleep(300 * time.Millisecond) // traffic under way
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			st, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(tc.spoil(int(st.Size())), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			written := time.Now()
			waitEnd(t, cmd, out, 20*time.Second)
			took := time.Since(written)
			s := out.String()
			t.Logf("%s of rank %d's inbox of %d bytes to the console's exit: %v\n%s", tc.name, tc.victim, st.Size(), took.Round(time.Millisecond), s)
			// GASNET_EXIT_TIMEOUT (2 s) bounds how long the ranks
			// that did not find it take to follow.
			if took > 5*time.Second {
				t.Errorf("the job ended %v after its inbox was corrupted, want within 5 s", took)
			}
			if code := cmd.ProcessState.ExitCode(); code == 0 {
				t.Errorf("exit 0 after an inbox was corrupted")
			}
			var lines []string
			for _, l := range strings.Split(s, "\n") {
				if strings.Contains(l, "corrupted shared-memory inbox") {
					lines = append(lines, l)
				}
			}
			line := regexp.MustCompile(fmt.Sprintf(`^printer: rank \d on \S+ aborted the job \(code 1\): rank %d: corrupted shared-memory inbox \(found by rank \d: .+\)$`, tc.victim))
			if len(lines) != 1 || !line.MatchString(lines[0]) {
				t.Errorf("%d lines about the corrupted inbox, want one matching %s:\n%s", len(lines), line, s)
			}
			for _, bad := range []string{"panic", "goroutine ", "fatal error", "SIGSEGV", "unreachable", "flood over"} {
				if strings.Contains(s, bad) {
					t.Errorf("the output says %q", bad)
				}
			}
			checkNoSurvivors(t, marker, 3*time.Second)
		})
	}
}
