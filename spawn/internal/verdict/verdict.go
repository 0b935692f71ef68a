// Package verdict holds the console's rules for the end of a job as a pure
// state machine: the console's loop feeds it what happens (a rank's Exit
// frame, the end of its control connection, a process's status, a signal,
// a timer) with Step, and carries out the actions it returns (say a line,
// tell the workers to exit, kill them, start a timer); Code is the job's
// exit code once every process has ended. It does no I/O and reads no
// clock, so every exit scenario is a table test (verdict_test.go).
//
// The rules (DESIGN.md §1): the job's code is the code of the first Exit
// (when it is 0, the highest code passed to Finalize before it, if any),
// or, once every rank has called Finalize and none Exit, the highest code
// they passed; unless that is 0 and a rank ended otherwise
// than the job told it to (a crash, a signal, an abort after Exit(0), a
// rank that returned from main while others ran, a launcher that failed),
// whose status then wins. A crash is never reported as success.
package verdict

import (
	"fmt"
	"strconv"
	"strings"
)

// Config describes the job to a Machine.
type Config struct {
	// Who names each rank for messages ("rank 3 (pid 1234 on h)"), and
	// Host its host's name ("h").
	Who, Host []string
	// PerWorker says that the console sees each worker's process status
	// (the L and S spawners); under a launcher (C) it sees only the
	// launcher's.
	PerWorker bool
}

// The events a Machine takes (Step).
type (
	// Exit is a rank's Exit frame: its code, and why when it aborts the
	// job.
	Exit struct {
		Rank, Code int
		Why        string
	}
	// Finalize is a rank's Finalize frame: it waits for the job's end,
	// and asks for Code.
	Finalize struct{ Rank, Code int }
	// Closed is the end of a rank's control connection.
	Closed struct{ Rank int }
	// Ended is the status of a rank's process.
	Ended struct {
		Rank   int
		Code   int    // exit code, or 128+signal
		Status string // as the OS says it
	}
	// Stray is the status of a process that is no rank: the launcher
	// (Launcher), or a worker the console never met (Who names it).
	Stray struct {
		Launcher bool
		Who      string
		Code     int
		Status   string
		Clean    bool // exited with 0
	}
	// Signal is a stop signal at the console (SIGINT, SIGTERM, ...):
	// Code is 128+its number, Name as Go prints it ("interrupt").
	Signal struct {
		Code int
		Name string
	}
	// ReturnTimeout says that GASNET_EXIT_TIMEOUT has passed since the last
	// WaitReturns.
	ReturnTimeout struct{}
	// KillTimeout says that GASNET_EXIT_TIMEOUT has passed since End: the
	// workers left are killed.
	KillTimeout struct{}
	// Abort is the console's own decision to end the job with Code, for
	// Why (a hang check that found collectives that cannot complete, a
	// rank not heard from); Kill says whether to signal the workers at
	// once (a rank that does not answer cannot exit by itself).
	Abort struct {
		Code int
		Why  string
		Kill bool
	}
	// Drained says that the console stops waiting for the connections
	// of ranks whose processes have ended: they count as closed.
	Drained struct{}
)

// The actions a Machine asks for.
type (
	// Say is a line for the console's stderr.
	Say struct{ Text string }
	// End: tell every worker to exit with Code, and start the
	// GASNET_EXIT_TIMEOUT timer after which those left are killed
	// (KillTimeout). By says what ended the job when a rank's Exit(0)
	// did ("rank 3's Exit(0)"): a rank ended in a library call then says
	// so, for the job's code tells nothing went wrong; else it is empty.
	End struct {
		Code int
		By   string
	}
	// Answer: tell Rank, whose Exit came after the job had ended, to exit
	// with Code.
	Answer struct{ Rank, Code int }
	// Kill: signal every worker (their statuses are then the console's
	// doing); Now: without grace, for a second signal.
	Kill struct{ Now bool }
	// WaitReturns: (re)start the GASNET_EXIT_TIMEOUT timer after which
	// ranks that ended without Exit while others run abort the job
	// (ReturnTimeout).
	WaitReturns struct{}
)

// Machine is the state of a job's end.
type Machine struct {
	cfg      Config
	code     int // the job's code; -1 while it runs
	abnormal int // the status of the first rank that ended otherwise than told (0: none)
	killing  bool
	ranks    []rank
	// running and unjudged count the ranks running() and not judged.
	running, unjudged int
	// returned are the ranks that ended without Exit while others run.
	returned []int
	// finalized counts the ranks that called Finalize, final is the
	// highest code they passed, and finalRank the first rank that passed
	// it.
	finalized, final, finalRank int
	out                         []any
}

type rank struct {
	exited    bool // sent Exit
	exitCode  int  // the code it passed to Exit
	finalized bool // sent Finalize
	closed    bool // its control connection ended
	gone      bool // under a launcher: its connection ended without Exit
	ended     bool // its process's status came
	status    Ended
	judged    bool
}

// running reports whether the rank's process has not ended and it has not
// called Exit.
func (r *rank) isRunning() bool { return !r.ended && !r.exited && !r.gone }

// New returns the Machine of a job of len(cfg.Who) ranks, all running.
func New(cfg Config) *Machine {
	n := len(cfg.Who)
	return &Machine{cfg: cfg, code: -1, ranks: make([]rank, n), running: n, unjudged: n}
}

// Ended reports whether the job's code is fixed (the workers were told to
// exit).
func (m *Machine) Ended() bool { return m.code >= 0 }

// Running counts the ranks whose process has not ended and that have not
// called Exit.
func (m *Machine) Running() int { return m.running }

// Unjudged counts the ranks whose end has not been judged yet: the console
// waits for them (a process's end may come before the last frames of its
// connection).
func (m *Machine) Unjudged() int { return m.unjudged }

// Heard reports whether rank r may still be expected to answer the
// console: its process has not ended, it has not called Exit, and its
// connection is open.
func (m *Machine) Heard(r int) bool {
	return !m.ranks[r].ended && !m.ranks[r].exited && !m.ranks[r].closed
}

// Finalized reports whether rank r has called Finalize.
func (m *Machine) Finalized(r int) bool { return m.ranks[r].finalized }

// Done reports whether rank r has ended: its process's status came, or it
// called Exit.
func (m *Machine) Done(r int) bool { return m.ranks[r].ended || m.ranks[r].exited }

// Code returns the job's exit code: the first Exit's (or, when that is 0,
// the highest code passed to Finalize before it), or the highest code
// passed to Finalize once every rank has called it; unless that is 0 and
// a rank ended abnormally; 0 when every rank ended with 0 without Exit.
func (m *Machine) Code() int {
	switch {
	case m.code == 0 && m.abnormal != 0:
		return m.abnormal
	case m.code < 0:
		return 0
	}
	return m.code
}

// Step takes one event and returns the actions it calls for, in order
// (valid until the next Step).
func (m *Machine) Step(ev any) []any {
	m.out = m.out[:0]
	switch e := ev.(type) {
	case Exit:
		m.exit(e)
	case Finalize:
		m.finalize(e)
	case Closed:
		m.track(e.Rank, func(r *rank) { r.closed = true })
		m.judge(e.Rank)
	case Ended:
		m.track(e.Rank, func(r *rank) { r.ended, r.status = true, e })
		m.judge(e.Rank)
	case Stray:
		m.stray(e)
	case Signal:
		if m.code >= 0 {
			m.emit(Kill{Now: true})
			break
		}
		m.sayf("%s: stopping every worker", e.Name)
		m.end(e.Code, "")
		m.killAll()
	case ReturnTimeout:
		m.returnTimeout()
	case KillTimeout:
		m.killAll()
	case Abort:
		if m.code >= 0 {
			break
		}
		m.sayf("%s", e.Why)
		m.abnormal = max(m.abnormal, e.Code)
		m.end(e.Code, "")
		if e.Kill {
			m.killAll()
		}
	case Drained:
		for i := range m.ranks {
			m.track(i, func(r *rank) { r.closed = true })
			m.judge(i)
		}
	default:
		panic(fmt.Sprintf("verdict: unknown event %T", ev))
	}
	return m.out
}

func (m *Machine) emit(a any) { m.out = append(m.out, a) }

func (m *Machine) sayf(format string, a ...any) { m.emit(Say{fmt.Sprintf(format, a...)}) }

// exit takes rank e.Rank's Exit frame. The first one ends the job with its
// code. An abort (a reason given, a code not 0) after the job ended with 0
// makes the job's code its own: a rank that said it aborts the job never
// ends in success, whatever Exit(0) of another rank came first; the
// console says so in one line. An Exit after the job ended is answered
// with the job's code.
func (m *Machine) exit(e Exit) {
	m.track(e.Rank, func(r *rank) { r.exited, r.exitCode = true, e.Code })
	if m.code < 0 {
		if e.Why != "" {
			m.sayf("rank %d on %s aborted the job (code %d): %s", e.Rank, m.cfg.Host[e.Rank], e.Code, e.Why)
			m.end(e.Code, "")
			return
		}
		switch {
		case e.Code == 0 && m.final > 0:
			m.sayf("rank %d called Exit(0) after rank %d called Finalize(%d): the job ends with %d", e.Rank, m.finalRank, m.final, m.final)
			m.end(m.final, "")
		case e.Code == 0:
			m.end(0, fmt.Sprintf("rank %d's Exit(0)", e.Rank))
		default:
			m.end(e.Code, "")
		}
		return
	}
	if e.Why != "" && e.Code != 0 && m.code == 0 && m.abnormal == 0 {
		// Said once, and only when it changes the outcome: a later abort
		// of a job already ending non-zero is in the rank's own line.
		m.sayf("rank %d on %s aborted the job (code %d) as it ended with code 0: %s", e.Rank, m.cfg.Host[e.Rank], e.Code, e.Why)
		m.abnormal = e.Code
	}
	m.emit(Answer{Rank: e.Rank, Code: m.code})
}

// finalize takes rank e.Rank's Finalize frame. Once every rank has sent
// one, and none an Exit, the job ends with the highest code they passed;
// a Finalize after the job ended is answered with the job's code, as an
// Exit is. A rank that has called Finalize still runs (it serves the
// others' requests until the end): one that returned from main meanwhile
// is judged as while others compute.
func (m *Machine) finalize(e Finalize) {
	r := &m.ranks[e.Rank]
	if m.code >= 0 {
		m.emit(Answer{Rank: e.Rank, Code: m.code})
		return
	}
	if r.finalized || r.exited {
		return
	}
	r.finalized = true
	m.finalized++
	if e.Code > m.final {
		m.final, m.finalRank = e.Code, e.Rank
	}
	if m.finalized == len(m.ranks) {
		m.end(m.final, "")
	}
}

// stray takes the status of the launcher or of a worker the console never
// met.
func (m *Machine) stray(e Stray) {
	switch {
	case m.code < 0 && !e.Clean && e.Launcher:
		m.sayf("the launcher ended with %s while the job ran%s; aborting the job", e.Status, m.goneRanks())
		m.abnormal = max(e.Code, 1)
		m.end(max(e.Code, 1), "")
	case m.code < 0 && !e.Clean:
		m.sayf("%s ended without exiting: %s; aborting the job", e.Who, e.Status)
		m.end(max(e.Code, 1), "")
	case m.code < 0 && e.Launcher && m.running == 0:
		m.end(0, "") // every rank ended without Exit, and the launcher says all went well
	case m.code == 0 && !e.Clean && e.Launcher && !m.killing:
		m.sayf("the launcher ended with %s after the job ended with code 0", e.Status)
		m.abnormal = max(e.Code, 1)
	}
}

// returnTimeout aborts the job when ranks that ended without Exit have
// left others running for GASNET_EXIT_TIMEOUT.
func (m *Machine) returnTimeout() {
	if m.code >= 0 || m.running == 0 {
		return
	}
	ranks := make([]string, len(m.returned))
	for i, r := range m.returned {
		ranks[i] = strconv.Itoa(r)
	}
	status := "with status 0 "
	if !m.cfg.PerWorker {
		status = "(its status is the launcher's to tell) "
	}
	m.sayf("rank %s ended %swithout calling conduit.Finalize or conduit.Exit while %d other ranks still run (returning from main or os.Exit ends only a rank, not the job); aborting the job",
		strings.Join(ranks, ","), status, m.running)
	m.abnormal = 1
	m.end(1, "")
}

// track runs f, which changes what is known of rank i, and keeps the
// counts of running and unjudged ranks.
func (m *Machine) track(i int, f func(r *rank)) {
	r := &m.ranks[i]
	running, judged := r.isRunning(), r.judged
	f(r)
	if running && !r.isRunning() {
		m.running--
	}
	if !judged && r.judged {
		m.unjudged--
	}
}

// judge decides, once a rank's process has ended and its connection has
// ended too (so that an Exit frame it sent has been read), whether it ended
// as the job told it:
//   - it called Exit(c) and its status is c, or the job's code;
//   - the console told it the job's code and its status is that code;
//   - it ended with 0 without Exit: the job's end if every rank does so
//     (all return from main), otherwise, once the others have had
//     GASNET_EXIT_TIMEOUT to follow, an abnormal end that aborts the job.
//
// Anything else (a crash, a signal, a -race program's 66 after Exit(0)) is
// an abnormal end: named by rank, and the job's code is not 0.
func (m *Machine) judge(i int) {
	if !m.cfg.PerWorker {
		m.judgeLaunched(i)
		return
	}
	r := &m.ranks[i]
	if r.judged || !r.ended || (!r.closed && !r.exited) {
		return
	}
	m.track(i, func(r *rank) { r.judged = true })
	e := r.status
	switch {
	case m.killing:
	case r.exited && (e.Code == r.exitCode || e.Code == m.code):
	case m.code >= 0 && e.Code == m.code:
	case r.exited:
		m.failed(i, fmt.Sprintf("ended with %s although it called Exit(%d)", e.Status, r.exitCode), e.Code)
	case m.code >= 0:
		m.failed(i, fmt.Sprintf("ended with %s after the job ended with code %d", e.Status, m.code), e.Code)
	case e.Code != 0:
		m.failed(i, fmt.Sprintf("ended without exiting: %s", e.Status), e.Code)
	default:
		m.returned = append(m.returned, i)
		if m.running == 0 {
			m.end(0, "") // every rank returned from main (or exited)
			return
		}
		m.emit(WaitReturns{})
	}
}

// judgeLaunched judges a rank started by a launcher (C), whose process
// status the console never sees: only the launcher's. A rank whose control
// connection ended after Exit ended as the job told it. One whose
// connection ended without Exit ended by itself: if other ranks still run
// GASNET_EXIT_TIMEOUT later, it is an abnormal end that aborts the job (as
// a rank ending with 0 without Exit under L); if every rank has ended so,
// the launcher's status decides the job's code (see stray). A task that
// fails makes the launcher end at once (srun -K, mpirun, mpiexec), and its
// status then aborts the job.
func (m *Machine) judgeLaunched(i int) {
	r := &m.ranks[i]
	if r.judged || !r.closed {
		return
	}
	m.track(i, func(r *rank) { r.judged = true })
	if m.killing || r.exited || m.code >= 0 {
		return
	}
	m.track(i, func(r *rank) { r.gone = true })
	m.returned = append(m.returned, i)
	if m.running > 0 {
		m.emit(WaitReturns{})
	}
}

// goneRanks names the first rank whose connection ended without Exit, for
// the launcher's messages.
func (m *Machine) goneRanks() string {
	if len(m.returned) == 0 {
		return ""
	}
	return fmt.Sprintf(" (rank %d was the first to end without calling conduit.Exit)", m.returned[0])
}

// failed reports an abnormal end of rank i and makes the job's code not 0.
func (m *Machine) failed(i int, what string, code int) {
	code = max(code, 1)
	if m.abnormal == 0 {
		m.abnormal = code
	}
	if m.code < 0 {
		m.sayf("%s %s; aborting the job", m.cfg.Who[i], what)
		m.end(code, "")
		return
	}
	m.sayf("%s %s", m.cfg.Who[i], what)
}

// end fixes the job's code; by says what ended it (End.By).
func (m *Machine) end(code int, by string) {
	m.code = code
	m.emit(End{Code: code, By: by})
}

// killAll signals every worker: their statuses are no longer theirs.
func (m *Machine) killAll() {
	m.killing = true
	m.emit(Kill{})
}
