package launch

import (
	"bufio"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// TestLocalProcs: the L spawner starts workers with one P when they
// outnumber the CPUs and the user did not set GOMAXPROCS, with the marker
// that has each worker take it out of its environment, and marks them to
// make no inbox when they are more than 512 to a CPU.
func TestLocalProcs(t *testing.T) {
	procs := []string{"GOMAXPROCS=1", ctl.EnvProcs + "=1"}
	rseq := []string{"GLIBC_TUNABLES=glibc.pthread.rseq=0", ctl.EnvTunables + "=1"}
	both := append(slices.Clip(procs), rseq...)
	for _, c := range []struct {
		count, cpus int
		set         []string // the variables the user set
		want        []string
	}{
		{3, 2, nil, both},
		{8, 2, nil, both},
		{64, 2, nil, both},
		{1024, 2, nil, both},
		{1025, 2, nil, append([]string{ctl.EnvNoInbox + "=1"}, both...)},
		{2, 2, nil, nil},
		{1, 8, nil, nil},
		{1025, 2, []string{"GOMAXPROCS", "GLIBC_TUNABLES"}, []string{ctl.EnvNoInbox + "=1"}},
		{4, 2, []string{"GOMAXPROCS"}, rseq},
		{4, 2, []string{"GLIBC_TUNABLES"}, procs},
		{2, 2, []string{"GOMAXPROCS"}, nil},
	} {
		set := func(k string) bool { return slices.Contains(c.set, k) }
		if d := cmp.Diff(c.want, localProcs(c.count, c.cpus, set)); d != "" {
			t.Errorf("localProcs(%d, %d, set %q) (-want +got):\n%s", c.count, c.cpus, c.set, d)
		}
	}
}

// TestLocalControlSocket: with Spec.Control, each worker gets its control
// connection as descriptor 3 (ctl.EnvConnFD) whose first frame is the
// console's Hello carrying the secret, and Control gets the other end: what
// the worker writes there reaches it.
func TestLocalControlSocket(t *testing.T) {
	const n = 3
	conns := make(chan net.Conn, n)
	outs := make(chan []byte, n)
	spec := &Spec{Count: n, Program: "/bin/sh",
		// The frame's 5-byte header and the 9-byte body of a 6-letter
		// secret (and an empty nonce and proof), then the marker, then a
		// word to the console.
		Args: []string{"-c", `head -c 14 <&3; echo " $` + ctl.EnvConnFD + `"; echo hi >&3`},
		Env:  []string{ctl.EnvSecret + "=abcdef"},
		Output: func(_, stream int, r *os.File) {
			if stream != 1 {
				r.Close()
				return
			}
			go func() { b, _ := io.ReadAll(r); r.Close(); outs <- b }()
		},
		Control: func(_ int, c net.Conn) { conns <- c },
	}
	l, err := Local{}.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Kill(0)
	want := string(ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: "abcdef"})) + " 3\n"
	for range n {
		c := <-conns
		c.SetReadDeadline(time.Now().Add(testbound.For(t, 30*time.Second)))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if line != "hi\n" {
			t.Errorf("the console's end read %q, %v", line, err)
		}
		if got := string(<-outs); got != want {
			t.Errorf("the worker read %q, want %q", got, want)
		}
	}
	for e := range l.Exits() {
		if !e.Clean {
			t.Errorf("%s: %s", e.Who(), e.Status)
		}
	}
}

// TestLocalNeedsControl: the L spawner refuses a spec without control
// connections, its only way to hand the workers the secret.
func TestLocalNeedsControl(t *testing.T) {
	if _, err := (Local{}).Start(&Spec{Count: 1, Program: "/bin/true"}); err == nil {
		t.Error("a spec without Control was started")
	}
}
