package console

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

// TestBroadcastNeverCutsFrames: a worker that does not read for longer than
// GASNET_EXIT_TIMEOUT (stopped, or its host busy) still receives every
// control frame whole and in order once it reads; the console's loop does
// not wait for it meanwhile.
func TestBroadcastNeverCutsFrames(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg, _, err := envconf.LoadEnv(nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ExitTimeout = 100 * time.Millisecond
		consoleEnd, workerEnd := net.Pipe() // no buffer: every write waits for the reader
		defer workerEnd.Close()
		p := &peerConn{conn: consoleEnd, out: ctl.NewSender(consoleEnd)}
		j := &job{cfg: cfg, n: 1, peers: []*peerConn{p}}
		big := ctl.Welcome{Env: map[string]string{"X": string(bytes.Repeat([]byte("x"), 1<<16))}}
		start := time.Now()
		j.broadcast(ctl.FrameWelcome, big)
		j.broadcast(ctl.FramePing, ctl.NoBody{})
		j.broadcast(ctl.FrameTerminate, ctl.Code{Code: 7})
		if d := time.Since(start); d != 0 {
			t.Errorf("broadcast waited %v for a worker that does not read", d)
		}
		time.Sleep(10 * cfg.ExitTimeout)
		r := bufio.NewReader(workerEnd)
		var got []byte
		for range 3 {
			typ, body, err := ctl.ReadFrame(r)
			if err != nil {
				t.Fatalf("after frames %v: %v", got, err)
			}
			got = append(got, typ)
			if typ == ctl.FrameWelcome && len(body) < 1<<16 {
				t.Errorf("big frame of %d bytes", len(body))
			}
		}
		if d := cmp.Diff([]byte{ctl.FrameWelcome, ctl.FramePing, ctl.FrameTerminate}, got); d != "" {
			t.Errorf("frames (-want +got):\n%s", d)
		}
		p.out.Stop()
		consoleEnd.Close()
	})
}
