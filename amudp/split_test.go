package amudp

import (
	"bytes"
	"sync"
	"testing"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// TestSplitLongForgeries: a Long request or reply large enough to carry a
// header tag (wire.Key.OpenHead) has its payload checked and copied into
// the segment in one pass. One whose payload was altered in flight never
// runs, is counted as not opening, and leaves its slot as it was, so that
// the genuine copy after it runs, once, with the genuine bytes; an
// altered copy of a request or reply already run writes nothing; one
// whose header or header tag was altered writes nothing; one whose
// offset is outside the segment is returned only once its payload is
// checked; one of another protocol version is dropped unread.
func TestSplitLongForgeries(t *testing.T) {
	e, raw := wireJob(t, Config{NetworkDepth: 1})
	seg := make([]byte, 1<<16)
	e.SetSegment(seg)
	serve(t, e)
	key := wire.NewKey([]byte("wire secret"), wire.AuthPayload)
	var mu sync.Mutex
	var ran []string
	record := func(what string) Handler {
		return func(_ *Token, args []uint32, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			if !bytes.Equal(p, genuine(int(args[0]))) {
				what += " (altered bytes)"
			}
			ran = append(ran, what)
		}
	}
	e.Register(130, record("request"))
	e.Register(131, record("reply"))
	ranN := func() int { mu.Lock(); defer mu.Unlock(); return len(ran) }
	const n = 20000
	long := func(kind Kind, seq uint16, off uint64) []byte {
		m := wire.Message{Header: wire.Header{Kind: kind, Handler: 130, NArgs: 1, Src: 1, Seq: seq, Offset: off}, Payload: genuine(n)}
		if kind == KindLongReply {
			m.Handler = 131
		} else {
			m.Flags = wire.FlagAckNow
		}
		m.Args[0] = n
		b, err := m.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send := func(b []byte) {
		if err := raw.Send(b, e.LocalAddr()); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(b []byte, i int) []byte { f := bytes.Clone(b); f[i] ^= 1; return f }
	untouched := func(what string, off int) {
		t.Helper()
		for i, c := range seg[off : off+n] {
			if c != 0 {
				t.Fatalf("%s wrote segment byte %d", what, off+i)
			}
		}
	}
	badMAC := func(want uint64) {
		t.Helper()
		eventually(t, "the forgeries counted", func() bool { return e.Stats().BadMAC == want })
	}

	req := key.Seal(long(KindLongRequest, 1, 0), 0, 10)
	if len(req) != wire.HeaderLen+4+n+2*wire.TagLen {
		t.Fatalf("a Long request of %d bytes sealed into %d, not two tags' worth more", n, len(req))
	}
	payloadAt := wire.HeaderLen + 4
	send(flip(req, payloadAt+100))                                   // its payload altered
	send(flip(req, 24+1))                                            // its length: the header tag fails
	send(flip(req, len(req)-1))                                      // its header tag
	send(flip(req, len(req)-wire.TagLen-1))                          // the tag over the whole
	send(flip(key.Seal(long(KindLongRequest, 1, 20000), 0, 11), 28)) // its offset
	badMAC(5)
	untouched("a request whose offset was altered", 20000)
	old := bytes.Clone(req)
	old[0] = wire.Version - 1 // another version's: dropped unread
	send(old)
	eventually(t, "another version's datagram dropped", func() bool { return e.Stats().BadDatagrams == 1 })
	send(req)
	eventually(t, "the genuine request", func() bool { return ranN() == 1 })
	recvMsg(t, raw)
	clear(seg)
	send(flip(req, payloadAt+100)) // a copy of a request run: a duplicate
	if m := recvMsg(t, raw); m.Kind != KindAutoReply || m.Seq != 1 {
		t.Errorf("a copy of a request run drew a %v for seq %d, want its automatic reply again", m.Kind, m.Seq)
	}
	untouched("an altered copy of a request run", 0)

	// Outside the segment: returned, but only with its genuine payload.
	out := key.Seal(long(KindLongRequest, 2, uint64(len(seg))), 0, 12)
	send(flip(out, payloadAt))
	badMAC(6)
	send(out)
	if m := recvMsg(t, raw); m.Kind != KindReturned || Reason(m.Args[0]) != ReasonBadOffset || m.Seq != 2 {
		t.Errorf("a Long request outside the segment drew a %v (reason %v) for seq %d, want it returned as out of the segment", m.Kind, Reason(m.Args[0]), m.Seq)
	}

	// Replies: an altered one leaves the request in flight.
	if err := e.RequestShort(1, 140); err != nil {
		t.Fatal(err)
	}
	r := recvMsg(t, raw)
	rep := key.Seal(long(KindLongReply, r.Seq, 4096), 0, 30)
	send(flip(rep, payloadAt+7))
	badMAC(7)
	if e.Outstanding() != 1 || ranN() != 1 {
		t.Fatalf("an altered Long reply completed its request (%d outstanding) or ran (%d handlers)", e.Outstanding(), ranN())
	}
	send(rep)
	eventually(t, "the genuine reply", func() bool { return ranN() == 2 })
	clear(seg)
	send(flip(rep, payloadAt+7))
	eventually(t, "the duplicate reply", func() bool { return e.Stats().DupReplies == 1 })
	untouched("an altered copy of a reply run", 4096)
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 2 || ran[0] != "request" || ran[1] != "reply" {
		t.Errorf("handlers ran: %q, want the genuine request and reply once each", ran)
	}
	if s := e.Stats(); s.BadMAC != 7 {
		t.Errorf("%d datagrams did not open, want 7", s.BadMAC)
	}
}

// genuine returns n bytes of the genuine payload.
func genuine(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 3)
	}
	return b
}
