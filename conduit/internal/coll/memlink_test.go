package coll

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// memNet is an in-memory network of n members of one team, each with
// its Box, as conduit's links have: a member that waits a while probes
// the member it waits for, and an abort ends every member's waits, as it
// ends the job.
type memNet struct {
	mu     sync.Mutex
	cond   *sync.Cond
	n      int
	boxes  []Box
	aborts []string // by member: why it aborted the job
	ended  bool     // some member aborted: every wait ends
	dead   bool     // the test's bound passed: every wait ends
}

func newMemNet(n int) *memNet {
	m := &memNet{n: n, boxes: make([]Box, n), aborts: make([]string, n)}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// bound ends every wait after d (a collective that hangs fails its
// test), and wakes the waits every millisecond meanwhile, to probe.
func (m *memNet) bound(d time.Duration) (stop func()) {
	tick := time.NewTicker(time.Millisecond)
	done := make(chan struct{})
	go func() {
		end := time.After(d)
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			case <-end:
				m.mu.Lock()
				m.dead = true
				m.mu.Unlock()
			}
			m.mu.Lock()
			m.cond.Broadcast()
			m.mu.Unlock()
		}
	}()
	return func() { tick.Stop(); close(done) }
}

var (
	errHang  = errors.New("hang: the test's bound passed")
	errEnded = errors.New("ended: a member aborted the job")
)

// probeAfter is how long a member waits before it probes.
const probeAfter = 3 * time.Millisecond

// memLink is member me's link in collective seq.
type memLink struct {
	net *memNet
	me  int
	seq uint64
}

func (l *memLink) Rank() int { return l.me }
func (l *memLink) Size() int { return l.net.n }

// record notes that member r aborts the job for why ("": it does not),
// which ends every member's waits. m.mu held.
func (m *memNet) record(r int, why string) {
	if why != "" && m.aborts[r] == "" {
		m.aborts[r], m.ended = why, true
	}
}

// changed wakes the waits after an operation. m.mu held.
func (m *memNet) changed() { m.cond.Broadcast() }

func (l *memLink) Send(to int, h Header, data []byte) error {
	m := l.net
	m.mu.Lock()
	defer m.mu.Unlock()
	if f, failed := m.boxes[l.me].Failed(l.seq); failed {
		return f.Err()
	}
	m.record(to, m.boxes[to].Put(l.seq, l.me, h, bytes.Clone(data)))
	m.changed()
	return nil
}

func (l *memLink) Recv(from int, want Call) (int, Header, []byte, error) {
	m := l.net
	m.mu.Lock()
	defer m.mu.Unlock()
	start, probed := time.Now(), false
	for {
		src, h, data, f, failed, done := m.boxes[l.me].Poll(l.seq, from, want)
		switch {
		case failed:
			return 0, Header{}, nil, f.Err()
		case done:
			return src, h, data, nil
		case m.ended:
			return 0, Header{}, nil, errEnded
		case m.dead:
			return 0, Header{}, nil, errHang
		case !probed && time.Since(start) > probeAfter:
			probed = true
			m.record(from, m.boxes[from].Probe(l.seq, l.me, want))
			m.changed()
			continue
		}
		m.cond.Wait()
	}
}

func (l *memLink) Fail(f Failure) error {
	m := l.net
	m.mu.Lock()
	defer m.mu.Unlock()
	f.Why = fmt.Sprintf("collective %d: %s", l.seq, f.Why)
	m.boxes[l.me].Fail(l.seq, f)
	for r := range m.boxes {
		if r != l.me {
			m.record(r, m.boxes[r].Notice(l.seq, l.me, f))
		}
	}
	m.changed()
	return f.Err()
}

// enter and leave begin and end member me's collective seq, a call of c
// that returned err.
func (m *memNet) enter(me int, seq uint64, c Call) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.boxes[me].Enter(seq, c)
}

func (m *memNet) leave(me int, seq uint64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.record(me, m.boxes[me].Leave(seq, err == nil))
	m.changed()
}

// aborted returns the members that aborted the job, in order.
func (m *memNet) aborted() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []int
	for r, why := range m.aborts {
		if why != "" {
			out = append(out, r)
		}
	}
	return slices.Clip(out)
}
