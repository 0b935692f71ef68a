package worker

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/verdict"
)

// A hub is what rank 0 of a directly launched job (DESIGN.md §9.1) keeps
// of the console: every rank, rank 0 included, holds a TCP connection to
// it, authenticated and sealed with the job secret as a connection to the
// console is, over which it sends its Exit and takes the job's Terminate.
// The job's end follows the console's rules (package verdict, as for a
// launcher's tasks whose statuses the console never sees): the first Exit
// sets the job's code and every rank is told it; a connection that ends
// without Exit is a rank that ended by itself (a crash, a signal, a return
// from main), which aborts the job if others still run GASNET_EXIT_TIMEOUT
// later; a rank that never connects within GASNET_CONNECT_TIMEOUT aborts it
// at once. Ranks left GASNET_EXIT_TIMEOUT after the end are ended by the
// launcher (kill, the PMI abort).
type hub struct {
	ln      net.Listener
	secret  []byte
	who     []string
	m       *verdict.Machine
	timeout time.Duration // GASNET_EXIT_TIMEOUT
	connect time.Duration // GASNET_CONNECT_TIMEOUT
	say     func(string)
	kill    func(code int)
	events  chan hubEvent
	conns   []net.Conn // by rank; loop only
	wmu     sync.Mutex // serializes writes to conns
	// drained is closed once the job has ended and every rank but 0 has
	// closed its connection, or the ranks left were killed: rank 0 may
	// end without cutting a Terminate short.
	drained  chan struct{}
	closedAt []bool
	left     int // ranks but 0 whose connection has not ended
	nonces   ctl.Nonces
	tmu      sync.Mutex
	taken    []bool // ranks that have a connection (greet); tmu
}

// hubEvent is what a connection's reader hands the hub's loop: a rank's
// new connection, a frame, or the connection's end (err).
type hubEvent struct {
	rank int
	conn net.Conn // a new connection
	typ  byte
	body []byte
	err  error
}

// newHub returns rank 0's hub for a job whose ranks who names, listening
// on ln; Serve runs it. say prints a line of the job's; kill ends every
// task through the launcher with a code.
func newHub(ln net.Listener, secret []byte, who, hosts []string, exitTimeout, connectTimeout time.Duration, say func(string), kill func(int)) *hub {
	n := len(who)
	return &hub{ln: ln, secret: secret, who: who, timeout: exitTimeout, connect: connectTimeout, say: say, kill: kill,
		m:      verdict.New(verdict.Config{Who: who, Host: hosts}),
		events: make(chan hubEvent, 4*n), conns: make([]net.Conn, n), drained: make(chan struct{}),
		closedAt: make([]bool, n), left: n - 1, taken: make([]bool, n)}
}

// Addr returns where the hub listens.
func (h *hub) Addr() string { return h.ln.Addr().String() }

// Drained returns a channel closed once the job has ended and every other
// rank has ended its connection, or the ranks left were killed.
func (h *hub) Drained() <-chan struct{} { return h.drained }

// serve accepts the ranks' connections and runs the job's end until
// every rank but 0 is gone; it closes the listener when no rank is left
// to connect.
func (h *hub) serve() {
	go h.accept()
	connectBy := time.NewTimer(h.connect)
	defer connectBy.Stop()
	var returnC, killC <-chan time.Time
	drained := false
	for !drained {
		select {
		case ev := <-h.events:
			switch {
			case ev.conn != nil:
				h.joined(ev.rank, ev.conn)
			case ev.err != nil:
				if !h.closedAt[ev.rank] {
					h.closedAt[ev.rank] = true
					if ev.rank != 0 {
						h.left--
					}
					returnC, killC = h.step(verdict.Closed{Rank: ev.rank}, returnC, killC)
				}
			case ev.typ == ctl.FrameExit:
				c := ctl.DecodeExit(ev.body)
				returnC, killC = h.step(verdict.Exit{Rank: ev.rank, Code: c.Code, Why: c.Why}, returnC, killC)
			}
		case <-connectBy.C:
			for r, c := range h.conns {
				if c == nil && !h.closedAt[r] {
					returnC, killC = h.step(verdict.Abort{Code: 1, Why: fmt.Sprintf(
						"%s did not connect to rank 0 within GASNET_CONNECT_TIMEOUT=%v of the table; aborting the job", h.who[r], h.connect)}, returnC, killC)
					break
				}
			}
		case <-returnC:
			returnC = nil
			returnC, killC = h.step(verdict.ReturnTimeout{}, returnC, killC)
		case <-killC:
			killC = nil
			h.step(verdict.KillTimeout{}, returnC, killC)
			drained = true
		}
		if h.m.Ended() && h.left == 0 {
			drained = true
		}
	}
	h.ln.Close()
	close(h.drained)
}

// step passes ev to the job's verdict and carries out its actions; it
// returns the timers, (re)started.
func (h *hub) step(ev any, returnC, killC <-chan time.Time) (<-chan time.Time, <-chan time.Time) {
	for _, a := range h.m.Step(ev) {
		switch a := a.(type) {
		case verdict.Say:
			h.say(a.Text)
		case verdict.End:
			f := ctl.EncodeFrame(ctl.FrameTerminate, ctl.Code{Code: a.Code})
			for _, c := range h.conns {
				h.write(c, f)
			}
			killC = time.After(h.timeout)
		case verdict.Answer:
			h.write(h.conns[a.Rank], ctl.EncodeFrame(ctl.FrameTerminate, ctl.Code{Code: a.Code}))
		case verdict.Kill:
			h.kill(max(h.m.Code(), 1))
		case verdict.WaitReturns:
			returnC = time.After(h.timeout)
		}
	}
	return returnC, killC
}

// write sends frame f on c, if c is a connection; a rank whose
// connection fails is judged by its end.
func (h *hub) write(c net.Conn, f []byte) {
	if c == nil {
		return
	}
	h.wmu.Lock()
	c.SetWriteDeadline(time.Now().Add(h.timeout))
	c.Write(f)
	h.wmu.Unlock()
}

// joined takes rank's connection. A rank that connects after the job
// ended is told its code at once.
func (h *hub) joined(rank int, c net.Conn) {
	h.conns[rank] = c
	if h.m.Ended() {
		h.write(c, ctl.EncodeFrame(ctl.FrameTerminate, ctl.Code{Code: h.m.Code()}))
	}
}

// accept takes connections until the listener closes: each must open
// with a Hello that proves the job secret (a fresh nonce) and a Join that
// names its rank; anything else is closed.
func (h *hub) accept() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			return
		}
		go h.greet(c)
	}
}

// greet checks a new connection's Hello and Join and reads its frames
// into the loop until it ends.
func (h *hub) greet(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(h.connect))
	r := bufio.NewReader(c)
	typ, body, err := ctl.ReadFrameMax(r, ctl.MaxFirstFrame)
	var hello ctl.Hello
	if err != nil || typ != ctl.FrameHello || ctl.DecodeBody(body, &hello) != nil || !hello.Check(h.secret) || !h.nonces.Fresh(hello.Nonce) {
		c.Close()
		return
	}
	c = ctl.Seal(c, r, h.secret, hello.Nonce, true)
	r = bufio.NewReader(c)
	var jn ctl.Join
	typ, body, err = ctl.ReadFrameMax(r, ctl.MaxJoinFrame)
	if err != nil || typ != ctl.FrameJoin || ctl.DecodeBody(body, &jn) != nil || jn.Rank < 0 || jn.Rank >= len(h.conns) || !h.take(jn.Rank) {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	h.events <- hubEvent{rank: jn.Rank, conn: c}
	for {
		typ, body, err := ctl.ReadFrame(r)
		if err != nil {
			h.events <- hubEvent{rank: jn.Rank, err: err}
			c.Close()
			return
		}
		if typ == ctl.FrameExit {
			h.events <- hubEvent{rank: jn.Rank, typ: typ, body: body}
		}
	}
}

// take reports whether rank had no connection yet, and marks it taken: a
// second connection for a rank is dropped.
func (h *hub) take(rank int) bool {
	h.tmu.Lock()
	defer h.tmu.Unlock()
	if h.taken[rank] {
		return false
	}
	h.taken[rank] = true
	return true
}
