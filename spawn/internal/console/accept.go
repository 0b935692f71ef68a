package console

// This file is the console's listener: the workers' connections, checked
// and read up to their Joins.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// acceptConfig is what the accept loop needs.
type acceptConfig struct {
	secret string
	// auth bounds the wait for a connection's first frame, which carries
	// the secret (the worker sends it as soon as it connects); join bounds
	// the wait for a worker's Join after it (GASNET_CONNECT_TIMEOUT).
	auth, join time.Duration
	say        func(string, ...any)
}

// authTimeout is the longest wait for the first frame of a connection.
const authTimeout = 5 * time.Second

// accept reads each connection's first frame, of at most ctl.MaxFirstFrame
// bytes within ac.auth: a worker's Hello, after which its Join goes to
// joins, or a routed output stream, which goes to outs. A connection
// without the job's secret is closed, having cost a few bytes. Errors of
// accept itself (out of descriptors) are said once and retried.
func accept(ln net.Listener, ac acceptConfig, joins chan<- *peerConn, outs *outputs) {
	secret := []byte(ac.secret)
	var nonces ctl.Nonces
	var said string
	delay := 5 * time.Millisecond
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if msg := acceptError(err); msg != said {
				said = msg
				ac.say("%s", msg)
			}
			time.Sleep(delay)
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		go func() {
			c.SetReadDeadline(time.Now().Add(ac.auth))
			r := bufio.NewReaderSize(c, frameReadBuf)
			typ, body, err := ctl.ReadFrameMax(r, ctl.MaxFirstFrame)
			var h ctl.Hello
			var o ctl.Output
			switch {
			case err != nil:
			case typ == ctl.FrameHello && ctl.DecodeBody(body, &h) == nil && h.Check(secret) && nonces.Fresh(h.Nonce):
				if readJoin(ctl.Seal(c, r, secret, h.Nonce, true), ac.join, joins) {
					return
				}
			case typ == ctl.FrameOutput && ctl.DecodeBody(body, &o) == nil && o.Check(secret) && nonces.Fresh(o.Nonce) &&
				(o.Stream == 1 || o.Stream == 2):
				c.SetReadDeadline(time.Time{})
				outs.serve(c, r, o.Stream, outputKey(o.Index, o.PID))
				return
			}
			c.Close() // not one of ours
		}()
	}
}

// readJoin reads a worker's Join from c within timeout and hands it to
// joins, or reports false: no Join came, it was malformed, or its UDP
// address does not parse (no worker sends one).
func readJoin(c net.Conn, timeout time.Duration, joins chan<- *peerConn) bool {
	c.SetReadDeadline(time.Now().Add(timeout))
	r := bufio.NewReaderSize(c, frameReadBuf)
	var jn ctl.Join
	typ, body, err := ctl.ReadFrameMax(r, ctl.MaxJoinFrame)
	if err != nil || typ != ctl.FrameJoin || ctl.DecodeBody(body, &jn) != nil {
		return false
	}
	udp, err := netip.ParseAddrPort(jn.UDP)
	if err != nil || udp.Port() == 0 {
		return false
	}
	c.SetReadDeadline(time.Time{})
	joins <- &peerConn{conn: &bufConn{Conn: c, r: r}, join: jn, udp: udp}
	return true
}

// acceptError says what failed in accepting a connection, naming the limit
// when it is the descriptors.
func acceptError(err error) string {
	if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
		lim := readLimits()
		return fmt.Sprintf("accepting workers' connections: %v (RLIMIT_NOFILE is %d, ulimit -n; %d open); retrying", err, lim.NoFile, lim.OpenFDs)
	}
	return fmt.Sprintf("accepting workers' connections: %v; retrying", err)
}

// bufConn keeps the reader that may hold bytes past the Join frame.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
