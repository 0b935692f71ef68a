package tests

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The processes of a test's job: the ones left after it ends, and where
// the job secret shows.

// survivors lists the live processes whose environment holds marker.
func survivors(marker string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("UDPCONDUIT_TEST_MARKER="+marker+"\x00")) {
			continue
		}
		dir := filepath.Dir(p)
		st, _ := os.ReadFile(dir + "/status")
		if bytes.Contains(st, []byte("State:\tZ")) {
			continue
		}
		cmdline, _ := os.ReadFile(dir + "/cmdline")
		out = append(out, filepath.Base(dir)+" "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

func checkNoSurvivors(t *testing.T, marker string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		s := survivors(marker)
		if len(s) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("processes of the job survive after %v:\n%s", within, strings.Join(s, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkSecretOffCommandLines reads the job secret from the environment of
// the job's workers and checks that no process on the host has it on its
// command line (the launcher, its daemons, the tasks).
func checkSecretOffCommandLines(t *testing.T, marker string) {
	t.Helper()
	var secret string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		env, err := os.ReadFile(p + "/environ")
		if err != nil || !bytes.Contains(env, []byte("UDPCONDUIT_TEST_MARKER="+marker+"\x00")) {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("GASNET_SPAWN_SECRET=")); ok && len(v) > 0 {
				secret = string(v)
			}
		}
	}
	if secret == "" {
		t.Fatal("no process of the job has GASNET_SPAWN_SECRET in its environment")
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile(p + "/cmdline")
		if err == nil && bytes.Contains(cmdline, []byte(secret)) {
			t.Errorf("the job secret is on the command line of pid %s: %q", filepath.Base(p), bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
}
