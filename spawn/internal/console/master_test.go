package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/verdict"
)

// TestMismatched: which collectives the ranks wait in can never complete.
func TestMismatched(t *testing.T) {
	b := func(n, i uint64) ctl.Coll { return ctl.Coll{Kind: "barrier", Seq: n, Index: i} }
	g := func(n, i uint64) ctl.Coll { return ctl.Coll{Kind: "all-gather", Seq: n, Index: i} }
	tree := func(k string, n, i uint64) ctl.Coll { return ctl.Coll{Kind: k, Seq: n, Index: i} }
	at := func(k string, n uint64, root int) ctl.Coll { return ctl.Coll{Kind: k, Seq: 1, Tree: n, Root: root} }
	for _, tt := range []struct {
		name    string
		waiting []ctl.Coll
		want    bool
	}{
		{"nobody waits", []ctl.Coll{{}, {}}, false},
		{"all in one barrier", []ctl.Coll{b(1, 1), b(1, 1), b(1, 1)}, false},
		{"one elsewhere, the others in a barrier", []ctl.Coll{{}, b(3, 3), b(3, 3)}, false},
		{"barriers one apart (a rank left the one before)", []ctl.Coll{b(2, 2), b(3, 3)}, false},
		{"barriers two apart", []ctl.Coll{b(2, 2), {}, b(4, 4)}, true},
		{"all-gathers two apart", []ctl.Coll{g(5, 5), g(3, 3)}, true},
		{"an all-gather and barriers as the same call", []ctl.Coll{g(1, 1), b(1, 1), b(1, 1)}, true},
		{"some left an all-gather for the next barrier, others still in it", []ctl.Coll{b(1, 2), b(1, 2), g(1, 1), g(1, 1)}, false},
		{"some left a barrier for the next all-gather, others still in it", []ctl.Coll{g(1, 2), b(1, 1)}, false},
		{"a barrier and an all-reduce as the same call", []ctl.Coll{b(1, 1), tree("all-reduce", 1, 1)}, true},
		{"a broadcast and a reduce at different calls", []ctl.Coll{tree("broadcast", 1, 1), tree("reduce", 4, 5)}, false},
		{"broadcasts far apart (a root runs ahead)", []ctl.Coll{tree("broadcast", 1, 1), tree("broadcast", 9, 9)}, false},
		{"one reduction, one root", []ctl.Coll{at("reduce", 3, 0), at("reduce", 3, 0), {}}, false},
		{"one reduction, two roots", []ctl.Coll{at("reduce", 3, 0), {}, at("reduce", 3, 1)}, true},
		{"one tree collective, two kinds", []ctl.Coll{at("reduce", 2, 0), at("broadcast", 2, 0)}, true},
		{"two tree collectives, two roots", []ctl.Coll{at("broadcast", 2, 0), at("broadcast", 5, 1)}, false},
	} {
		if got := mismatched(tt.waiting); got != tt.want {
			t.Errorf("%s: mismatched(%v) = %v, want %v", tt.name, tt.waiting, got, tt.want)
		}
	}
}

// TestStuckNamesSilentRanks: the hang report says where each rank is, and
// a rank that has missed two of the console's pings is named as not
// answering rather than as elsewhere: its own report may be lost with it.
func TestStuckNamesSilentRanks(t *testing.T) {
	now := time.Now()
	j := &job{cfg: &envconf.Config{Liveness: 4 * time.Second},
		peers: []*peerConn{{rank: 0, heard: now}, {rank: 1, heard: now.Add(-3 * time.Second)}, {rank: 2, heard: now.Add(-time.Second)}, {rank: 3, heard: now}},
		coll:  collectives{waiting: []ctl.Coll{{Kind: "barrier", Seq: 1}, {}, {}, {Kind: "barrier", Seq: 1}, {Kind: "broadcast", Seq: 2, Tree: 3, Root: 1}}}}
	j.peers = append(j.peers, &peerConn{rank: 4, heard: now})
	j.v = verdict.New(verdict.Config{Who: make([]string, 5), Host: make([]string, 5), PerWorker: true})
	stuck, where := j.stuck(now)
	want := "ranks 0,3 in barrier 1; rank 1 not answering the console (its host cut off or its process stopped?); rank 2 elsewhere (in no collective); rank 4 in broadcast 2 from rank 1"
	if !stuck || where != want {
		t.Errorf("stuck: %v, %q\nwant %q", stuck, where, want)
	}
}

// TestMismatchedTeams: team collectives can never complete together when
// two ranks wait in one team's collective of one number as different
// calls; waits in different teams, or at different numbers of one team,
// may all be right.
func TestMismatchedTeams(t *testing.T) {
	w := func(team, seq uint64, kind string, root int) ctl.Coll {
		return ctl.Coll{Kind: "team " + kind, Seq: seq, Team: team, Root: root, In: true}
	}
	for _, tt := range []struct {
		name  string
		waits []ctl.Coll
		want  bool
	}{
		{"nobody waits", nil, false},
		{"one collective", []ctl.Coll{w(7, 1, "gather", 0), w(7, 1, "gather", 0)}, false},
		{"two kinds, one number", []ctl.Coll{w(7, 1, "gather", 0), w(7, 1, "scatter", 0)}, true},
		{"two roots, one number", []ctl.Coll{w(7, 3, "reduce", 0), w(7, 3, "reduce", 1)}, true},
		{"two kinds, two teams", []ctl.Coll{w(7, 1, "gather", 0), w(8, 1, "scatter", 0)}, false},
		{"two kinds, two numbers (a non-root went on)", []ctl.Coll{w(7, 1, "gather", 0), w(7, 2, "barrier", 0)}, false},
		{"the whole job's team", []ctl.Coll{w(0, 4, "all-to-all", 0), w(0, 4, "all-to-all-v", 0)}, true},
	} {
		if got := mismatchedTeams(tt.waits); got != tt.want {
			t.Errorf("%s: mismatchedTeams(%v) = %v, want %v", tt.name, tt.waits, got, tt.want)
		}
	}
}

// TestCollectivesNote: a rank's reports of long waits, in a collective of
// the whole job and in several teams at once, are kept until it says it
// left each, and the hang report names them all.
func TestCollectivesNote(t *testing.T) {
	c := collectives{waiting: make([]ctl.Coll, 2)}
	c.note(1, ctl.Coll{Kind: "barrier", Seq: 2, In: true})
	c.note(1, ctl.Coll{Kind: "team gather", Seq: 1, Team: 0x9e, In: true})
	c.note(1, ctl.Coll{Kind: "team scatter", Seq: 5, Team: 0x3, Root: 2, In: true})
	if got, want := c.where(1), "in barrier 2 and in team scatter 5 of team 3 (root 2) and in team gather 1 of team 9e (root 0)"; got != want {
		t.Errorf("where: %q\nwant %q", got, want)
	}
	if got := c.where(0); got != "" {
		t.Errorf("rank 0 waits nowhere, where says %q", got)
	}
	c.note(1, ctl.Coll{Kind: "team gather", Seq: 1, Team: 0x9e})
	c.note(1, ctl.Coll{Kind: "barrier", Seq: 2})
	if got, want := c.where(1), "in team scatter 5 of team 3 (root 2)"; got != want {
		t.Errorf("after leaving two: %q, want %q", got, want)
	}
	if n := len(c.teamWaits()); n != 1 {
		t.Errorf("%d team waits kept, want 1", n)
	}
}

// TestHangReportTiming: the console reports a collective incomplete once
// a rank has waited in it for GASNET_HANG_WARN, counted from when the wait
// began (a rank tells the console after half of it), then at doubling
// intervals; a rank's count ends with its wait, so a rank that waits
// after another left is counted from its own wait.
func TestHangReportTiming(t *testing.T) {
	barrier := func(in bool) ctl.Coll { return ctl.Coll{In: in, Kind: "barrier", Seq: 1} }
	for _, c := range []struct {
		name   string
		events map[int][]func(*collectives) // at second s (of the console's checks, one a second)
		want   map[int]string               // reports at second s
	}{
		{"one wait", map[int][]func(*collectives){
			5:  {func(c *collectives) { c.note(0, barrier(true)) }}, // waiting since 0
			38: {func(c *collectives) { c.note(0, barrier(false)) }},
		}, map[int]string{
			10: "a collective has been incomplete for 10s: rank 0 in barrier 1; rank 1 elsewhere (in no collective)",
			20: "a collective has been incomplete for 20s: rank 0 in barrier 1; rank 1 elsewhere (in no collective)",
		}},
		{"one wait after another", map[int][]func(*collectives){
			5:  {func(c *collectives) { c.note(0, barrier(true)) }},                                                     // waiting since 0
			9:  {func(c *collectives) { c.note(0, barrier(false)) }, func(c *collectives) { c.note(1, barrier(true)) }}, // since 4
			30: {func(c *collectives) { c.note(1, barrier(false)) }},
		}, map[int]string{
			14: "a collective has been incomplete for 10s: rank 0 elsewhere (in no collective); rank 1 in barrier 1",
			24: "a collective has been incomplete for 20s: rank 0 elsewhere (in no collective); rank 1 in barrier 1",
		}},
	} {
		var said []string
		start := time.Now()
		j := &job{cfg: &envconf.Config{HangWarn: 10 * time.Second},
			peers: []*peerConn{{rank: 0, heard: start}, {rank: 1, heard: start}},
			say:   func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) },
			coll:  collectives{waiting: make([]ctl.Coll, 2)}}
		j.v = verdict.New(verdict.Config{Who: make([]string, 2), Host: make([]string, 2), PerWorker: true})
		got := map[int]string{}
		for s := range 45 {
			for _, e := range c.events[s] {
				e(&j.coll)
			}
			n := len(said)
			j.checkHang(start.Add(time.Duration(s) * time.Second))
			if len(said) > n {
				got[s] = said[n]
			}
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s: reports by second (-want +got):\n%s", c.name, d)
		}
	}
}
