package console

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// lockedBuilder is a strings.Builder safe for the console's writers.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pipeListener is an in-memory net.Listener whose connections are
// net.Pipe ends, so that the console's accept loop runs in a synctest
// bubble on virtual time.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// Dial connects to the listener.
func (l *pipeListener) Dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// closedByPeer reports whether c's other end closed it: a read ends with
// EOF. A read that times out (the console kept the connection open) is not.
func closedByPeer(c net.Conn) error {
	c.SetReadDeadline(time.Now().Add(time.Hour))
	_, err := c.Read(make([]byte, 1))
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return errors.New("the console answered")
	}
	return fmt.Errorf("still open: %v", err)
}

// huge writes the header of a 63 MiB frame on c, then its body slowly,
// and returns c: the console must close c without reading the body.
func huge(c net.Conn) net.Conn {
	go func() {
		time.Sleep(time.Millisecond) // after any frame already on its way
		hdr := []byte{ctl.FrameJoin, 0, 0, 0xf0, 0x03}
		if _, err := c.Write(hdr); err != nil {
			return
		}
		chunk := make([]byte, 1<<10) // slowly: a console that reads the body waits out its timeout
		for range 63 << 10 {
			if _, err := c.Write(chunk); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return c
}

// badJoin is a Join frame from UDP address udp, which no worker has.
func badJoin(udp string) string {
	return string(ctl.EncodeFrame(ctl.FrameJoin, ctl.Join{Name: "bad", UDP: udp}))
}

// TestAcceptRoutesOutputAndDropsStrangers drives the console's accept loop
// on virtual time: routed streams with the secret reach the console a line
// at a time; a stream or a Join without it, or a Join from a UDP address
// that does not parse, is closed at once, unread; a
// connection that sends nothing is closed after the timeout; drain does not
// wait for streams that ended, and cuts off one that a worker keeps open.
func TestAcceptRoutesOutputAndDropsStrangers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := newPipeListener()
		defer ln.Close()
		var stdout, stderr lockedBuilder
		outs := newOutputs(&console{out: [3]io.Writer{nil, &stdout, &stderr}}, 64)
		joins := make(chan *peerConn, 4)
		const timeout = 5 * time.Second
		go accept(ln, acceptConfig{secret: "s3cret", auth: timeout, join: time.Hour, say: t.Logf}, joins, outs)

		secret, wrong := []byte("s3cret"), []byte("wrong")
		// dial writes the first frame v, then data; after a Hello that
		// proves the secret, sealed if seal is set, as a worker does.
		dial := func(seal bool, typ byte, v ctl.Body, data ...string) net.Conn {
			c := ln.Dial()
			w := c
			if h, ok := v.(ctl.Hello); ok && h.Check(secret) && seal {
				w = ctl.Seal(c, c, secret, h.Nonce, false)
			}
			go func() {
				if err := ctl.WriteFrame(c, typ, v); err != nil {
					return // a stranger's frame may be cut off
				}
				for _, d := range data {
					if _, err := w.Write([]byte(d)); err != nil {
						return
					}
					time.Sleep(10 * time.Millisecond) // a partial line sits in the buffer
				}
			}()
			return w
		}
		send := func(typ byte, v ctl.Body, data ...string) net.Conn { return dial(true, typ, v, data...) }
		a := send(ctl.FrameOutput, ctl.NewOutput(secret, 1, 0, 0), "rank a ", "line 1\nrank a line 2\nno newline")
		b := send(ctl.FrameOutput, ctl.NewOutput(secret, 2, 0, 0), "err line\n")
		// Frames the console took once, to be sent again below.
		replayedHello, replayedOutput := ctl.NewHello(secret), ctl.NewOutput(secret, 1, 0, 0)
		if err := closedByPeer(send(ctl.FrameHello, replayedHello, badJoin(""))); err != nil {
			t.Errorf("a hello with a bad join: %v", err)
		}
		first := send(ctl.FrameOutput, replayedOutput)
		synctest.Wait() // the console took them
		otherStream := ctl.NewOutput(secret, 1, 0, 0)
		otherStream.Stream = 2
		start := time.Now()
		for name, c := range map[string]net.Conn{
			"output with a wrong secret": send(ctl.FrameOutput, ctl.NewOutput(wrong, 1, 0, 0), "forged\n"),
			"output to stream 0":         send(ctl.FrameOutput, ctl.NewOutput(secret, 0, 0, 0), "bad stream\n"),
			"output proved for stream 1": send(ctl.FrameOutput, otherStream, "moved\n"),
			"a replayed output":          send(ctl.FrameOutput, replayedOutput, "replayed\n"),
			"hello with a wrong secret":  send(ctl.FrameHello, ctl.NewHello(wrong)),
			"hello carrying the secret":  send(ctl.FrameHello, ctl.Hello{Secret: "s3cret"}),
			"a replayed hello":           send(ctl.FrameHello, replayedHello, badJoin("127.0.0.1:9")),
			"join without a hello":       send(ctl.FrameJoin, ctl.Join{Name: "stranger"}),
			"a 63 MiB first frame":       huge(ln.Dial()),
			"a hello, then 63 MiB":       huge(send(ctl.FrameHello, ctl.NewHello(secret))),
			"a join not sealed":          dial(false, ctl.FrameHello, ctl.NewHello(secret), badJoin("127.0.0.1:9")+strings.Repeat(" ", 20000)),
			"a join without an address":  send(ctl.FrameHello, ctl.NewHello(secret), badJoin("")),
			"a join from address a:1":    send(ctl.FrameHello, ctl.NewHello(secret), badJoin("a:1")),
			"a join from port 0":         send(ctl.FrameHello, ctl.NewHello(secret), badJoin("127.0.0.1:0")),
		} {
			if err := closedByPeer(c); err != nil {
				t.Errorf("%s: %v", name, err)
			}
			c.Close()
		}
		if el := time.Since(start); el >= timeout {
			t.Errorf("strangers were closed after %v, not at once", el)
		}
		silent := ln.Dial()
		start = time.Now()
		if err := closedByPeer(silent); err != nil {
			t.Errorf("a connection that sends nothing: %v", err)
		} else if el := time.Since(start); el != timeout {
			t.Errorf("a connection that sends nothing was closed after %v, want %v", el, timeout)
		}
		time.Sleep(time.Second) // a and b write their lines
		a.Close()
		b.Close()
		first.Close()
		start = time.Now()
		outs.drain(timeout)
		if el := time.Since(start); el >= time.Second {
			t.Errorf("drain took %v for streams that had ended", el)
		}
		if d := cmp.Diff("rank a line 1\nrank a line 2\nno newline", stdout.String()); d != "" {
			t.Errorf("stdout (-want +got):\n%s", d)
		}
		if d := cmp.Diff("err line\n", stderr.String()); d != "" {
			t.Errorf("stderr (-want +got):\n%s", d)
		}
		select {
		case p := <-joins:
			t.Errorf("a stranger's Join was accepted: %+v", p.join)
		default:
		}
		w := send(ctl.FrameHello, ctl.NewHello(secret))
		time.Sleep(3 * timeout) // a worker may take long from its Hello to its Join
		ctl.WriteFrame(w, ctl.FrameJoin, ctl.Join{Name: "worker", Index: 3, UDP: "127.0.0.1:9"})
		select {
		case p := <-joins:
			if p.join.Name != "worker" || p.join.Index != 3 {
				t.Errorf("join %+v", p.join)
			}
			// The console's frames reach the worker, sealed the other way.
			go ctl.WriteFrame(p.conn, ctl.FrameTerminate, ctl.Code{Code: 3, Why: "sealed"})
			typ, body, err := ctl.ReadFrame(bufio.NewReader(w))
			var code ctl.Code
			if err != nil || typ != ctl.FrameTerminate || ctl.DecodeBody(body, &code) != nil || code.Why != "sealed" {
				t.Errorf("the console's frame to the worker: type %d, %+v, %v", typ, code, err)
			}
			p.conn.Close()
		case <-time.After(time.Second):
			t.Error("a worker's Join was not accepted")
		}

		// A stream a worker keeps open is cut off after the timeout.
		k := send(ctl.FrameOutput, ctl.NewOutput(secret, 1, 0, 0), "kept\n")
		defer k.Close()
		time.Sleep(50 * time.Millisecond)
		start = time.Now()
		outs.drain(100 * time.Millisecond)
		if el := time.Since(start); el < 100*time.Millisecond {
			t.Errorf("drain returned after %v with a stream open", el)
		}
		if err := closedByPeer(k); err != nil {
			t.Errorf("drain left a stream open past its timeout: %v", err)
		}
		if !strings.Contains(stdout.String(), "kept\n") {
			t.Errorf("the kept stream's line was lost: %q", stdout.String())
		}
	})
}

// failingListener fails its first n Accepts with err.
type failingListener struct {
	*pipeListener
	n   int
	err error
}

func (l *failingListener) Accept() (net.Conn, error) {
	if l.n > 0 {
		l.n--
		return nil, l.err
	}
	return l.pipeListener.Accept()
}

// TestAcceptKeepsGoingThroughErrors: out of descriptors, the accept loop
// says so once, naming the limit, and accepts again once it can.
func TestAcceptKeepsGoingThroughErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := &failingListener{pipeListener: newPipeListener(), n: 50, err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}}
		defer ln.Close()
		var said []string
		var mu sync.Mutex
		say := func(f string, a ...any) { mu.Lock(); said = append(said, fmt.Sprintf(f, a...)); mu.Unlock() }
		joins := make(chan *peerConn, 1)
		go accept(ln, acceptConfig{secret: "s3cret", auth: time.Second, join: time.Second, say: say}, joins, newOutputs(&console{}, 0))
		c := ln.Dial()
		defer c.Close()
		hello := ctl.NewHello([]byte("s3cret"))
		ctl.WriteFrame(c, ctl.FrameHello, hello)
		ctl.WriteFrame(ctl.Seal(c, c, []byte("s3cret"), hello.Nonce, false), ctl.FrameJoin, ctl.Join{Name: "late", UDP: "127.0.0.1:9"})
		select {
		case p := <-joins:
			p.conn.Close()
		case <-time.After(time.Minute):
			t.Fatal("no connection accepted after the errors")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(said) != 1 || !strings.Contains(said[0], "too many open files (RLIMIT_NOFILE is ") {
			t.Errorf("said %q, want one line naming RLIMIT_NOFILE", said)
		}
	})
}

// TestOutputLabels: with labels on, each line of a stream starts with its
// rank (and "stderr" on stderr), wherever the writes cut the lines, in
// line-buffered and unbuffered mode; before ranks are known the label
// names the worker's spawn index.
func TestOutputLabels(t *testing.T) {
	for _, size := range []int{0, 8, 1024} {
		var out, errb bytes.Buffer
		o := newOutputs(&console{out: [3]io.Writer{nil, &out, &errb}}, size)
		o.label = true
		w1 := newLineWriter(o.cons, 1, size)
		w1.o, w1.index = o, 5
		w2 := newLineWriter(o.cons, 2, size)
		w2.o, w2.index = o, 6
		w1.Write([]byte("early\n"))
		w1.Close()
		o.setRanks(map[int]int{5: 1, 6: 0})
		w1 = newLineWriter(o.cons, 1, size)
		w1.o, w1.index = o, 5
		for _, p := range []string{"one\ntw", "o\n", "", "three\nfour"} {
			w1.Write([]byte(p))
		}
		w1.Close()
		w2.Write([]byte("oops\n"))
		w2.Close()
		want := "[worker 5] early\n[1] one\n[1] two\n[1] three\n[1] four"
		if d := cmp.Diff(want, out.String()); d != "" {
			t.Errorf("size %d: stdout (-want +got):\n%s", size, d)
		}
		if d := cmp.Diff("[0 stderr] oops\n", errb.String()); d != "" {
			t.Errorf("size %d: stderr (-want +got):\n%s", size, d)
		}
	}
}

// TestOutputDirNamesByRank: with GASNET_OUTPUT_DIR, a stream's file is
// named by the worker's rank, rank.R.STREAM, also where the worker wrote
// before its rank was known (its file, opened as worker.I.STREAM, takes
// the rank's name then, with every line, at its next write or its close).
func TestOutputDirNamesByRank(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	o := newOutputs(&console{out: [3]io.Writer{nil, &out, &errb}}, 64)
	o.dir = dir
	early := newLineWriter(o.cons, 2, 64)
	early.o, early.index = o, 5
	early.Write([]byte("before Init\n"))
	o.setRanks(map[int]int{5: 1, 6: 0})
	early.Write([]byte("after\n"))
	early.Close()
	late := newLineWriter(o.cons, 1, 64)
	late.o, late.index = o, 6
	late.Write([]byte("rank 0 here\n"))
	late.Close()
	// One that wrote only before its rank was known.
	once := newLineWriter(o.cons, 1, 64)
	once.o, once.index = o, 7
	once.Write([]byte("only early\n"))
	o.setRanks(map[int]int{5: 1, 6: 0, 7: 2})
	once.Close()
	var got []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Name()+": "+string(b))
	}
	want := []string{"rank.0.stdout: rank 0 here\n", "rank.1.stderr: before Init\nafter\n", "rank.2.stdout: only early\n"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("files (-want +got):\n%s", d)
	}
	if out.Len()+errb.Len() != 0 {
		t.Errorf("the console got %q and %q", out.String(), errb.String())
	}
}

// slowWriter takes a write every 10 ms, as a console whose reader is slow,
// then fails every write with err once it has taken limit bytes (limit
// 0: no limit).
type slowWriter struct {
	lockedBuilder
	limit int
	err   error
}

func (w *slowWriter) Write(p []byte) (int, error) {
	time.Sleep(10 * time.Millisecond)
	if w.limit > 0 && len(w.String())+len(p) > w.limit {
		return 0, w.err
	}
	return w.lockedBuilder.Write(p)
}

// TestDrainWaitsForASlowReader: output a worker wrote before it ended is
// delivered whole however slowly the console's own output is read (a
// second per 100 lines here, against a drain timeout of 100 ms); a reader
// that goes away (EPIPE) costs the rest of that stream, which finish
// reports with the bytes lost and a code that is not 0.
func TestDrainWaitsForASlowReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, broken := range []bool{false, true} {
			out := &slowWriter{}
			if broken {
				out.limit, out.err = 1000, syscall.EPIPE
			}
			ln := newPipeListener()
			outs := newOutputs(&console{out: [3]io.Writer{nil, out, io.Discard}}, 64)
			go accept(ln, acceptConfig{secret: "s", auth: time.Hour, join: time.Hour, say: t.Logf}, nil, outs)
			c := ln.Dial()
			var want strings.Builder
			go func() {
				defer c.Close()
				ctl.WriteFrame(c, ctl.FrameOutput, ctl.NewOutput([]byte("s"), 1, 0, 0))
				for i := range 300 {
					fmt.Fprintf(&want, "line %d\n", i)
					fmt.Fprintf(c, "line %d\n", i)
				}
			}()
			time.Sleep(time.Millisecond) // the stream is open
			var said []string
			code := outs.finish(0, 100*time.Millisecond, func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) })
			ln.Close()
			if !broken {
				if d := cmp.Diff(want.String(), out.String()); d != "" || code != 0 || len(said) > 0 {
					t.Errorf("slow reader: code %d, said %q, output (-want +got):\n%s", code, said, d)
				}
				continue
			}
			lost := len(want.String()) - len(out.String())
			wantSaid := []string{fmt.Sprintf("routed output lost: %d bytes of the workers' stdout (broken pipe) could not be written", lost)}
			if d := cmp.Diff(wantSaid, said); d != "" || code != 1 || lost == 0 {
				t.Errorf("broken pipe: code %d, %d bytes lost; said (-want +got):\n%s", code, lost, d)
			}
		}
	})
}
