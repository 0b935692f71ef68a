package worker

// This file is a worker's end: the console's Terminate and the grace
// period after it, Exit, Abort and Finalize, and the process's exit.

import (
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// AtExit sets f to run once when this rank ends through the library (it
// calls Exit, or the console tells it to exit), before the process exits.
func (w *Worker) AtExit(f func()) { w.atExit.Store(&f) }

// exit runs the AtExit function and exits the process with code. A
// directly launched rank 0 first waits until the other ranks have taken
// the job's end from its hub, or its hub handed them to killJob
// (GASNET_EXIT_TIMEOUT after the end, or later for ranks that answer its
// pings; the wait is bounded by drainWait);
// a directly launched rank ending with 0 whose PMI session is still open
// (srun) ends it, so that the launcher takes its end as the job's.
func (w *Worker) exit(code int) {
	w.endSaid.Store(true) // ending through the library: nothing to say
	w.exitOnce.Do(func() {
		if f := w.atExit.Load(); f != nil {
			(*f)()
		}
		if w.hub != nil {
			select {
			case <-w.hub.Drained():
			case <-time.After(drainWait(w.exitTimeout)):
			}
		}
		if w.pmi != nil && !w.finalized && code == 0 {
			w.pmi.Finalize()
		}
	})
	os.Stdout.Sync()
	w.children.WaitEnd()
	exitProcess(code)
}

// SetGrace sets how long after the console's Terminate a rank that makes
// no library call may go on before it is ended (see Terminating).
func (w *Worker) SetGrace(d time.Duration) { w.grace.Store(int64(d)) }

// SetLiveness sets how long the worker waits for a word from its console
// (GASNET_LIVENESS_TIMEOUT; the console pings every quarter of it): a
// worker that hears nothing for that long has lost its console (its host
// cut off, or the console stopped) and ends itself, busy or idle, instead
// of living on until TCP gives up. 0: never.
func (w *Worker) SetLiveness(d time.Duration) { w.liveness.Store(int64(d)) }

// Terminating is the flag set when the console has told this rank to exit
// because the job ended elsewhere (or the rank aborts it); it is never
// cleared, and the library only loads it. The library then ends the
// process at the program's next call into it (ExitNow), so a rank that
// prints its last lines after a barrier while another rank already called
// Exit still prints them; a rank that makes no call is ended after the
// grace period.
func (w *Worker) Terminating() *atomic.Bool { return &w.terminating }

// ExitNow ends a terminating rank's process with the job's code. in names
// the library call the program was in ("Get"; "" for none, or for the
// calls that end a rank: Exit, Finalize): when another rank's Exit(0)
// ended the job, the rank first says so on stderr, in one line ("rank 0
// was ended in Get by rank 3's Exit(0)"): what the program did not get to
// do after that call (print its result, a check) is lost, and the job's
// code says nothing went wrong.
func (w *Worker) ExitNow(in string) {
	if in != "" {
		w.sayEnded("in " + in)
	}
	w.exit(int(w.termCode.Load()))
}

// sayEnded says, once, where this rank was when another rank's Exit(0)
// ended the job; nothing when something else ended it (a code not 0 says
// the job failed, and the console or the rank that chose it says why), or
// when this rank is ending by its own Exit.
func (w *Worker) sayEnded(where string) {
	by := w.termBy.Load()
	if by == nil || w.exiting.Load() || !w.endSaid.CompareAndSwap(false, true) {
		return
	}
	say(fmt.Sprintf("rank %d was ended %s by %s", w.wel.Rank, where, *by))
}

// terminate handles the console's Terminate: the job's code, and by, what
// ended the job when another rank's Exit did (ctl.Code's Why).
func (w *Worker) terminate(code int, by string) {
	if w.exiting.Load() {
		w.exit(code) // Exit was waiting for this word
	}
	w.termCode.Store(int32(code))
	if by != "" {
		w.termBy.CompareAndSwap(nil, &by)
	}
	if w.terminating.Swap(true) {
		return
	}
	grace := time.Duration(w.grace.Load())
	time.AfterFunc(grace, func() {
		w.sayEnded(fmt.Sprintf("while it computed (no library call within %v of the job's end)", grace))
		w.ExitNow("")
	})
	w.event() // waits in the library notice and exit
}

// Exit reports code to the console, which ends the job with the first code
// reported; it waits briefly for the console's word, then exits the process.
func (w *Worker) Exit(code int, grace time.Duration) { w.Abort(code, "", grace) }

// Finalize tells the console that this rank has ended its part of the job
// and asks for code: the console ends the job once every rank has, with
// the highest code asked for (or at once, at another rank's Exit or
// failure). The caller then serves the network until Terminating, and
// ends the rank with ExitNow.
func (w *Worker) Finalize(code int) error {
	os.Stdout.Sync()
	if err := w.send(ctl.FrameFinalize, ctl.Code{Code: code}); err != nil {
		return fmt.Errorf("rank %d: telling the console of Finalize: %w", w.wel.Rank, err)
	}
	return nil
}

// Abort is Exit with the reason this rank ends the job, which the console
// reports in its summary line; a code other than 0 with a reason is the
// job's even when another rank's Exit(0) reached the console first. From
// the moment it is called, the rank's other goroutines end at their next
// call into the library (Terminating).
func (w *Worker) Abort(code int, why string, grace time.Duration) {
	w.exiting.Store(true)
	w.termCode.Store(int32(code))
	w.terminating.Store(true)
	w.event()
	os.Stdout.Sync()
	if w.send(ctl.FrameExit, ctl.Code{Code: code, Why: why}) == nil {
		time.Sleep(grace) // the console's Terminate normally ends us first
	}
	w.exit(code)
}
