//go:build !race

package amudp

import (
	"bytes"
	"errors"
	"sync"
	"testing"
)

// TestLongInPlace: with SetPeerSegments, a Long request and a Long reply
// to a peer whose segment this process maps are written straight into that
// segment, their datagrams carry no payload, the handlers see the bytes at
// the same place as over the network, and the receiver counts them
// (Stats.InPlace).
//
// The endpoints share memory (Shared), as the ranks that map each other's
// segments do. The race detector would report the handlers' reads: it
// sees neither the order a UDP socket gives nor that of atomics on two
// mappings of one page (each endpoint maps its peer's inbox again), so
// this file builds without -race.
func TestLongInPlace(t *testing.T) {
	eps := mappedJob(t, true)
	payload := bytes.Repeat([]byte("in place "), 500)
	var mu sync.Mutex
	var req, rep []byte
	eps[1].Register(130, func(tk *Token, _ []uint32, p []byte) {
		mu.Lock()
		req = append([]byte(nil), p...)
		mu.Unlock()
		if &p[0] != &eps[1].Segment()[100] {
			t.Error("the request handler's payload is not the segment's bytes")
		}
		if err := tk.ReplyLong(131, p[:10], 4000); err != nil {
			t.Error(err)
		}
	})
	eps[0].Register(131, func(_ *Token, _ []uint32, p []byte) {
		mu.Lock()
		rep = append([]byte(nil), p...)
		mu.Unlock()
	})
	serve(t, eps[1])
	if err := eps[0].RequestLong(1, 130, payload, 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, eps[0], "reply", func() bool { mu.Lock(); defer mu.Unlock(); return rep != nil })
	if !bytes.Equal(req, payload) || !bytes.Equal(rep, payload[:10]) || !bytes.Equal(eps[0].Segment()[4000:4010], payload[:10]) {
		t.Errorf("request handler saw %q..., reply handler %q", req[:min(len(req), 20)], rep)
	}
	for i, e := range eps {
		if n := e.Stats().InPlace; n != 1 {
			t.Errorf("rank %d received %d Long messages in place, want 1", i, n)
		}
	}
	// A peer that this process does not map, or a payload that does not
	// fit the mapping, goes by datagram.
	eps[0].SetPeerSegments(func(int) []byte { return nil })
	if err := eps[0].RequestLong(1, 130, payload[:20], 100); err != nil {
		t.Fatal(err)
	}
	waitFor(t, eps[0], "second request", func() bool { mu.Lock(); defer mu.Unlock(); return len(req) == 20 })
	if n := eps[1].Stats().InPlace; n != 1 {
		t.Errorf("rank 1 received %d Long messages in place, one of them sent with no mapping; want 1", n)
	}
}

// TestPreparedLongInPlace: a prepared Long request to a peer whose
// segment this process maps, through shared memory or over the network,
// gives the destination itself as its buffer, its message carries no
// payload, and a stale copy committed after it is ErrNotPrepared.
func TestPreparedLongInPlace(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(map[bool]string{true: "shared", false: "udp"}[shared], func(t *testing.T) {
			eps := mappedJob(t, shared)
			var mu sync.Mutex
			var seen []byte
			runs := 0
			eps[1].Register(130, func(_ *Token, _ []uint32, p []byte) {
				mu.Lock()
				seen = append([]byte(nil), p...)
				runs++
				mu.Unlock()
			})
			serve(t, eps[1])
			pr, err := eps[0].PrepareRequest(1, Long, 3000, 0, 200)
			if err != nil {
				t.Fatal(err)
			}
			if &pr.Payload()[0] != &eps[1].Segment()[200] {
				t.Fatal("a prepared Long to a mapped peer is not staged at its destination")
			}
			copy(pr.Payload(), bytes.Repeat([]byte("staged "), 500))
			stale := pr
			if err := pr.Commit(130, 2000); err != nil {
				t.Fatal(err)
			}
			if err := stale.Commit(130, 2000); !errors.Is(err, ErrNotPrepared) {
				t.Errorf("commit of a stale copy: %v, want ErrNotPrepared", err)
			}
			waitFor(t, eps[0], "the handler", func() bool { mu.Lock(); defer mu.Unlock(); return seen != nil })
			waitFor(t, eps[0], "the credit", func() bool { return eps[0].Outstanding() == 0 })
			mu.Lock()
			defer mu.Unlock()
			if want := bytes.Repeat([]byte("staged "), 500)[:2000]; !bytes.Equal(seen, want) {
				t.Errorf("handler saw %q...", seen[:min(len(seen), 20)])
			}
			if runs != 1 {
				t.Errorf("the handler ran %d times, want 1", runs)
			}
			if n := eps[1].Stats().InPlace; n != 1 {
				t.Errorf("rank 1 received %d Long messages in place, want 1", n)
			}
		})
	}
}

// TestPreparedReplyInPlace is TestPreparedReply to requesters whose
// segments the replier maps, through shared memory and over the network:
// a Long reply's buffer is its destination.
func TestPreparedReplyInPlace(t *testing.T) {
	t.Run("shared", func(t *testing.T) { preparedReplies(t, Config{}, true, true) })
	t.Run("udp", func(t *testing.T) { preparedReplies(t, Config{}, false, true) })
}

// mappedJob is a job of two endpoints, over Shared transports or UDP,
// each with an 8 KiB segment and the other's mapped (SetPeerSegments).
func mappedJob(t *testing.T, shared bool) []*Endpoint {
	t.Helper()
	var eps []*Endpoint
	if shared {
		eps = sharedJob(t, 2, 1<<20)
	} else {
		eps = newJob(t, 2, Config{})
	}
	for _, e := range eps {
		e.SetSegment(make([]byte, 8192))
		e.SetPeerSegments(func(r int) []byte { return eps[r].Segment() })
	}
	return eps
}
