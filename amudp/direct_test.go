package amudp

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

// sharedJob is newJob over Shared transports: every rank's messages to the
// others take the direct path.
func sharedJob(t *testing.T, n, inbox int) []*Endpoint {
	t.Helper()
	saved := listen
	listen = listenShared(t, inbox)
	t.Cleanup(func() { listen = saved })
	return newJob(t, n, Config{})
}

// TestDirectPath: between ranks that share memory, requests and replies of
// every kind, in both directions, take the direct path: no datagram goes
// (the datagram protocol's counters stay at zero), each handler runs once
// with its arguments and payload, and a round trip allocates nothing.
func TestDirectPath(t *testing.T) {
	eps := sharedJob(t, 2, DefaultInbox)
	var reqs, reps [2]atomic.Int32
	for r, e := range eps {
		e.SetSegment(make([]byte, 4096))
		e.Register(10, func(tok *Token, args []uint32, p []byte) {
			reqs[r].Add(1)
			if len(args) != 2 || args[0] != uint32(1-r) || int(args[1]) != len(p) {
				t.Errorf("rank %d: request args %v, %d bytes", r, args, len(p))
			}
			var err error
			switch len(p) {
			case 0:
				err = tok.ReplyShort(11, 7)
			case 100:
				err = tok.ReplyMedium(11, p, 7)
			default:
				err = tok.ReplyLong(11, p, 1024, 7)
			}
			if err != nil {
				t.Error(err)
			}
		})
		e.Register(11, func(tok *Token, args []uint32, p []byte) {
			if len(args) != 1 || args[0] != 7 || len(p) > 0 && p[0] != 0xab {
				t.Errorf("rank %d: reply args %v, payload %x", r, args, p[:min(len(p), 4)])
			}
			reps[r].Add(1)
		})
	}
	serve(t, eps[1])
	payload := make([]byte, 200)
	for i := range payload {
		payload[i] = 0xab
	}
	for r := range 2 {
		e := eps[r]
		if r == 1 {
			serve(t, eps[0])
		}
		for _, send := range []func() error{
			func() error { return e.RequestShort(1-r, 10, uint32(r), 0) },
			func() error { return e.RequestMedium(1-r, 10, payload[:100], uint32(r), 100) },
			func() error { return e.RequestLong(1-r, 10, payload, 64, uint32(r), 200) },
		} {
			want := reps[r].Load() + 1
			if err := send(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, e, "the reply", func() bool { return reps[r].Load() == want })
		}
	}
	if reqs[0].Load() != 3 || reqs[1].Load() != 3 || reps[0].Load() != 3 || reps[1].Load() != 3 {
		t.Errorf("requests %d %d, replies %d %d: want 3 of each", reqs[0].Load(), reqs[1].Load(), reps[0].Load(), reps[1].Load())
	}
	for r, e := range eps {
		if st := e.Stats(); st.Sent != 0 || st.Received != 0 {
			t.Errorf("rank %d used the datagram protocol: %v", r, st)
		}
	}
	if st := shmStats(eps); st.ShmSent != 12 || st.ShmReceived != 12 {
		t.Errorf("want 12 direct messages: %v", st)
	}
	e := eps[0]
	round := func() {
		want := reps[0].Load() + 1
		if err := e.RequestShort(1, 10, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := e.WaitUntil(func() bool { return reps[0].Load() == want }); err != nil {
			t.Fatal(err)
		}
	}
	if n := testing.AllocsPerRun(200, round); n != 0 {
		t.Errorf("%v allocations per direct round trip", n)
	}
}

// sharedPair returns the endpoints of ranks 0 and 1 over Shared
// transports that know each other's addresses but not yet the inboxes
// (Shared.SetInboxes), their transports, and the inboxes' table.
func sharedPair(t *testing.T) (eps [2]*Endpoint, trs [2]*Shared, inboxes []Inbox) {
	t.Helper()
	open := listenShared(t, DefaultInbox)
	addrs := make([]netip.AddrPort, 2)
	for i := range eps {
		tr, err := open(loopback, 0)
		if err != nil {
			t.Fatal(err)
		}
		trs[i] = tr.(*Shared)
		if eps[i], err = NewEndpoint(tr, Config{Rank: i, Secret: []byte("s")}); err != nil {
			t.Fatal(err)
		}
		e := eps[i]
		t.Cleanup(func() { e.Close() })
		addrs[i] = tr.LocalAddr()
		inboxes = append(inboxes, Inbox{tr.LocalAddr(), trs[i].Inbox()})
	}
	for _, e := range eps {
		if err := e.SetPeers(addrs); err != nil {
			t.Fatal(err)
		}
	}
	return eps, trs, inboxes
}

// TestDirectAwaitsReady: a rank whose peer has not yet learnt the inboxes
// (Shared.SetInboxes) sends it datagrams, which it answers; once the peer
// has, messages take the direct path.
func TestDirectAwaitsReady(t *testing.T) {
	eps, trs, inboxes := sharedPair(t)
	var ran atomic.Int32
	eps[1].Register(10, func(*Token, []uint32, []byte) { ran.Add(1) })
	trs[0].SetInboxes(inboxes)
	serve(t, eps[1])
	send := func(want int32) {
		if err := eps[0].RequestShort(1, 10); err != nil {
			t.Fatal(err)
		}
		waitFor(t, eps[0], "the answer", func() bool { return ran.Load() == want && eps[0].Outstanding() == 0 })
	}
	send(1)
	if st := eps[0].Stats(); st.Sent != 1 {
		t.Fatalf("to a peer that is not ready: %d datagrams sent, want 1", st.Sent)
	}
	trs[1].SetInboxes(inboxes)
	send(2)
	send(3)
	if st := eps[0].Stats(); st.Sent != 1 {
		t.Errorf("to a ready peer: %d datagrams sent in all, want still 1", st.Sent)
	}
	if st := trs[1].Stats(); st.ShmReceived != 3 { // the datagram, then two direct
		t.Errorf("rank 1's inbox took %d records, want 3", st.ShmReceived)
	}
}

// directRecord encodes a direct message.
func directRecord(t *testing.T, m wire.Message) []byte {
	t.Helper()
	b, err := m.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDirectHostile: records in an inbox that no rank of the job would
// write, and datagrams that claim to be direct messages, are dropped and
// counted; no handler runs for them, and messages go on.
func TestDirectHostile(t *testing.T) {
	eps := sharedJob(t, 2, DefaultInbox)
	var ran atomic.Int32
	eps[1].Register(10, func(*Token, []uint32, []byte) { ran.Add(1) })
	victim := eps[1].tr.(*Shared)
	ring := victim.inbox.ring
	req := wire.Message{Header: wire.Header{Kind: KindShortRequest, Flags: wire.FlagDirect, Handler: 10, Src: 0}}
	strange := req
	strange.Src = 9 // no such rank
	plain := req
	plain.Flags = 0 // a message record without the flag
	reply := wire.Message{Header: wire.Header{Kind: KindAutoReply, Flags: wire.FlagDirect, Src: 0}}
	ring.PushMessage([]byte{1, 2, 3}, nil)          // too short: malformed
	ring.PushMessage(directRecord(t, strange), nil) // bad source
	ring.PushMessage(directRecord(t, plain), nil)   // malformed
	ring.PushMessage(directRecord(t, reply), nil)   // a reply to nothing
	var prefix [addrLen]byte                        // a datagram record
	putAddr(prefix[:], eps[0].LocalAddr())          // from rank 0's address
	ring.Push(prefix[:], sealed("test secret", 1, directRecord(t, req)))
	raw, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.Send(sealed("test secret", 1, directRecord(t, req)), eps[1].LocalAddr()); err != nil {
		t.Fatal(err)
	}
	serve(t, eps[1])
	time.Sleep(50 * time.Millisecond) // the UDP datagram arrives
	for range 5 {
		if err := eps[0].RequestShort(1, 10); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "every request answered", func() bool { return eps[0].Outstanding() == 0 })
	if ran.Load() != 5 {
		t.Errorf("%d handlers ran, want the 5 of rank 0's requests", ran.Load())
	}
	st := eps[1].Stats()
	if st.BadDatagrams != 4 || st.BadSource != 1 || st.DupReplies != 1 {
		t.Errorf("want 4 malformed (short, unflagged message, flagged datagram in the inbox and by UDP), 1 bad source, 1 reply to nothing: %v", st)
	}
}

// TestDirectCorruptInboxFails: a record that breaks the queue's rules
// holds back the records after it, which may hold direct messages: the
// poll reports ErrInboxCorrupt, naming the rank, and does not panic.
func TestDirectCorruptInboxFails(t *testing.T) {
	eps := sharedJob(t, 2, DefaultInbox)
	mem := eps[1].tr.(*Shared).inbox.reg.Bytes()
	if !eps[1].tr.(*Shared).inbox.ring.PushMessage(make([]byte, 40), nil) {
		t.Fatal("push")
	}
	// The record's length, after its commit word, now runs past the area.
	binary.LittleEndian.PutUint32(mem[shmring.HeaderSize+8:], 0xfffffff0)
	var err error
	for deadline := time.Now().Add(testbound.For(t, 10*time.Second)); err == nil && time.Now().Before(deadline); {
		err = eps[1].Poll()
	}
	if !errors.Is(err, ErrInboxCorrupt) {
		t.Fatalf("Poll after a corrupt record: %v, want ErrInboxCorrupt", err)
	}
	if want := "rank 1: corrupted shared-memory inbox (found by rank 1: the record at 0x0 has kind 3 and length 4294967280)"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestDirectAfterClose: a request on a closed endpoint fails with
// net.ErrClosed on the direct path too, and nothing reaches the peer.
func TestDirectAfterClose(t *testing.T) {
	eps := sharedJob(t, 2, DefaultInbox)
	if err := eps[0].RequestShort(1, 10); err != nil { // maps the lane
		t.Fatal(err)
	}
	eps[0].Close()
	if err := eps[0].RequestShort(1, 10); !errors.Is(err, net.ErrClosed) {
		t.Errorf("request after Close: %v, want net.ErrClosed", err)
	}
	if st := eps[1].tr.(*Shared).inbox.ring; !st.Empty() {
		if _, ok, _ := st.Peek(); ok {
			st.Advance()
		}
		if !st.Empty() {
			t.Error("a request after Close reached the peer's inbox")
		}
	}
}

// TestDirectUndeliverable: direct requests to a rank that never polls
// (stopped, stuck) are returned as undeliverable, naming it, once it has
// answered none of them for the give-up time; their credit is freed, and an
// answer that comes later is counted as a duplicate.
func TestDirectUndeliverable(t *testing.T) {
	rc := retransmit.Config{Initial: 2 * time.Millisecond, Backoff: 2, Max: 8 * time.Millisecond, MinRTO: time.Millisecond}
	saved := listen
	listen = listenShared(t, DefaultInbox)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{Retransmit: rc})
	eps[1].Register(130, func(*Token, []uint32, []byte) {})
	var got []Returned
	eps[0].SetReturnedHandler(func(r Returned) { got = append(got, r) })
	start := time.Now()
	for range 3 {
		if err := eps[0].RequestMedium(1, 130, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].Drain(); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < rc.GiveUpAfter() {
		t.Errorf("gave up after %v, before the configured %v", el, rc.GiveUpAfter())
	}
	want := Returned{Reason: ReasonTimeout, Dest: 1, Addr: eps[1].LocalAddr(), Kind: KindMediumRequest, Handler: 130}
	if len(got) != 3 || !cmp.Equal(got[0], want, addrCmp) || !cmp.Equal(got[2], want, addrCmp) {
		t.Fatalf("returned %v, want 3 of %v", got, want)
	}
	if eps[0].Stats().Sent != 0 {
		t.Error("the requests did not take the direct path")
	}
	serve(t, eps[1]) // rank 1 wakes and answers: too late
	waitFor(t, eps[0], "the late answers", func() bool { return eps[0].Stats().DupReplies == 3 })
	if n := eps[0].Outstanding(); n != 0 {
		t.Errorf("%d outstanding after the late answers", n)
	}
}

// TestDirectNeverGivesUp: with no give-up time (Max 0), direct requests to
// a rank that polls only later are answered, not returned.
func TestDirectNeverGivesUp(t *testing.T) {
	rc := retransmit.Config{Initial: 2 * time.Millisecond, Backoff: 2, MinRTO: time.Millisecond}
	saved := listen
	listen = listenShared(t, DefaultInbox)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{Retransmit: rc})
	var ran atomic.Int32
	eps[1].Register(130, func(*Token, []uint32, []byte) { ran.Add(1) })
	var returned atomic.Int32
	eps[0].SetReturnedHandler(func(Returned) { returned.Add(1) })
	if err := eps[0].RequestShort(1, 130); err != nil {
		t.Fatal(err)
	}
	go func() { time.Sleep(100 * time.Millisecond); serve(t, eps[1]) }()
	waitFor(t, eps[0], "the answer", func() bool { return eps[0].Outstanding() == 0 })
	if ran.Load() != 1 || returned.Load() != 0 {
		t.Errorf("handler ran %d times, %d returned; want 1 and 0", ran.Load(), returned.Load())
	}
}

// TestDirectLateAnswers: after requests to a silent rank were given up, a
// new request's answer runs its reply handler, and the late answers to the
// given-up ones run none (they are duplicates), whatever their order.
func TestDirectLateAnswers(t *testing.T) {
	rc := retransmit.Config{Initial: 2 * time.Millisecond, Backoff: 2, Max: 8 * time.Millisecond, MinRTO: time.Millisecond}
	saved := listen
	listen = listenShared(t, DefaultInbox)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{Retransmit: rc})
	eps[1].Register(130, func(tok *Token, args []uint32, _ []byte) { tok.ReplyShort(131, args...) })
	var answered []uint32
	eps[0].Register(131, func(_ *Token, args []uint32, _ []byte) { answered = append(answered, args[0]) })
	var returned atomic.Int32
	eps[0].SetReturnedHandler(func(Returned) { returned.Add(1) })
	for i := range 3 {
		if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].Drain(); err != nil || returned.Load() != 3 {
		t.Fatalf("Drain: %v, %d returned; want 3 returned", err, returned.Load())
	}
	if err := eps[0].RequestShort(1, 130, 9); err != nil {
		t.Fatal(err)
	}
	serve(t, eps[1])
	waitFor(t, eps[0], "the answers", func() bool { return len(answered) > 0 && eps[0].Stats().DupReplies == 3 })
	if len(answered) != 1 || answered[0] != 9 || eps[0].Outstanding() != 0 {
		t.Errorf("reply handlers ran for %v, %d outstanding; want only the new request's (9), none", answered, eps[0].Outstanding())
	}
}

// TestDirectGiveUpWhileFull: requests to a silent rank whose inbox is full
// are returned after the give-up time, the one waiting for room in the
// inbox too, and every call returns.
func TestDirectGiveUpWhileFull(t *testing.T) {
	rc := retransmit.Config{Initial: 2 * time.Millisecond, Backoff: 2, Max: 8 * time.Millisecond, MinRTO: time.Millisecond}
	saved := listen
	listen = listenShared(t, 64<<10)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{Retransmit: rc})
	var returned atomic.Int32
	eps[0].SetReturnedHandler(func(Returned) { returned.Add(1) })
	done := make(chan error, 1)
	go func() {
		payload := make([]byte, 15000)
		for range 6 { // 4 fit in the inbox
			if err := eps[0].RequestMedium(1, 130, payload); err != nil {
				done <- err
				return
			}
		}
		done <- eps[0].Drain()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testbound.For(t, 10*time.Second)):
		t.Fatalf("a request to a silent rank with a full inbox never returned (%d returned)", returned.Load())
	}
	if returned.Load() != 6 {
		t.Errorf("%d requests returned, want 6", returned.Load())
	}
	if n := eps[0].tr.(*Shared).Stats().ShmSent; n != 4 {
		t.Errorf("shm-sent %d, want the 4 requests that went into the inbox", n)
	}
}

// TestLaneSent: a lane counts the requests it pushed from their numbers,
// past the wrap of the 32-bit number, less those reserved and never sent.
func TestLaneSent(t *testing.T) {
	var l lane
	l.state.Store(uint64(1<<32-2) << 32) // the last request was number 2^32-2
	for i, want := range []uint32{1<<32 - 1, 0, 1} {
		num, out, ok := l.reserve(8)
		if !ok || num != want || out != i+1 {
			t.Fatalf("reserve: %d, %d outstanding, %v; want %d, %d", num, out, ok, want, i+1)
		}
	}
	l.unsent.Add(1)
	if got, want := l.sent(), uint64(1<<32+1-1); got != want {
		t.Errorf("sent %d, want %d (2^32+1 reserved, one never sent)", got, want)
	}
}

// TestDirectBacklogPerPeer: a rank whose replies to one peer wait in the
// backlog (that peer's inbox is full, and it does not poll) still answers
// its other peers at once.
func TestDirectBacklogPerPeer(t *testing.T) {
	eps := sharedJob(t, 3, 64<<10)
	var replied atomic.Int32
	eps[0].Register(130, func(tok *Token, args []uint32, p []byte) {
		tok.ReplyMedium(131, make([]byte, 15000))
		replied.Add(1)
	})
	// Rank 1's inbox fills with records it never reads.
	full := eps[1].tr.(*Shared).inbox.ring
	for full.PushMessage(make([]byte, 15000), nil) {
	}
	// A request from rank 1, pushed as rank 1 would: rank 0's reply
	// finds rank 1's inbox full, and waits in rank 0's backlog.
	var req wire.Message
	eps[1].directMessage(&req, 1, KindShortRequest, 130, nil, 0, nil)
	if !eps[0].tr.(*Shared).inbox.ring.PushMessage(directRecord(t, req), nil) {
		t.Fatal("push")
	}
	var answers atomic.Int32
	eps[2].Register(131, func(*Token, []uint32, []byte) { answers.Add(1) })
	serve(t, eps[0])
	for deadline := time.Now().Add(testbound.For(t, 10*time.Second)); replied.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("rank 0 never ran rank 1's request")
		}
	}
	for range 5 {
		if err := eps[2].RequestShort(0, 130); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[2], "rank 0's answers", func() bool { return answers.Load() == 5 })
}

// addrCmp compares netip addresses by value.
var addrCmp = cmpopts.EquateComparable(netip.AddrPort{}, netip.Addr{})

// TestDirectUnanswerableFails: a request through shared memory from a
// rank whose inbox this rank cannot map (this rank's table of inboxes,
// Shared.SetInboxes, names a wrong path for it) does not run, since its answer could not go back: the next poll pass
// returns an error naming both ranks, once, and the passes after it go
// on.
func TestDirectUnanswerableFails(t *testing.T) {
	eps, trs, inboxes := sharedPair(t)
	var ran atomic.Int32
	eps[0].Register(10, func(*Token, []uint32, []byte) { ran.Add(1) })
	trs[0].SetInboxes([]Inbox{inboxes[0], {inboxes[1].Addr, t.TempDir() + "/no-inbox"}})
	trs[1].SetInboxes(inboxes)
	if err := eps[1].RequestShort(0, 10); err != nil {
		t.Fatal(err)
	}
	if shm, st := trs[1].Stats(), eps[1].Stats(); shm.ShmSent != 1 || st.Sent != 0 {
		t.Fatalf("rank 1 put %d records into rank 0's inbox and sent %d datagrams, want its request direct", shm.ShmSent, st.Sent)
	}
	var err error
	for end := time.Now().Add(testbound.For(t, 5*time.Second)); err == nil && time.Now().Before(end); {
		err = eps[0].Poll()
	}
	want := "amudp: rank 1 sent a request through shared memory, but rank 0 cannot map its inbox to answer"
	if err == nil || err.Error() != want {
		t.Fatalf("rank 0's poll: %v, want %q", err, want)
	}
	if err := eps[0].Poll(); err != nil {
		t.Errorf("the poll after the error: %v, want nil", err)
	}
	if n, st := ran.Load(), eps[0].Stats(); n != 0 || st.BadSource != 1 {
		t.Errorf("handler ran %d times (want 0); %d records from a bad source (want 1)", n, st.BadSource)
	}
}
