package worker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/verdict"
)

// A hub is what rank 0 of a directly launched job (DESIGN.md §9.1) keeps
// of the console: every rank, rank 0 included, holds a TCP connection to
// it, authenticated and sealed with the job secret as a connection to the
// console is, over which it sends its Join, takes its Welcome with the
// job's table once every rank has joined, sends its Exit, takes the job's
// Terminate and answers pings. The job's end follows the console's rules (package
// verdict, as for a launcher's tasks whose statuses the console never
// sees): the first Exit sets the job's code and every rank is told it; a
// connection that ends without Exit is a rank that ended by itself (a
// crash, a signal, a return from main), which aborts the job if others
// still run GASNET_EXIT_TIMEOUT later; a rank that has not connected
// within GASNET_CONNECT_TIMEOUT (and margin) of the launcher's fence, or has not answered a ping for
// GASNET_LIVENESS_TIMEOUT, aborts it at once. Ranks left
// GASNET_EXIT_TIMEOUT after the end are pinged, and handed to kill once
// one of them does not answer within another GASNET_EXIT_TIMEOUT, or
// after maxProbes of them (see stragglers).
type hub struct {
	ln       net.Listener
	secret   []byte
	who      []string // each rank, for messages; "rank 3 (pid 1234 on h)" once it joined
	hosts    []string // each rank's host name, once it joined
	m        *verdict.Machine
	timeout  time.Duration // GASNET_EXIT_TIMEOUT
	connect  time.Duration // GASNET_CONNECT_TIMEOUT
	margin   time.Duration // how much longer than connect the hub waits for a rank
	liveness time.Duration // GASNET_LIVENESS_TIMEOUT (0: no pings)
	say      func(string)
	welcomes func(joins []ctl.Join) ([]ctl.Welcome, error)
	kill     func(code int, left []ctl.Join)
	events   chan hubEvent
	quit     chan struct{}
	// Loop only: each rank's connection and Join, how many have joined,
	// whether each connection ended, when it was last heard, and how
	// many ranks but 0 are still connected or to connect.
	conns    []net.Conn
	joins    []ctl.Join
	joined   int
	closedAt []bool
	heard    []time.Time
	left     int
	// probed is when the hub last pinged the ranks left after the job's
	// end, and probes how many times it did (stragglers).
	probed time.Time
	probes int
	// drained is closed once the job has ended and every rank but 0 has
	// closed its connection, or the ranks left were handed to kill:
	// rank 0 may end without cutting a Terminate short.
	drained chan struct{}
	nonces  ctl.Nonces
	tmu     sync.Mutex
	taken   []bool // ranks that have a connection (take); tmu
}

// hubEvent is what a connection's reader hands the hub's loop: a rank's
// new connection with its Join, a frame, or the connection's end (err).
type hubEvent struct {
	rank int
	conn net.Conn // a new connection
	join ctl.Join // its Join
	typ  byte
	body []byte
	err  error
}

// hubAuth bounds the wait for a new connection's Hello.
const hubAuth = 10 * time.Second

// newHub returns rank 0's hub for a job of n ranks, listening on ln;
// serve runs it. say prints a line of the job's; welcomes makes each
// rank's Welcome from every rank's Join, or says why the job cannot run;
// kill ends what is left of the job with a code, given the Joins of the
// ranks whose connections have not ended.
func newHub(ln net.Listener, secret []byte, n int, exitTimeout, connectTimeout, liveness time.Duration, say func(string),
	welcomes func(joins []ctl.Join) ([]ctl.Welcome, error), kill func(code int, left []ctl.Join)) *hub {
	who, hosts := make([]string, n), make([]string, n)
	for r := range n {
		who[r] = "rank " + strconv.Itoa(r)
	}
	return &hub{ln: ln, secret: secret, who: who, hosts: hosts, timeout: exitTimeout, connect: connectTimeout, liveness: liveness,
		say: say, welcomes: welcomes, kill: kill,
		// The machine names ranks through who and hosts, which join fills in.
		m:      verdict.New(verdict.Config{Who: who, Host: hosts}),
		events: make(chan hubEvent, 4*n), quit: make(chan struct{}), drained: make(chan struct{}),
		conns: make([]net.Conn, n), joins: make([]ctl.Join, n), closedAt: make([]bool, n), heard: make([]time.Time, n),
		left: n - 1, taken: make([]bool, n)}
}

// Addr returns where the hub listens.
func (h *hub) Addr() string { return h.ln.Addr().String() }

// Drained returns a channel closed once the job has ended and every other
// rank has ended its connection, or the ranks left were handed to kill.
func (h *hub) Drained() <-chan struct{} { return h.drained }

// close stops the hub (a test's; a job's hub serves until rank 0 ends).
func (h *hub) close() {
	close(h.quit)
	h.ln.Close()
}

// serve accepts the ranks' connections and runs the job's end. It serves
// until rank 0's process ends (or close): a rank that connects after the
// job ended, rank 0 itself included, is told the job's code.
func (h *hub) serve() {
	go h.accept()
	connectBy := time.NewTimer(h.connect + h.margin)
	defer connectBy.Stop()
	var liveC <-chan time.Time
	if h.liveness > 0 {
		t := time.NewTicker(h.liveness / 4)
		defer t.Stop()
		liveC = t.C
	}
	var returnC, killC <-chan time.Time
	drained := false
	for {
		select {
		case <-h.quit:
			return
		case ev := <-h.events:
			h.heard[ev.rank] = time.Now()
			switch {
			case ev.conn != nil:
				returnC, killC = h.join(ev.rank, ev.conn, ev.join, returnC, killC)
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
			case ev.typ == ctl.FrameFinalize:
				returnC, killC = h.step(verdict.Finalize{Rank: ev.rank, Code: ctl.DecodeExit(ev.body).Code}, returnC, killC)
			}
		case <-connectBy.C:
			var missing []string
			for r, c := range h.conns {
				if c == nil && !h.closedAt[r] {
					missing = append(missing, h.who[r])
				}
			}
			if len(missing) > 0 {
				if len(missing) > 8 {
					missing = append(missing[:8], fmt.Sprintf("and %d more", len(missing)-8))
				}
				returnC, killC = h.step(verdict.Abort{Code: 1, Why: fmt.Sprintf(
					"%s did not connect to rank 0 within %v of the launcher's fence (GASNET_CONNECT_TIMEOUT=%v and a margin for the ranks that name a task that never started); aborting the job",
					strings.Join(missing, ", "), h.connect+h.margin, h.connect)}, returnC, killC)
			}
		case now := <-liveC:
			returnC, killC = h.checkLive(now, returnC, killC)
		case <-returnC:
			returnC = nil
			returnC, killC = h.step(verdict.ReturnTimeout{}, returnC, killC)
		case <-killC:
			killC = nil
			if h.stragglers() {
				killC = time.After(h.timeout)
				continue
			}
			h.step(verdict.KillTimeout{}, returnC, killC)
			if !drained {
				drained = true
				close(h.drained)
			}
		}
		if !drained && h.m.Ended() && h.left == 0 {
			drained = true
			close(h.drained)
		}
	}
}

// checkLive pings every connected rank, once every rank has joined, and aborts the job for the first
// one not heard from (a frame, a Pong) for GASNET_LIVENESS_TIMEOUT: its
// process is stopped or its host is gone, and no end of its connection
// will come.
func (h *hub) checkLive(now time.Time, returnC, killC <-chan time.Time) (<-chan time.Time, <-chan time.Time) {
	if h.m.Ended() || h.joined < len(h.conns) {
		// Until every rank has its Welcome, GASNET_CONNECT_TIMEOUT
		// bounds the wait: a rank waiting for it reads no ping.
		return returnC, killC
	}
	ping := ctl.EncodeFrame(ctl.FramePing, ctl.NoBody{})
	for r, c := range h.conns {
		if c == nil || h.closedAt[r] || !h.m.Heard(r) {
			continue
		}
		if d := now.Sub(h.heard[r]); d >= h.liveness {
			return h.step(verdict.Abort{Code: 1, Kill: true, Why: fmt.Sprintf("%s has not answered rank 0 for %v (GASNET_LIVENESS_TIMEOUT=%v): its process is stopped or its host is unreachable; aborting the job",
				h.who[r], d.Round(time.Millisecond), h.liveness)}, returnC, killC)
		}
		h.write(c, ping)
	}
	return returnC, killC
}

// maxProbes bounds how many times the hub waits GASNET_EXIT_TIMEOUT more
// for ranks left after the job's end that answer (stragglers).
const maxProbes = 4

// drainWait bounds how long rank 0 waits, ending, for its hub to drain:
// the end, every probe, and a margin.
func drainWait(exitTimeout time.Duration) time.Duration { return (maxProbes + 2) * exitTimeout }

// stragglers decides, GASNET_EXIT_TIMEOUT after the job's end and after
// each probe, whether to wait longer for the ranks (but rank 0) whose
// connections are still open: yes while each answered the hub's last ping
// (or none was sent yet) and fewer than maxProbes were sent, and then it
// pings them again. A rank that answers runs: its grace period ends it
// with the job's code, however late a loaded host lets it (Worker's
// terminate); killed instead, it would make the launcher's code the job's
// (Hydra's 9, srun's 137). One that does not answer (stopped, its host
// gone), or is still there after maxProbes, is killed.
func (h *hub) stragglers() bool {
	if h.probes >= maxProbes {
		return false
	}
	var left []net.Conn
	for r, c := range h.conns {
		if r == 0 || c == nil || h.closedAt[r] {
			continue
		}
		if h.probes > 0 && h.heard[r].Before(h.probed) {
			return false
		}
		left = append(left, c)
	}
	if len(left) == 0 {
		return false
	}
	h.probes++
	h.probed = time.Now()
	ping := ctl.EncodeFrame(ctl.FramePing, ctl.NoBody{})
	for _, c := range left {
		h.write(c, ping)
	}
	return true
}

// step passes ev to the job's verdict and carries out its actions; it
// returns the timers, (re)started.
func (h *hub) step(ev any, returnC, killC <-chan time.Time) (<-chan time.Time, <-chan time.Time) {
	for _, a := range h.m.Step(ev) {
		switch a := a.(type) {
		case verdict.Say:
			h.say(a.Text)
		case verdict.End:
			f := ctl.EncodeFrame(ctl.FrameTerminate, ctl.Code{Code: a.Code, Why: a.By})
			for _, c := range h.conns {
				h.write(c, f)
			}
			killC = time.After(h.timeout)
		case verdict.Answer:
			h.write(h.conns[a.Rank], ctl.EncodeFrame(ctl.FrameTerminate, ctl.Code{Code: a.Code}))
		case verdict.Kill:
			var left []ctl.Join
			for r, closed := range h.closedAt {
				if !closed && h.conns[r] != nil {
					left = append(left, h.joins[r])
				}
			}
			h.kill(max(h.m.Code(), 1), left)
		case verdict.WaitReturns:
			returnC = time.After(h.timeout)
		}
	}
	return returnC, killC
}

// write sends frame f on c, if c is a connection, within the exit
// timeout; a rank whose connection fails is judged by its end. Only the
// loop writes.
func (h *hub) write(c net.Conn, f []byte) {
	if c == nil {
		return
	}
	c.SetWriteDeadline(time.Now().Add(h.timeout))
	c.Write(f)
}

// join takes rank's connection and Join. A rank that connects after the
// job ended is told its code at once; once every rank has joined, each is
// sent its Welcome, or the job is aborted when welcomes says it cannot
// run.
func (h *hub) join(rank int, c net.Conn, jn ctl.Join, returnC, killC <-chan time.Time) (<-chan time.Time, <-chan time.Time) {
	h.conns[rank], h.joins[rank] = c, jn
	h.who[rank], h.hosts[rank] = fmt.Sprintf("rank %d (pid %d on %s)", rank, jn.PID, jn.Name), jn.Name
	if h.m.Ended() {
		h.write(c, ctl.EncodeFrame(ctl.FrameTerminate, ctl.Code{Code: h.m.Code()}))
		return returnC, killC
	}
	if h.joined++; h.joined < len(h.conns) {
		return returnC, killC
	}
	wels, err := h.welcomes(h.joins)
	if err != nil {
		return h.step(verdict.Abort{Code: 1, Why: err.Error()}, returnC, killC)
	}
	for r, c := range h.conns {
		h.write(c, ctl.EncodeFrame(ctl.FrameWelcome, wels[r]))
	}
	return returnC, killC
}

// accept takes connections until the listener closes, retrying after
// other errors (out of descriptors, say) as the console does.
func (h *hub) accept() {
	delay := 5 * time.Millisecond
	for {
		c, err := h.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			time.Sleep(delay)
			delay = min(2*delay, time.Second)
			continue
		}
		delay = 5 * time.Millisecond
		go h.greet(c)
	}
}

// greet checks a new connection: a Hello that proves the job secret (a
// fresh nonce) within hubAuth, then, sealed, the Join of a rank that has
// no connection yet; anything else is closed. It then reads the
// rank's frames into the loop until the connection ends.
func (h *hub) greet(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(min(hubAuth, h.connect)))
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
	if err != nil || typ != ctl.FrameJoin || ctl.DecodeBody(body, &jn) != nil || jn.Rank < 0 || jn.Rank >= len(h.taken) || !h.take(jn.Rank) {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if !h.send(hubEvent{rank: jn.Rank, conn: c, join: jn}) {
		c.Close()
		return
	}
	for {
		typ, body, err := ctl.ReadFrame(r)
		if err != nil {
			h.send(hubEvent{rank: jn.Rank, err: err})
			c.Close()
			return
		}
		if (typ == ctl.FrameExit || typ == ctl.FrameFinalize || typ == ctl.FramePong) && !h.send(hubEvent{rank: jn.Rank, typ: typ, body: body}) {
			c.Close()
			return
		}
	}
}

// send hands ev to the loop, unless the hub was closed.
func (h *hub) send(ev hubEvent) bool {
	select {
	case h.events <- ev:
		return true
	case <-h.quit:
		return false
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
