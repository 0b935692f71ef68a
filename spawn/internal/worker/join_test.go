package worker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

// TestJoinSaysWhetherTheEnvironmentChanged: Join puts the console's
// settings into the environment and says whether any differed from what the
// worker started with, which decides whether the worker reads its
// configuration again.
func TestJoinSaysWhetherTheEnvironmentChanged(t *testing.T) {
	t.Setenv("GASNET_JOINTEST_SAME", "1")
	t.Setenv("GASNET_JOINTEST_OTHER", "1")
	os.Unsetenv("GASNET_JOINTEST_NEW")
	t.Cleanup(func() { os.Unsetenv("GASNET_JOINTEST_NEW") })
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"same", map[string]string{"GASNET_JOINTEST_SAME": "1"}, false},
		{"none", nil, false},
		{"other value", map[string]string{"GASNET_JOINTEST_SAME": "1", "GASNET_JOINTEST_OTHER": "2"}, true},
		{"unset here", map[string]string{"GASNET_JOINTEST_NEW": ""}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Left open: Join's reader ends the process when the
			// console's connection closes.
			wc, cc := net.Pipe()
			joined := make(chan ctl.Join, 1)
			go func() {
				r := bufio.NewReader(cc)
				_, body, err := ctl.ReadFrame(r)
				if err != nil {
					return
				}
				var jn ctl.Join
				ctl.DecodeBody(body, &jn)
				joined <- jn
				ctl.WriteFrame(cc, ctl.FrameWelcome, ctl.Welcome{Rank: 1, Size: 2, Env: tc.env, Protocol: ctl.Protocol})
			}()
			w := &Worker{conn: wc, r: bufio.NewReader(wc)}
			if err := w.Join(&envconf.Config{}, netip.MustParseAddrPort("127.0.0.1:9"), "/proc/1/fd/3", nil); err != nil {
				t.Fatal(err)
			}
			if jn := <-joined; jn.Inbox != "/proc/1/fd/3" || jn.UDP != "127.0.0.1:9" {
				t.Errorf("the Join carried UDP %q and inbox %q", jn.UDP, jn.Inbox)
			}
			if w.EnvChanged != tc.want {
				t.Errorf("EnvChanged = %v, want %v", w.EnvChanged, tc.want)
			}
			for k, v := range tc.env {
				if got, ok := os.LookupEnv(k); !ok || got != v {
					t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
				}
			}
		})
	}
}

// TestJoinAfterTheJobEnded: a console that answers a Join with Terminate
// (the job ended before this worker joined) makes Join return an
// EndedError carrying the job's code, which ExitCode gives; the process
// goes on (the caller decides to exit).
func TestJoinAfterTheJobEnded(t *testing.T) {
	wc, cc := net.Pipe()
	defer cc.Close()
	go func() {
		r := bufio.NewReader(cc)
		if _, _, err := ctl.ReadFrame(r); err != nil {
			return
		}
		ctl.WriteFrame(cc, ctl.FrameTerminate, ctl.Code{Code: 7})
	}()
	w := &Worker{conn: wc, r: bufio.NewReader(wc)}
	err := w.Join(&envconf.Config{}, netip.MustParseAddrPort("127.0.0.1:9"), "", nil)
	var ended *EndedError
	if !errors.As(err, &ended) || ended.Code != 7 || ExitCode(err) != 7 {
		t.Errorf("Join: %v (exit code %d), want an EndedError of code 7", err, ExitCode(err))
	}
	if ExitCode(errors.New("other")) != 1 {
		t.Errorf("ExitCode of another error is %d, want 1", ExitCode(errors.New("other")))
	}
}

// TestJoinRefusesAnotherProtocol: a Welcome of another control protocol
// (a console or amudprun of another version) is refused in one line, not
// taken for one this program understands.
func TestJoinRefusesAnotherProtocol(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
		want string
	}{
		{"older", ctl.Welcome{Rank: 1, Size: 2, Protocol: ctl.Protocol - 1}.AppendBody(nil), fmt.Sprintf("the console speaks control protocol %d, this program %d", ctl.Protocol-1, ctl.Protocol)},
		{"without one", welcomeWithoutProtocol(), "malformed welcome from the console (is it, or amudprun, built from another version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wc, cc := net.Pipe()
			go func() {
				r := bufio.NewReader(cc)
				if _, _, err := ctl.ReadFrame(r); err != nil {
					return
				}
				ctl.WriteFrame(cc, ctl.FrameWelcome, rawBody(tc.body))
			}()
			w := &Worker{conn: wc, r: bufio.NewReader(wc)}
			err := w.Join(&envconf.Config{}, netip.MustParseAddrPort("127.0.0.1:9"), "", nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Join: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// rawBody is a frame's body as given.
type rawBody []byte

func (r rawBody) AppendBody(b []byte) []byte { return append(b, r...) }

// welcomeWithoutProtocol is a Welcome's body as a console before
// ctl.Protocol wrote it: without the last field.
func welcomeWithoutProtocol() []byte {
	b := ctl.Welcome{Rank: 1, Size: 2}.AppendBody(nil)
	return b[:len(b)-1] // Protocol 0 is one byte
}
