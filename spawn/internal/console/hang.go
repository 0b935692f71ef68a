package console

// This file is the hang report (GASNET_HANG_WARN): which collective each
// rank says it waits in long, and when the console warns or aborts.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/verdict"
)

// collectives tracks which collective each rank is in, for the hang report
// (GASNET_HANG_WARN).
type collectives struct {
	// waiting holds, for each rank that said it has waited long in a
	// collective of the whole job (Coll), which one; the zero Coll for the
	// others. teams holds each rank's long waits in team collectives, by
	// team (a rank waits in at most one collective of a team at once).
	waiting []ctl.Coll
	teams   []map[uint64]ctl.Coll
	// began holds, for each rank that waits long, when its wait began as
	// the console counts it: half of GASNET_HANG_WARN before the check
	// that first found its report (it reports after half of it); zero
	// for the others. warned: the report was last given this long after
	// the earliest of them.
	began  []time.Time
	warned time.Duration
}

// collFamily groups the collectives that share a numbering and a handler:
// ranks waiting in collectives of different families called different
// collectives (each needs every rank, and the others wait elsewhere).
var collFamily = map[string]string{"barrier": "barrier", "all-gather": "all-gather", "broadcast": "tree", "reduce": "tree", "all-reduce": "tree"}

// mismatched reports whether the collectives ranks wait in cannot all
// complete: two different ones at the same call index (Coll.Index: in a
// program whose collectives match, call k is the same on every rank),
// two barriers or two all-gathers two or more apart (finishing one needs
// every rank in it, so no rank is two of them ahead), or two broadcasts or
// reductions of the same tree number but of different kinds or roots.
// Ranks in different collectives at different indexes may all be right: a
// rank that has all it needs leaves an all-gather (or a barrier) while
// others still wait for a datagram lost on the way to them.
func mismatched(waiting []ctl.Coll) bool {
	type call struct {
		kind string
		root int
	}
	at, tree := map[uint64]call{}, map[uint64]call{}
	seq := map[string]ctl.Coll{}
	for _, w := range waiting {
		if w.Kind == "" {
			continue
		}
		c := call{w.Kind, w.Root}
		if o, ok := at[w.Index]; ok && w.Index > 0 && o != c {
			return true
		}
		at[w.Index] = c
		if o, ok := tree[w.Tree]; ok && w.Tree > 0 && o != c {
			return true
		}
		tree[w.Tree] = c
		if collFamily[w.Kind] != "tree" {
			if o, ok := seq[w.Kind]; ok && max(w.Seq, o.Seq)-min(w.Seq, o.Seq) >= 2 {
				return true
			}
			seq[w.Kind] = w
		}
	}
	return false
}

// mismatchedTeams reports whether the team collectives ranks wait in
// cannot all complete: two different ones (kind or root) with one number
// on one team. Other differences need not be wrong: a member leaves a
// team collective that needs nothing more of the others (a gather's
// non-root) for the team's next one.
func mismatchedTeams(waits []ctl.Coll) bool {
	type at struct{ team, seq uint64 }
	type call struct {
		kind string
		root int
	}
	seen := map[at]call{}
	for _, w := range waits {
		k, c := at{w.Team, w.Seq}, call{w.Kind, w.Root}
		if o, ok := seen[k]; ok && o != c {
			return true
		}
		seen[k] = c
	}
	return false
}

// teamWaits returns every rank's long waits in team collectives.
func (c *collectives) teamWaits() []ctl.Coll {
	var out []ctl.Coll
	for _, m := range c.teams {
		for _, w := range m {
			out = append(out, w)
		}
	}
	return out
}

// note records a rank's report of a long wait in a collective, or of its
// end.
func (c *collectives) note(rank int, w ctl.Coll) {
	if !w.InTeam() {
		c.waiting[rank] = ctl.Coll{}
		if w.In {
			c.waiting[rank] = ctl.Coll{Kind: w.Kind, Seq: w.Seq, Tree: w.Tree, Root: w.Root, Index: w.Index}
		}
		return
	}
	if c.teams == nil {
		c.teams = make([]map[uint64]ctl.Coll, len(c.waiting))
	}
	if !w.In {
		delete(c.teams[rank], w.Team)
		return
	}
	if c.teams[rank] == nil {
		c.teams[rank] = map[uint64]ctl.Coll{}
	}
	c.teams[rank][w.Team] = ctl.Coll{Kind: w.Kind, Seq: w.Seq, Root: w.Root, Team: w.Team}
}

// where says which collectives a rank waits in long, or "" for none.
func (c *collectives) where(rank int) string {
	var parts []string
	if c.waiting[rank].Kind != "" {
		parts = append(parts, c.waiting[rank].String())
	}
	if rank < len(c.teams) {
		ids := slices.Sorted(maps.Keys(c.teams[rank]))
		for _, id := range ids {
			parts = append(parts, c.teams[rank][id].String())
		}
	}
	return strings.Join(parts, " and ")
}

// stuck reports whether some ranks wait long in a collective (they say so
// after half of GASNET_HANG_WARN, and again when they leave it: a job whose
// collectives match sends nothing), and describes where every rank is.
func (j *job) stuck(now time.Time) (bool, string) {
	c := &j.coll
	someone := false
	for r := range c.waiting {
		someone = someone || c.where(r) != ""
	}
	if !someone {
		return false, ""
	}
	groups := map[string][]int{}
	var order []string
	for r, p := range j.peers {
		var where string
		switch {
		case j.v.Done(r):
			where = "ended"
		case j.v.Finalized(r):
			where = "in Finalize"
		case c.where(r) != "":
			where = c.where(r)
		case j.cfg.Liveness > 0 && now.Sub(p.heard) >= j.cfg.Liveness/2:
			// It missed two pings: its report may be lost with it.
			where = "not answering the console (its host cut off or its process stopped?)"
		default:
			where = "elsewhere (in no collective)"
		}
		if groups[where] == nil {
			order = append(order, where)
		}
		groups[where] = append(groups[where], r)
	}
	var parts []string
	for _, w := range order {
		word := "ranks"
		if len(groups[w]) == 1 {
			word = "rank"
		}
		parts = append(parts, fmt.Sprintf("%s %s %s", word, rankList(groups[w]), w))
	}
	return true, strings.Join(parts, "; ")
}

// finalizedBeside reports whether a rank is in Finalize while another
// waits in a collective of the whole job, which can then never complete.
func (j *job) finalizedBeside(waiting []ctl.Coll) bool {
	final, inColl := false, false
	for r, c := range waiting {
		final = final || j.v.Finalized(r)
		inColl = inColl || c.Kind != "" && !j.v.Finalized(r)
	}
	return final && inColl
}

// rankList writes ranks compactly: "0-3,7".
func rankList(ranks []int) string {
	var b strings.Builder
	for i := 0; i < len(ranks); {
		k := i
		for k+1 < len(ranks) && ranks[k+1] == ranks[k]+1 {
			k++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if k == i {
			fmt.Fprint(&b, ranks[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", ranks[i], ranks[k])
		}
		i = k + 1
	}
	return b.String()
}

// checkHang gives the hang report when a collective has been incomplete
// for GASNET_HANG_WARN, then at doubling intervals.
func (j *job) checkHang(now time.Time) {
	if j.cfg.HangWarn <= 0 || j.v.Ended() {
		return
	}
	stuck, where := j.stuck(now)
	c := &j.coll
	if c.began == nil {
		c.began = make([]time.Time, len(c.waiting))
	}
	var since time.Time // the earliest wait's beginning
	for r := range c.began {
		switch {
		case !stuck || c.where(r) == "":
			c.began[r] = time.Time{}
			continue
		case c.began[r].IsZero():
			c.began[r] = now.Add(-j.cfg.HangWarn / 2)
		}
		if since.IsZero() || c.began[r].Before(since) {
			since = c.began[r]
		}
	}
	if !stuck {
		c.warned = 0
		return
	}
	d := now.Sub(since)
	if d < c.warned {
		c.warned = 0 // the ranks that waited longest left: count for the others
	}
	next := j.cfg.HangWarn
	if c.warned > 0 {
		next = 2 * c.warned
	}
	if d >= next {
		c.warned = next
		if mismatched(c.waiting) || mismatchedTeams(c.teamWaits()) || j.finalizedBeside(c.waiting) {
			j.step(verdict.Abort{Code: 1, Why: fmt.Sprintf("the ranks called different collectives, which can never complete: %s; aborting the job", where)})
			return
		}
		j.say("a collective has been incomplete for %v: %s", next, where)
	}
}
