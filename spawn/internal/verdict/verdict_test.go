package verdict

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// machine returns the Machine of a job of n ranks on host "h".
func machine(n int, perWorker bool) *Machine {
	cfg := Config{PerWorker: perWorker}
	for r := range n {
		cfg.Who = append(cfg.Who, fmt.Sprintf("rank %d (pid %d on h)", r, 100+r))
		cfg.Host = append(cfg.Host, "h")
	}
	return New(cfg)
}

// status is the Ended event of rank r exiting with code (128+ a signal
// number reads "signal: ...").
func status(r, code int) Ended {
	if code > 128 {
		return Ended{Rank: r, Code: code, Status: fmt.Sprintf("signal %d", code-128)}
	}
	return Ended{Rank: r, Code: code, Status: fmt.Sprintf("exit status %d", code)}
}

// gone is a rank's whole end: its connection closes and its process ends
// with code.
func gone(r, code int) []any { return []any{Closed{Rank: r}, status(r, code)} }

// exited is a rank that calls Exit(code) and ends with that code.
func exited(r, code int) []any { return append([]any{Exit{Rank: r, Code: code}}, gone(r, code)...) }

// finalized is a rank's Finalize(code) frame.
func finalized(r, code int) []any { return []any{Finalize{Rank: r, Code: code}} }

func cat(parts ...[]any) []any {
	var out []any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// launcher is the status of the launcher (C).
func launcher(code int) Stray {
	return Stray{Launcher: true, Code: code, Status: fmt.Sprintf("exit status %d", code), Clean: code == 0}
}

// TestScenarios runs the exit scenarios of cmd/testexit (and those of the
// launchers, signals and the console's own checks) through the machine:
// the job's code, and what the console says.
func TestScenarios(t *testing.T) {
	for _, tc := range []struct {
		name      string
		perWorker bool
		n         int
		events    []any
		code      int
		say       []string // substrings of the lines said, in order
	}{
		{"every rank returns from main", true, 3, cat(gone(0, 0), gone(1, 0), gone(2, 0)), 0, nil},
		{"Exit(0) on every rank", true, 2, cat(exited(0, 0), exited(1, 0)), 0, nil},
		{"Exit(7) on rank 0, the others told", true, 3, cat(exited(0, 7), gone(1, 7), gone(2, 7)), 7, nil},
		{"the first Exit's code wins", true, 2, cat(exited(1, 3), exited(0, 5)), 3, nil},
		{"a crash while the job runs", true, 2, cat(gone(1, 139), gone(0, 139)), 139,
			[]string{"rank 1 (pid 101 on h) ended without exiting: signal 11; aborting the job"}},
		{"a crash after Exit(0) wins over 0", true, 2, cat(exited(0, 0), gone(1, 134)), 134,
			[]string{"rank 1 (pid 101 on h) ended with signal 6 after the job ended with code 0"}},
		{"a status other than the Exit code", true, 2, cat(exited(0, 0), []any{Exit{Rank: 1, Code: 0}}, gone(1, 66)), 66,
			[]string{"rank 1 (pid 101 on h) ended with exit status 66 although it called Exit(0)"}},
		{"an abort after Exit(0)", true, 2, cat(exited(0, 0), []any{Exit{Rank: 1, Code: 1, Why: "unreachable"}}, gone(1, 1)), 1,
			[]string{"rank 1 on h aborted the job (code 1) as it ended with code 0: unreachable"}},
		{"an abort after an abort is said once", true, 3, cat([]any{Exit{Rank: 0, Code: 1, Why: "x"}, Exit{Rank: 1, Code: 1, Why: "x"}}, gone(0, 1), gone(1, 1), gone(2, 1)), 1,
			[]string{"rank 0 on h aborted the job (code 1): x"}},
		{"a rank returns while others run", true, 2, cat(gone(0, 0), []any{ReturnTimeout{}}, gone(1, 1)), 1,
			[]string{"rank 0 ended with status 0 without calling conduit.Finalize or conduit.Exit while 1 other ranks still run"}},
		{"Finalize on every rank: the highest code", true, 3, cat(finalized(0, 0), finalized(1, 4), finalized(2, 2), gone(0, 4), gone(1, 4), gone(2, 4)), 4, nil},
		{"Finalize(0) on every rank", true, 2, cat(finalized(1, 0), finalized(0, 0), gone(0, 0), gone(1, 0)), 0, nil},
		{"an Exit while others finalize ends the job at once", true, 3, cat(finalized(0, 6), exited(1, 2), gone(0, 2), gone(2, 2)), 2, nil},
		{"an Exit(0) keeps a failure Finalize reported", true, 3, cat(finalized(2, 0), finalized(0, 3), exited(1, 0), gone(0, 3), gone(2, 3)), 3,
			[]string{"rank 1 called Exit(0) after rank 0 called Finalize(3): the job ends with 3"}},
		{"a crash while the others finalize", true, 3, cat(finalized(0, 0), finalized(1, 0), gone(2, 139), gone(0, 139), gone(1, 139)), 139,
			[]string{"rank 2 (pid 102 on h) ended without exiting: signal 11; aborting the job"}},
		{"a return from main while the others finalize", true, 2, cat(finalized(0, 0), gone(1, 0), []any{ReturnTimeout{}}, gone(0, 1)), 1,
			[]string{"rank 1 ended with status 0 without calling conduit.Finalize or conduit.Exit while 1 other ranks still run"}},
		{"a crash after every rank finalized with 0 wins over 0", true, 2, cat(finalized(0, 0), finalized(1, 0), gone(0, 0), gone(1, 139)), 139,
			[]string{"rank 1 (pid 101 on h) ended with signal 11 after the job ended with code 0"}},
		{"C: Finalize on every rank", false, 2, cat(finalized(0, 3), finalized(1, 0), []any{Closed{Rank: 0}, Closed{Rank: 1}, launcher(3)}), 3, nil},
		{"a late return timer after every rank returned", true, 2, cat(gone(0, 0), gone(1, 0), []any{ReturnTimeout{}}), 0, nil},
		{"a stop signal", true, 2, cat([]any{Signal{Code: 143, Name: "terminated"}}, gone(0, 143), gone(1, 137)), 143,
			[]string{"terminated: stopping every worker"}},
		{"killed stragglers are the console's doing", true, 2, cat(exited(0, 4), []any{KillTimeout{}}, gone(1, 137)), 4, nil},
		{"a straggler killed without the console's word", true, 2, cat(exited(0, 4), gone(1, 137)), 4,
			[]string{"rank 1 (pid 101 on h) ended with signal 9 after the job ended with code 4"}},
		{"the console's own abort", true, 2, cat([]any{Abort{Code: 1, Why: "the ranks called different collectives; aborting the job"}}, gone(0, 1), gone(1, 1)), 1,
			[]string{"the ranks called different collectives; aborting the job"}},
		{"a worker the console never met fails", true, 1, cat([]any{Stray{Who: "worker 3 (pid 9 on h)", Code: 2, Status: "exit status 2"}}, gone(0, 2)), 2,
			[]string{"worker 3 (pid 9 on h) ended without exiting: exit status 2; aborting the job"}},

		{"C: every rank returns, the launcher says 0", false, 2, []any{Closed{Rank: 0}, Closed{Rank: 1}, launcher(0)}, 0, nil},
		{"C: every rank returns, the launcher says 3", false, 2, []any{Closed{Rank: 0}, Closed{Rank: 1}, launcher(3)}, 3,
			[]string{"the launcher ended with exit status 3 while the job ran (rank 0 was the first to end without calling conduit.Exit); aborting the job"}},
		{"C: Exit(0), then the launcher fails", false, 2, []any{Exit{Rank: 0}, Exit{Rank: 1}, Closed{Rank: 0}, Closed{Rank: 1}, launcher(5)}, 5,
			[]string{"the launcher ended with exit status 5 after the job ended with code 0"}},
		{"C: Exit(2), the launcher's status follows it", false, 2, []any{Exit{Rank: 0, Code: 2}, Closed{Rank: 0}, Closed{Rank: 1}, launcher(2)}, 2, nil},
		{"C: a rank gone while others run", false, 2, []any{Closed{Rank: 1}, ReturnTimeout{}, Closed{Rank: 0}, launcher(0)}, 1,
			[]string{"rank 1 ended (its status is the launcher's to tell) without calling conduit.Finalize or conduit.Exit while 1 other ranks still run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := machine(tc.n, tc.perWorker)
			var said []string
			for _, ev := range tc.events {
				for _, a := range m.Step(ev) {
					if s, ok := a.(Say); ok {
						said = append(said, s.Text)
					}
				}
			}
			if got := m.Code(); got != tc.code {
				t.Errorf("code %d, want %d; said %q", got, tc.code, said)
			}
			if len(said) != len(tc.say) {
				t.Fatalf("said %q, want %d lines like %q", said, len(tc.say), tc.say)
			}
			for i, w := range tc.say {
				if !strings.Contains(said[i], w) {
					t.Errorf("line %d %q, want %q in it", i, said[i], w)
				}
			}
			if m.Unjudged() != 0 && tc.perWorker {
				t.Errorf("%d ranks unjudged after every process ended", m.Unjudged())
			}
		})
	}
}

// TestActions: what the console is asked to do, in order, for the events
// that drive its I/O.
func TestActions(t *testing.T) {
	m := machine(3, true)
	for _, c := range []struct {
		ev   any
		want []any
	}{
		{Exit{Rank: 0, Code: 3}, []any{End{Code: 3}}},
		{Exit{Rank: 1, Code: 5}, []any{Answer{Rank: 1, Code: 3}}},
		{Closed{Rank: 2}, nil},
		{Signal{Code: 130, Name: "interrupt"}, []any{Kill{Now: true}}},
		{KillTimeout{}, []any{Kill{}}},
	} {
		got := append([]any(nil), m.Step(c.ev)...)
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("Step(%#v) (-want +got):\n%s", c.ev, d)
		}
	}
	m = machine(3, true)
	if got := m.Step(status(0, 0)); len(got) != 0 {
		t.Errorf("a process's end before its connection's: %v", got)
	}
	if d := cmp.Diff([]any{WaitReturns{}}, m.Step(Closed{Rank: 0})); d != "" {
		t.Errorf("a rank returned while others run (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]any{Say{"interrupt: stopping every worker"}, End{Code: 130}, Kill{}}, m.Step(Signal{Code: 130, Name: "interrupt"})); d != "" {
		t.Errorf("a stop signal (-want +got):\n%s", d)
	}
	if !m.Ended() || m.Running() != 2 || m.Done(1) || !m.Done(0) {
		t.Errorf("Ended %v, Running %d, Done(1) %v, Done(0) %v", m.Ended(), m.Running(), m.Done(1), m.Done(0))
	}
	m.Step(Drained{})
	if m.Unjudged() != 2 { // their processes have not ended: nothing to judge
		t.Errorf("Unjudged %d after Drained, want 2", m.Unjudged())
	}
}

// TestFinalizeActions: the job ends at the last Finalize, with the highest
// code and no rank's Exit named; a Finalize repeated, or after the end, is
// no second vote.
func TestFinalizeActions(t *testing.T) {
	m := machine(3, true)
	for _, c := range []struct {
		ev   any
		want []any
	}{
		{Finalize{Rank: 2, Code: 1}, nil},
		{Finalize{Rank: 2, Code: 9}, nil},
		{Finalize{Rank: 0, Code: 0}, nil},
		{Finalize{Rank: 1, Code: 0}, []any{End{Code: 1}}},
		{Finalize{Rank: 1, Code: 0}, []any{Answer{Rank: 1, Code: 1}}},
	} {
		got := append([]any(nil), m.Step(c.ev)...)
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("Step(%#v) (-want +got):\n%s", c.ev, d)
		}
	}
	if m.Running() != 3 {
		t.Errorf("Running %d after every rank finalized, want 3: they serve until they are told", m.Running())
	}
	if d := cmp.Diff([]any{Answer{Rank: 0, Code: 1}}, m.Step(Exit{Rank: 0, Code: 5})); d != "" {
		t.Errorf("an Exit after the end (-want +got):\n%s", d)
	}
	m = machine(2, true)
	if d := cmp.Diff([]any{End{Code: 0, By: "rank 1's Exit(0)"}}, m.Step(Exit{Rank: 1})); d != "" {
		t.Errorf("an Exit(0) (-want +got):\n%s", d)
	}
}
