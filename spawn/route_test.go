package spawn

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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

// TestAcceptRoutesOutputAndDropsStrangers drives the console's listener with
// real TCP connections: routed streams with the secret reach the console a
// line at a time; a stream or a Join without it is dropped unread.
func TestAcceptRoutesOutputAndDropsStrangers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr lockedBuilder
	outs := newOutputs(&console{out: [3]io.Writer{nil, &stdout, &stderr}}, 64)
	joins := make(chan *peerConn, 4)
	go accept(ln, "s3cret", 5*time.Second, joins, outs)

	send := func(typ byte, v any, data ...string) net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if err := writeFrame(c, typ, v); err != nil {
			t.Fatal(err)
		}
		for _, d := range data {
			c.Write([]byte(d))
			time.Sleep(10 * time.Millisecond) // let a partial line sit in the buffer
		}
		return c
	}
	a := send(frameOutput, Output{Secret: "s3cret", Stream: 1}, "rank a ", "line 1\nrank a line 2\nno newline")
	b := send(frameOutput, Output{Secret: "s3cret", Stream: 2}, "err line\n")
	x := send(frameOutput, Output{Secret: "wrong", Stream: 1}, "forged\n")
	y := send(frameOutput, Output{Secret: "s3cret", Stream: 0}, "bad stream\n")
	z := send(frameJoin, Join{Secret: "wrong"})
	for _, c := range []net.Conn{x, y, z} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil {
			t.Error("a connection without the job's secret was answered")
		}
		c.Close()
	}
	a.Close()
	b.Close()
	start := time.Now()
	outs.drain(5 * time.Second)
	if time.Since(start) > 4*time.Second {
		t.Error("drain waited for closed streams")
	}
	if d := cmp.Diff("rank a line 1\nrank a line 2\nno newline", stdout.String()); d != "" {
		t.Errorf("stdout (-want +got):\n%s", d)
	}
	if d := cmp.Diff("err line\n", stderr.String()); d != "" {
		t.Errorf("stderr (-want +got):\n%s", d)
	}
	select {
	case p := <-joins:
		t.Errorf("a Join with a wrong secret was accepted: %+v", p.join)
	default:
	}

	// A stream a worker keeps open is cut off after the timeout.
	k := send(frameOutput, Output{Secret: "s3cret", Stream: 1}, "kept\n")
	defer k.Close()
	time.Sleep(50 * time.Millisecond)
	outs.drain(100 * time.Millisecond)
	k.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := k.Read(make([]byte, 1)); err == nil {
		t.Error("drain left a stream open past its timeout")
	}
}
