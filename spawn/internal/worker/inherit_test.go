package worker

import (
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
// the console's Hello, and its configuration from the second, the
// console's Settings, and binds its UDP socket to the console's address
// (or GASNET_WORKERIP's); frames that are not these, a descriptor that is
// not a socket, and a missing console address are each an error naming
// what is wrong, not a panic.
func TestInheritedConnection(t *testing.T) {
	t.Setenv(ctl.EnvMaster, "127.0.0.7:4000")
	want := envconf.Config{NetworkDepth: 7, ConnectTimeout: time.Minute, SpawnFn: "L"}
	wantSrc := map[string]envconf.Source{"GASNET_NETWORKDEPTH": {Var: "AMUDP_NETWORKDEPTH", Value: "7"}}
	settings := ctl.EncodeFrame(ctl.FrameSettings, ctl.Settings{Config: envconf.AppendBinary(nil, &want, wantSrc)})
	hello := ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: "00ff"})
	fd := socketWith(t, append(hello[:len(hello):len(hello)], settings...))
	w, cfg, src, err := inherited(strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	w.conn.Close()
	if string(w.Secret) != "00ff" || w.LocalIP != netip.MustParseAddr("127.0.0.7") {
		t.Errorf("secret %q, local IP %v", w.Secret, w.LocalIP)
	}
	if d := cmp.Diff(want, *cfg); d != "" {
		t.Errorf("configuration (-console +worker):\n%s", d)
	}
	if d := cmp.Diff(wantSrc, src); d != "" {
		t.Errorf("sources (-console +worker):\n%s", d)
	}
	for master, local := range map[string]string{"0.0.0.0:4000": "127.0.0.1", "[::]:4000": "::1", "[::ffff:10.1.2.3]:9": "10.1.2.3"} {
		t.Setenv(ctl.EnvMaster, master)
		fd := socketWith(t, append(hello[:len(hello):len(hello)], settings...))
		w, _, _, err := inherited(strconv.Itoa(fd))
		if err != nil {
			t.Errorf("console at %s: %v", master, err)
			continue
		}
		w.conn.Close()
		if w.LocalIP != netip.MustParseAddr(local) {
			t.Errorf("console at %s: local IP %v, want %s", master, w.LocalIP, local)
		}
	}
	t.Setenv(ctl.EnvMaster, "127.0.0.7:4000")
	subnet := want
	subnet.WorkerIP = "127.0.0.0/8"
	fd = socketWith(t, append(hello[:len(hello):len(hello)], ctl.EncodeFrame(ctl.FrameSettings, ctl.Settings{Config: envconf.AppendBinary(nil, &subnet, nil)})...))
	if w, _, _, err := inherited(strconv.Itoa(fd)); err != nil || !w.LocalIP.IsLoopback() {
		t.Errorf("GASNET_WORKERIP=127.0.0.0/8: %v, %v", w, err)
	} else {
		w.conn.Close()
	}

	for _, c := range []struct {
		name, fd, master string
		first            []byte
		want             string
	}{
		{"a frame that is not a Hello", "", "127.0.0.7:4000", ctl.EncodeFrame(ctl.FrameJoin, ctl.Join{}), "frame 1 instead of 8"},
		{"a secret that is not hex", "", "127.0.0.7:4000", ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{Secret: "xyz"}), "malformed job secret"},
		{"an empty secret", "", "127.0.0.7:4000", ctl.EncodeFrame(ctl.FrameHello, ctl.Hello{}), "malformed job secret"},
		{"nothing", "", "127.0.0.7:4000", nil, "EOF"},
		{"a Hello alone", "", "127.0.0.7:4000", hello, "EOF"},
		{"settings that do not decode", "", "127.0.0.7:4000", append(hello[:len(hello):len(hello)], ctl.EncodeFrame(ctl.FrameSettings, ctl.Settings{Config: []byte{1, 2}})...), "malformed configuration"},
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
		if _, _, _, err := inherited(v); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error naming %q", c.name, err, c.want)
		}
	}
}
