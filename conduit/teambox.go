package conduit

// This file is where team collectives' messages wait: kept by (team,
// collective, sender, step) until the member that expects them takes
// them, with the failures members report.

import (
	"fmt"
	"sync"

	"github.com/udpconduit/udpconduit/amudp"
)

// teamKey says which message of which team collective: the job rank src
// sent it in collective seq of the team id. In every algorithm here a
// member sends another at most one message per collective, so a member
// whose call differs from its sender's takes the sender's message and sees
// the difference (teamCall.recv) instead of waiting for another.
type teamKey struct {
	id, seq uint64
	src     int
}

// teamMsg is a message being received, with what it says of its call.
type teamMsg struct {
	assembly
	meta, root uint32
}

// teamBox keeps the messages of team collectives until their receivers
// take them. A message may come before its receiver has made the team
// (a faster member went on from a Split), so it is kept by the sender's
// job rank.
type teamBox struct {
	mu    sync.Mutex
	in    map[teamKey]*teamMsg
	teams map[uint64]*Team // this rank's teams, by id
	abort func(why string) // Job.abortJob
	// failed holds the collectives that failed with a mismatch (met here
	// or told by a failure notice), by team and number, with what the
	// mismatch was: their messages that come later are dropped.
	failed map[teamSeq]string
}

// teamSeq names collective seq of team id.
type teamSeq struct{ id, seq uint64 }

// register makes t's messages checked against what this rank has left.
func (b *teamBox) register(t *Team) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.teams == nil {
		b.teams = map[uint64]*Team{}
	}
	b.teams[t.id] = t
	b.abort = t.j.abortJob
}

// message is hTeam's handler.
func (b *teamBox) message(tok *amudp.Token, a []uint32, p []byte) {
	if len(a) != 9 || !tok.IsRequest() {
		return
	}
	k := teamKey{id: uint64(a[0]) | uint64(a[1])<<32, seq: uint64(a[2]) | uint64(a[3])<<32, src: tok.Source()}
	notice := a[4]&0xff == teamFailed
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.failed[teamSeq{k.id, k.seq}]; ok {
		return // of a collective known to have failed: every member ends it so
	}
	if t := b.teams[k.id]; t != nil && k.seq <= t.left.Load() {
		// It comes for a collective this rank has left with a result:
		// the sender's call differed from this rank's (as in treeCall,
		// abort).
		r, _ := t.TeamRank(k.src)
		why := fmt.Sprintf("team rank %d sent a message of %s, which this rank has left", r, describeTeam(a[4], a[5]))
		if notice {
			why = fmt.Sprintf("team rank %d met %s after this rank left it", r, clip(p))
		}
		b.abort(fmt.Sprintf("%v: team collective %d: %s", ErrCollectiveMismatch, k.seq, why))
		return
	}
	if notice {
		b.markFailedLocked(k.id, k.seq, clip(p))
		return
	}
	if b.in == nil {
		b.in = map[teamKey]*teamMsg{}
	}
	m := b.in[k]
	if m == nil {
		m = &teamMsg{meta: a[4], root: a[5]}
		b.in[k] = m
	}
	if m.meta != a[4] || m.root != a[5] {
		m.bad, m.buf = fmt.Errorf("chunks of different collectives"), nil
		m.done.Store(true)
		return
	}
	m.add(int(a[6]), int(a[7]), int(a[8]), p, "a team collective's message")
}

// clip returns a failure notice's description, at most maxFailure bytes.
func clip(p []byte) string { return string(p[:min(len(p), maxFailure)]) }

// markFailed records that collective seq of team id failed with the
// mismatch why describes, and drops its messages kept here.
func (b *teamBox) markFailed(id, seq uint64, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.markFailedLocked(id, seq, why)
}

func (b *teamBox) markFailedLocked(id, seq uint64, why string) {
	k := teamSeq{id, seq}
	if _, ok := b.failed[k]; ok {
		return
	}
	if b.failed == nil {
		b.failed = map[teamSeq]string{}
	}
	b.failed[k] = why
	for mk := range b.in {
		if mk.id == id && mk.seq == seq {
			delete(b.in, mk)
		}
	}
}

// failure returns what collective seq of team id failed with, if it did.
func (b *teamBox) failure(id, seq uint64) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	why, ok := b.failed[teamSeq{id, seq}]
	return why, ok
}

// hasFailed reports whether collective seq of team id failed.
func (b *teamBox) hasFailed(id, seq uint64) bool {
	_, ok := b.failure(id, seq)
	return ok
}

// stale returns a message of team id kept for a collective before seq (its
// sender's job rank, what it says of its call, and its collective), if
// there is one.
func (b *teamBox) stale(id, seq uint64) (src int, m *teamMsg, n uint64, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, m := range b.in {
		if k.id == id && k.seq < seq {
			return k.src, m, k.seq, true
		}
	}
	return 0, nil, 0, false
}

// ready reports whether message k has come whole.
func (b *teamBox) ready(k teamKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.in[k]
	return m != nil && m.done.Load()
}

// takeOrFailure removes message k, which ready reported, or returns what
// its collective failed with (a failure notice drops the collective's
// messages, so that one may have come since ready).
func (b *teamBox) takeOrFailure(k teamKey) (m *teamMsg, why string, failed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if why, ok := b.failed[teamSeq{k.id, k.seq}]; ok {
		return nil, why, true
	}
	m = b.in[k]
	delete(b.in, k)
	return m, "", false
}
