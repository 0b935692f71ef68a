package worker

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

// socketWith returns the descriptor of one end of a socket pair whose other
// end has written first and been closed.
func socketWith(t *testing.T, first []byte) int {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Write(fds[1], first)
	syscall.Close(fds[1])
	return fds[0]
}

// TestInheritedConnection: a worker whose control connection the L
// spawner made (ctl.EnvConnFD) takes the job secret from its first frame,
// the console's Hello, and binds its UDP socket to the console's address;
// a first frame that is not a Hello with a secret, a descriptor that is not
// one, and a missing console address are each an error naming what is
// wrong, not a panic.
func TestInheritedConnection(t *testing.T) {
	cfg := &envconf.Config{ConnectTimeout: time.Minute}
	t.Setenv(ctl.EnvMaster, "127.0.0.7:4000")
	fd := socketWith(t, ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: "00ff"}))
	w, err := inherited(cfg, strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	w.conn.Close()
	if string(w.Secret) != "00ff" || w.LocalIP != netip.MustParseAddr("127.0.0.7") {
		t.Errorf("secret %q, local IP %v", w.Secret, w.LocalIP)
	}

	for _, c := range []struct {
		name, fd, master string
		first            []byte
		want             string
	}{
		{"a frame that is not a Hello", "", "127.0.0.7:4000", ctl.EncodeFrame(ctl.FrameJoin, ctl.Join{}), "not a Hello"},
		{"a secret that is not hex", "", "127.0.0.7:4000", ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: "xyz"}), "malformed job secret"},
		{"an empty secret", "", "127.0.0.7:4000", ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{}), "malformed job secret"},
		{"nothing", "", "127.0.0.7:4000", nil, "EOF"},
		{"descriptor 2", "2", "127.0.0.7:4000", nil, ctl.EnvConnFD},
		{"no descriptor", "x", "127.0.0.7:4000", nil, ctl.EnvConnFD},
		{"no console address", "", "", nil, ctl.EnvMaster},
		{"a descriptor that is no socket", "pipe", "127.0.0.7:4000", nil, "control connection on file descriptor"},
	} {
		t.Setenv(ctl.EnvMaster, c.master)
		v := c.fd
		switch v {
		case "":
			v = strconv.Itoa(socketWith(t, c.first))
		case "pipe":
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			fd, _ := syscall.Dup(int(r.Fd()))
			r.Close()
			v = strconv.Itoa(fd)
		}
		if _, err := inherited(cfg, v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
