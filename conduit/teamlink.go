package conduit

// This file is the link of team collectives over active messages
// (coll.Link): messages, failure notices and probes, each a Medium
// request of handler hTeam, and the registry that hands each to its
// team's box.

import (
	"fmt"
	"sync"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
)

// hTeam is the core handler of team collectives: a Medium request whose
// args are the team's id (lo, hi), the collective's number on the team
// (lo, hi), the header (coll.Header.Pack: meta, root, length), and the
// chunk's index, the chunk count and the message's size in bytes; the
// payload is the chunk. A meta of noticeMeta carries a failure
// (coll.Failure.Encode); one whose step is probeStep is a probe, whose
// header is the call its sender waits in.
const hTeam = 70

const (
	noticeMeta = 0xff
	probeStep  = 0xff
)

// probeAfter is how long a member waits for another in a collective
// before it tells that member what it called (coll.Box.Probe): a member
// whose call differs then fails the collective instead of waiting for
// ever. A collective that takes longer costs one message a waiting member.
const probeAfter = 100 * time.Millisecond

// Rank is this member's team rank.
func (c *teamCall) Rank() int { return c.t.me }

// Size is the team's size.
func (c *teamCall) Size() int { return len(c.t.ranks) }

// Send sends data to team rank to, in chunks of at most MaxMedium bytes.
func (c *teamCall) Send(to int, h coll.Header, data []byte) error {
	if f, failed := c.t.box.Failed(c.seq); failed {
		return f.Err()
	}
	meta, root, length := h.Pack()
	return c.request(to, meta, root, length, data)
}

// request sends one message of the call, in chunks.
func (c *teamCall) request(to int, meta, root, length uint32, blob []byte) error {
	t := c.t
	return sendChunks(blob, func(i, chunks int, part []byte) error {
		return t.j.ep.RequestMedium(t.ranks[to], hTeam, part, uint32(t.id), uint32(t.id>>32), uint32(c.seq), uint32(c.seq>>32),
			meta, root, length, uint32(i), uint32(chunks), uint32(len(blob)))
	})
}

// Recv waits for team rank from's message, or another call's (see
// coll.Box.Poll); after probeAfter it probes from, once.
func (c *teamCall) Recv(from int, want coll.Call) (int, coll.Header, []byte, error) {
	t, j := c.t, c.t.j
	var (
		src    int
		h      coll.Header
		data   []byte
		f      coll.Failure
		failed bool
		done   bool
	)
	poll := func() bool { // once done, it stays so: collWait looks again
		if !done {
			src, h, data, f, failed, done = t.box.Poll(c.seq, from, want)
		}
		return done
	}
	if !poll() {
		t.armProbe(c, from, want)
		err := j.collWait(poll)
		t.disarmProbe()
		if err != nil {
			return 0, coll.Header{}, nil, err
		}
	}
	if failed {
		return 0, coll.Header{}, nil, f.Err()
	}
	return src, h, data, nil
}

// probeWait is a wait that the team's probe timer probes: the number of
// the collective (the team reuses its call for the next one), the team
// rank waited for and the call waited in; armed until the wait ends or
// the probe goes.
type probeWait struct {
	seq   uint64
	from  int
	want  coll.Call
	armed bool
}

// armProbe has the team's probe timer probe from after probeAfter, for
// c's wait in want: one timer for the team, set again at each wait, so
// that a wait allocates nothing. In the call's turn on the team.
func (t *Team) armProbe(c *teamCall, from int, want coll.Call) {
	t.probeMu.Lock()
	t.probing = probeWait{seq: c.seq, from: from, want: want, armed: true}
	t.probeMu.Unlock()
	if t.probe == nil {
		t.probe = time.AfterFunc(probeAfter, t.sendProbe)
		return
	}
	t.probe.Reset(probeAfter)
}

// disarmProbe ends the wait that armProbe armed: its probe, if not gone
// yet, does not go.
func (t *Team) disarmProbe() {
	t.probe.Stop()
	t.probeMu.Lock()
	t.probing.armed = false
	t.probeMu.Unlock()
}

// sendProbe, the probe timer's function, tells the member waited for
// what this rank waits in, where the wait is still armed.
func (t *Team) sendProbe() {
	t.probeMu.Lock()
	p := t.probing
	t.probing.armed = false
	t.probeMu.Unlock()
	if !p.armed {
		return
	}
	meta, root, length := coll.Header{Call: p.want}.Pack()
	// A member that cannot be told ends with the job.
	_ = (&teamCall{t: t, seq: p.seq}).request(p.from, meta|probeStep<<24, root, length, nil)
}

// Fail marks the collective failed here and tells every other member.
func (c *teamCall) Fail(f coll.Failure) error {
	t := c.t
	t.box.Fail(c.seq, f)
	note := f.Encode()
	for r := range t.ranks {
		if r != t.me {
			// A member that cannot be told ends with the job.
			_ = c.request(r, noticeMeta, 0, 0, note)
		}
	}
	return f.Err()
}

// teamBox is the registry of this rank's teams, which hands each message
// of hTeam, once whole, to its team's box, and keeps those of a team this
// rank has not made yet (a faster member went on from a Split).
type teamBox struct {
	mu      sync.Mutex
	teams   map[uint64]*Team
	parts   map[partKey]*teamMsg  // messages being received in chunks
	pending map[uint64][]wholeMsg // by team id, until it is made
	wake    func()                // Endpoint.Wake
}

// partKey names a message being received: the sender's job rank src, in
// collective seq of team id, of class (a message, notice or probe).
type partKey struct {
	id, seq uint64
	src     int
	class   uint8
}

// The classes of hTeam's messages.
const (
	classMessage = iota
	classNotice
	classProbe
)

// classOf returns the class of a message of meta.
func classOf(meta uint32) uint8 {
	switch {
	case meta == noticeMeta:
		return classNotice
	case meta>>24 == probeStep:
		return classProbe
	}
	return classMessage
}

// teamMsg is a message being received in chunks, with its header.
type teamMsg struct {
	assembly
	meta, root, length uint32
}

// wholeMsg is a message received whole: its key, header and data, or why
// it is malformed.
type wholeMsg struct {
	k                  partKey
	meta, root, length uint32
	data               []byte
	bad                error
}

// register makes t's messages go to its box, those kept for it first.
func (b *teamBox) register(t *Team) {
	b.mu.Lock()
	if b.teams == nil {
		b.teams = map[uint64]*Team{}
	}
	b.teams[t.id] = t
	b.wake = t.j.ep.Wake
	kept := b.pending[t.id]
	delete(b.pending, t.id)
	b.mu.Unlock()
	for _, m := range kept {
		t.abortFor(m.deliver(t))
	}
}

// deliver hands m to its team's box, and returns why the job must abort
// ("" if it need not; see coll.Box.Put).
func (m *wholeMsg) deliver(t *Team) string {
	src, ok := t.TeamRank(m.k.src)
	if !ok {
		return "" // not a member: not for this team
	}
	h := coll.Unpack(m.meta, m.root, m.length)
	switch {
	case m.k.class == classNotice:
		return t.box.Notice(m.k.seq, src, coll.DecodeFailure(m.data))
	case m.bad != nil:
		// A malformed message: of no call, which the receiver's engine
		// reports as a mismatch to every member.
		return t.box.Put(m.k.seq, src, coll.Header{}, nil)
	case m.k.class == classProbe:
		return t.box.Probe(m.k.seq, src, h.Call)
	}
	return t.box.Put(m.k.seq, src, h, m.data)
}

// message is hTeam's handler. A message in one chunk (every message of a
// collective's usual sizes) goes to its team's box without a stop in
// parts.
func (b *teamBox) message(tok *amudp.Token, a []uint32, p []byte) {
	if len(a) != 10 || !tok.IsRequest() {
		return
	}
	m := wholeMsg{k: partKey{id: uint64(a[0]) | uint64(a[1])<<32, seq: uint64(a[2]) | uint64(a[3])<<32, src: tok.Source(), class: classOf(a[4])},
		meta: a[4], root: a[5], length: a[6]}
	b.mu.Lock()
	if a[7] == 0 && a[8] == 1 && int(a[9]) == len(p) && b.parts[m.k] == nil {
		if len(p) > 0 {
			m.data = append([]byte(nil), p...)
		}
	} else if !b.assemble(&m, a, p) {
		b.mu.Unlock()
		return
	}
	t := b.teams[m.k.id]
	if t == nil {
		if b.pending == nil {
			b.pending = map[uint64][]wholeMsg{}
		}
		b.pending[m.k.id] = append(b.pending[m.k.id], m)
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	t.abortFor(m.deliver(t))
	if b.wake != nil {
		b.wake()
	}
}

// assemble adds chunk p (args a) to its message in parts, and reports
// whether the message is whole, which m then holds. b.mu held.
func (b *teamBox) assemble(m *wholeMsg, a []uint32, p []byte) bool {
	if b.parts == nil {
		b.parts = map[partKey]*teamMsg{}
	}
	pm := b.parts[m.k]
	if pm == nil {
		pm = &teamMsg{meta: a[4], root: a[5], length: a[6]}
		b.parts[m.k] = pm
	}
	if pm.meta != a[4] || pm.root != a[5] || pm.length != a[6] {
		pm.bad, pm.buf = fmt.Errorf("chunks of different collectives"), nil
		pm.done.Store(true)
	} else {
		pm.add(int(a[7]), int(a[8]), int(a[9]), p, "a team collective's message")
	}
	if !pm.done.Load() {
		return false
	}
	delete(b.parts, m.k)
	m.meta, m.root, m.length = pm.meta, pm.root, pm.length
	m.data, m.bad = pm.take()
	return true
}
