package ctl

import (
	"net"
	"sync"
)

// Sender writes the console's frames to one worker in order, from a
// goroutine of its own, so that the console's loop never waits on a worker
// that does not read (stopped, or its host slow) and a frame is never cut
// by a write deadline: a frame is written whole or, once the connection is
// closed, not at all.
type Sender struct {
	conn net.Conn
	wake chan struct{} // a frame was queued, or stop was called
	mu   sync.Mutex
	q    [][]byte
	done bool
}

func NewSender(c net.Conn) *Sender {
	s := &Sender{conn: c, wake: make(chan struct{}, 1)}
	go s.run()
	return s
}

// send queues a frame; it never blocks.
func (s *Sender) Send(typ byte, v Body) { s.SendFrame(EncodeFrame(typ, v)) }

// sendFrame queues an encoded frame, which the caller no longer changes.
func (s *Sender) SendFrame(f []byte) {
	s.mu.Lock()
	if !s.done {
		s.q = append(s.q, f)
	}
	s.mu.Unlock()
	s.poke()
}

func (s *Sender) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// stop ends the goroutine once the queue is written; closing the
// connection ends it at once.
func (s *Sender) Stop() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.poke()
}

func (s *Sender) run() {
	for {
		s.mu.Lock()
		q, done := s.q, s.done
		s.q = nil
		s.mu.Unlock()
		if len(q) == 0 {
			if done {
				return
			}
			<-s.wake
			continue
		}
		for _, f := range q {
			if _, err := s.conn.Write(f); err != nil {
				s.Stop()
				s.mu.Lock()
				s.q = nil
				s.mu.Unlock()
				return
			}
		}
	}
}
