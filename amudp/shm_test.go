package amudp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/udpconduit/udpconduit/amudp/internal/shmring"
	"github.com/udpconduit/udpconduit/internal/testbound"
)

// shareInboxes tells every Shared transport among eps's the inboxes of all
// the others (a no-op for other transports).
func shareInboxes(eps []*Endpoint, addrs []netip.AddrPort) {
	var inboxes []Inbox
	for i, e := range eps {
		if s, ok := e.tr.(*Shared); ok {
			inboxes = append(inboxes, Inbox{addrs[i], s.Inbox()})
		}
	}
	for _, e := range eps {
		if s, ok := e.tr.(*Shared); ok {
			s.SetInboxes(inboxes)
			s.SetAllShared(len(inboxes) == len(eps))
		}
	}
}

// listenShared opens a UDP socket wrapped in a Shared transport with an
// inbox of size bytes.
func listenShared(t testing.TB, size int) func(netip.AddrPort, int) (Transport, error) {
	return func(addr netip.AddrPort, bufSize int) (Transport, error) {
		u, err := ListenUDP(addr, bufSize)
		if err != nil {
			return nil, err
		}
		s, err := NewShared(u, size)
		if err != nil {
			u.Close()
			t.Fatal(err)
		}
		return s, nil
	}
}

// shmStats sums the Shared transports' counters of eps.
func shmStats(eps []*Endpoint) (s ShmStats) {
	for _, e := range eps {
		st := e.tr.(*Shared).Stats()
		s.ShmSent += st.ShmSent
		s.ShmReceived += st.ShmReceived
		s.Fallbacks += st.Fallbacks
		s.Doorbells += st.Doorbells
		s.Corrupt += st.Corrupt
	}
	return s
}

// TestShared runs the endpoint's tests over shared memory, and checks that
// their datagrams took it.
func TestShared(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
		shm  bool // whether its ranks exchange datagrams
	}{
		{"EveryKindBothDirections", TestEveryKindBothDirections, true},
		{"SelfSendRunsAtOnce", TestSelfSendRunsAtOnce, false},
		{"AutoReplyFreesCredit", TestAutoReplyFreesCredit, true},
		{"ReturnedToHandlerZero", TestReturnedToHandlerZero, true},
		{"ConcurrentSenders", TestConcurrentSenders, true},
		{"InterruptEndsWaits", TestInterruptEndsWaits, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var made []*Shared
			saved := listen
			listen = func(addr netip.AddrPort, bufSize int) (Transport, error) {
				tr, err := listenShared(t, DefaultInbox)(addr, bufSize)
				if err == nil {
					made = append(made, tr.(*Shared))
				}
				return tr, err
			}
			t.Cleanup(func() { listen = saved })
			tc.run(t)
			var sent, received uint64
			for _, s := range made {
				st := s.Stats()
				sent, received = sent+st.ShmSent, received+st.ShmReceived
				if st.Corrupt != 0 {
					t.Errorf("corrupt records: %v", st)
				}
			}
			if tc.shm && (sent == 0 || received == 0) {
				t.Errorf("no datagram went through shared memory: sent %d, received %d", sent, received)
			}
		})
	}
}

// TestSharedWakesSleeper: a rank blocked in Wait (no spinning) wakes for a
// request that arrives in its inbox: the sender rings its doorbell.
func TestSharedWakesSleeper(t *testing.T) {
	saved := listen
	listen = listenShared(t, DefaultInbox)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{Polite: true})
	var got atomic.Int32
	eps[1].Register(10, func(tok *Token, args []uint32, _ []byte) { got.Add(1) })
	done := make(chan error, 1)
	go func() { done <- eps[1].WaitUntil(func() bool { return got.Load() == 3 }) }()
	serve(t, eps[0])
	for i := range 3 {
		time.Sleep(50 * time.Millisecond) // rank 1 is asleep in the kernel by now
		if err := eps[0].RequestShort(1, 10, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testbound.For(t, 10*time.Second)):
		t.Fatalf("rank 1 did not wake: %d of 3 requests ran", got.Load())
	}
	if st := shmStats(eps); st.Doorbells == 0 || st.ShmReceived == 0 {
		t.Errorf("the requests did not wake rank 1 through shared memory: %v", st)
	}
}

// TestSharedFullWaits: with a 64 KiB inbox, a flood of 15000-byte
// Mediums fills it while its rank does not poll; the sender waits for room
// (its requests take the direct path, which never falls back to UDP), and
// every handler runs once when the rank polls again.
func TestSharedFullWaits(t *testing.T) {
	saved := listen
	listen = listenShared(t, 64<<10)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{})
	const msgs = 200
	seen := make([]atomic.Int32, msgs)
	eps[1].Register(10, func(tok *Token, args []uint32, p []byte) {
		if len(p) != 15000 || p[0] != byte(args[0]) {
			t.Errorf("message %d: %d bytes", args[0], len(p))
		}
		seen[args[0]].Add(1)
	})
	var sent atomic.Int32
	go func() {
		// Rank 1 starts reading once more requests wait than its inbox
		// holds (4 of 15000 bytes), fewer than the credit.
		for sent.Load() < 4 {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		serve(t, eps[1])
	}()
	payload := make([]byte, 15000)
	for i := range msgs {
		payload[0] = byte(i)
		if err := eps[0].RequestMedium(1, 10, payload, uint32(i)); err != nil {
			t.Fatal(err)
		}
		sent.Add(1)
	}
	waitFor(t, eps[0], "every request answered", func() bool { return eps[0].Outstanding() == 0 })
	for i := range seen {
		if n := seen[i].Load(); n != 1 {
			t.Fatalf("message %d ran %d times", i, n)
		}
	}
	// Replies come in runs (autoReply): fewer than the requests, and
	// none by UDP.
	if st := shmStats(eps); st.Fallbacks != 0 || st.ShmSent <= msgs {
		t.Errorf("want every request and reply through shared memory, none by UDP: %v", st)
	}
}

// TestSharedRepliesBacklog: two ranks flood each other with Medium requests
// whose handlers reply with as much, through inboxes of 64 KiB: replies
// find the requester's inbox full while it is itself waiting for room in
// the other's, and wait in the backlog. Nothing deadlocks, and every
// request and every reply runs once.
func TestSharedRepliesBacklog(t *testing.T) {
	saved := listen
	listen = listenShared(t, 64<<10)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{})
	const msgs = 300
	var reqs, reps [2][msgs]atomic.Int32
	big := make([]byte, 12000)
	for r, e := range eps {
		e.Register(10, func(tok *Token, args []uint32, p []byte) {
			reqs[r][args[0]].Add(1)
			if err := tok.ReplyMedium(11, big[:len(p)], args[0]); err != nil {
				t.Error(err)
			}
		})
		e.Register(11, func(tok *Token, args []uint32, p []byte) { reps[r][args[0]].Add(1) })
	}
	errs := make(chan error, 2)
	var finished atomic.Int32
	for r, e := range eps {
		go func() {
			payload := make([]byte, 12000)
			for i := range msgs {
				if err := e.RequestMedium(1-r, 10, payload, uint32(i)); err != nil {
					errs <- err
					return
				}
			}
			finished.Add(1)
			// Each rank serves the other until both are answered.
			errs <- e.WaitUntil(func() bool {
				return finished.Load() == 2 && eps[0].Outstanding() == 0 && eps[1].Outstanding() == 0
			})
		}()
	}
	for range 2 {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(testbound.For(t, 20*time.Second)):
			t.Fatalf("deadlock: requests %d and %d outstanding", eps[0].Outstanding(), eps[1].Outstanding())
		}
	}
	for r := range 2 {
		for i := range msgs {
			if a, b := reqs[r][i].Load(), reps[1-r][i].Load(); a != 1 || b != 1 {
				t.Fatalf("request %d to rank %d ran %d times, its reply %d times; %v %v %v", i, r, a, b, shmStats(eps), eps[0].Stats(), eps[1].Stats())
			}
		}
	}
	if st := shmStats(eps); st.Fallbacks != 0 {
		t.Errorf("messages went by UDP: %v", st)
	}
}

// TestSharedCorruptInbox: a peer that writes garbage into a rank's inbox
// makes it drop records, never crash; the endpoint goes on over the
// retransmissions and every handler runs once.
func TestSharedCorruptInbox(t *testing.T) {
	saved := listen
	listen = listenShared(t, DefaultInbox)
	t.Cleanup(func() { listen = saved })
	eps := newJob(t, 2, Config{})
	var ran atomic.Int32
	eps[1].Register(10, func(tok *Token, args []uint32, _ []byte) { ran.Add(1) })
	victim := eps[1].tr.(*Shared)
	// A record too short to hold a source address, and one whose length
	// runs past the area.
	victim.inbox.ring.Push([]byte{1, 2, 3}, nil)
	bad := make([]byte, 40)
	binary.LittleEndian.PutUint32(bad, 0xffffffff)
	victim.inbox.ring.Push(bad, nil)
	serve(t, eps[1])
	for i := range 50 {
		if err := eps[0].RequestShort(1, 10, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "every request answered", func() bool { return eps[0].Outstanding() == 0 })
	if ran.Load() != 50 {
		t.Errorf("%d handlers ran, want 50", ran.Load())
	}
	if st := victim.Stats(); st.Corrupt == 0 {
		t.Errorf("the short record was not counted as corrupt: %v", st)
	}
}

// TestSharedRecvSkipsDoorbells: a doorbell datagram never reaches the
// endpoint; a datagram in the inbox carries its sender's address.
func TestSharedRecvSkipsDoorbells(t *testing.T) {
	a, err := listenShared(t, DefaultInbox)(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	raw, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Send(doorbell, a.LocalAddr())
	raw.Send([]byte("datagram"), a.LocalAddr())
	from := netip.MustParseAddrPort("10.1.2.3:4567")
	var src [addrLen]byte
	putAddr(src[:], from)
	a.(*Shared).inbox.ring.Push(src[:], []byte("shared"))
	b := make([]byte, 100)
	var got []string
	for deadline := time.Now().Add(testbound.For(t, 5*time.Second)); len(got) < 2 && time.Now().Before(deadline); {
		n, f, err := a.Recv(b)
		if err == ErrNoData {
			a.Wait(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(b[:n], []byte("shared")) && f != from {
			t.Errorf("inbox datagram from %v, want %v", f, from)
		}
		got = append(got, string(b[:n]))
	}
	if len(got) != 2 || got[0] != "shared" || got[1] != "datagram" {
		t.Errorf("Recv gave %q, want the inbox's datagram, then the UDP one, and no doorbell", got)
	}
}

// TestSharedAllocs: a datagram through an inbox, sent and received, costs
// no allocation once the peer's inbox is mapped.
func TestSharedAllocs(t *testing.T) {
	open := listenShared(t, DefaultInbox)
	a, err := open(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := open(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a.(*Shared).SetInboxes([]Inbox{{b.LocalAddr(), b.(*Shared).Inbox()}})
	msg, buf := make([]byte, 64), make([]byte, MaxDatagram+1)
	round := func() {
		a.Send(msg, b.LocalAddr())
		if n, from, err := b.Recv(buf); err != nil || n != len(msg) || from != a.LocalAddr() {
			t.Fatalf("Recv: %d bytes from %v, %v", n, from, err)
		}
	}
	round() // maps b's inbox
	if n := testing.AllocsPerRun(1000, round); n != 0 {
		t.Errorf("%v allocations per datagram", n)
	}
	if st := a.(*Shared).Stats(); st.ShmSent != 1002 { // AllocsPerRun runs it once more
		t.Errorf("%d of 1002 datagrams went through the inbox", st.ShmSent)
	}
}

// TestInboxSize: an inbox holds depth datagrams of the largest size, is a
// power of two, and a datagram of the largest size is a record it takes.
func TestInboxSize(t *testing.T) {
	for _, c := range []struct{ depth, want int }{{1, 256 << 10}, {4, 256 << 10}, {5, 512 << 10}, {32, 2 << 20}, {64, DefaultInbox}, {8192, 512 << 20}} {
		got := InboxSize(c.depth)
		if got != c.want {
			t.Errorf("InboxSize(%d) = %d, want %d", c.depth, got, c.want)
		}
		if held := got / shmring.RecordSize(addrLen+MaxDatagram); held < max(c.depth, 4) || shmring.MaxRecord(got) < addrLen+MaxDatagram {
			t.Errorf("an inbox of %d bytes holds %d datagrams of the largest size (depth %d), takes records up to %d", got, held, c.depth, shmring.MaxRecord(got))
		}
	}
}

// TestSharedReadsSocketAfterWait: Recv leaves out reads of an empty UDP
// socket while the inbox is empty, but not after Wait: a datagram that
// woke the rank is read by the first Recv that follows.
func TestSharedReadsSocketAfterWait(t *testing.T) {
	u, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewShared(u, DefaultInbox)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.SetAllShared(true)
	raw, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	buf := make([]byte, MaxDatagram)
	if _, _, err := s.Recv(buf); !errors.Is(err, ErrNoData) {
		t.Fatalf("Recv of nothing: %v", err)
	}
	if err := raw.Send([]byte("a datagram"), s.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if n, _, err := s.Recv(buf); err != nil || string(buf[:n]) != "a datagram" {
		t.Fatalf("the first Recv after Wait: %q, %v", buf[:n], err)
	}
}

// TestSharedReadsSocketAfterDetour: in a job whose ranks all share
// memory, a datagram that a peer sends by UDP because the inbox is full is
// read as soon as the inbox is empty, not after udpEveryShared empty polls.
func TestSharedReadsSocketAfterDetour(t *testing.T) {
	open := listenShared(t, shmring.MinCapacity)
	var ts [2]*Shared
	var inboxes []Inbox
	for i := range ts {
		tr, err := open(loopback, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		ts[i] = tr.(*Shared)
		inboxes = append(inboxes, Inbox{tr.LocalAddr(), ts[i].Inbox()})
	}
	for _, s := range ts {
		s.SetInboxes(inboxes)
		s.SetAllShared(true)
	}
	a, b := ts[0], ts[1]
	buf := make([]byte, MaxDatagram)
	if _, _, err := a.Recv(buf); !errors.Is(err, ErrNoData) { // the socket read found nothing
		t.Fatalf("Recv of nothing: %v", err)
	}
	sent := 0
	for b.Stats().Fallbacks == 0 {
		if err := b.Send(binary.LittleEndian.AppendUint32(make([]byte, 100), uint32(sent)), a.LocalAddr()); err != nil {
			t.Fatal(err)
		}
		sent++
	}
	got, empty := 0, 0
	for got < sent && empty < udpEveryShared {
		n, _, err := a.Recv(buf)
		if errors.Is(err, ErrNoData) {
			empty++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if i := binary.LittleEndian.Uint32(buf[100:n]); i != uint32(got) {
			t.Fatalf("datagram %d came as number %d", i, got)
		}
		got++
	}
	if got != sent || empty > 0 {
		t.Errorf("%d of %d datagrams after %d empty polls; want all, the detoured one first time the inbox is empty", got, sent, empty)
	}
}

// TestSharedAreaAndNotify: a rank sees the words a co-located peer stores
// into its area (Area of its own address and of the peer's are the same
// memory), and a Notify after the store is never missed: made while the
// peer sleeps in Wait, it wakes it; made between the peer's last empty
// Recv and its Wait, that Wait does not sleep. Without a Notify, Wait
// sleeps until its timeout.
func TestSharedAreaAndNotify(t *testing.T) {
	ss := newShareds(t, 2)
	inboxes := []Inbox{{ss[0].LocalAddr(), ss[0].Inbox()}, {ss[1].LocalAddr(), ss[1].Inbox()}}
	for _, s := range ss {
		s.SetInboxes(inboxes)
	}
	own, seen := ss[1].Area(ss[1].LocalAddr()), ss[0].Area(ss[1].LocalAddr())
	if len(own) != shmring.AreaSize || len(seen) != shmring.AreaSize {
		t.Fatalf("areas of %d and %d bytes, want %d", len(own), len(seen), shmring.AreaSize)
	}
	if stranger := netip.MustParseAddrPort("127.0.0.1:9"); ss[0].Area(stranger) != nil || ss[0].Notify(stranger) != nil {
		t.Errorf("a rank that shares no memory has an area, or Notify fails for it")
	}
	word := func(b []byte) *atomic.Uint64 { return (*atomic.Uint64)(unsafe.Pointer(&b[64])) }
	buf := make([]byte, MaxDatagram)
	emptyRecv := func() {
		if _, _, err := ss[1].Recv(buf); !errors.Is(err, ErrNoData) {
			t.Fatalf("Recv of nothing: %v", err)
		}
	}

	// A Notify between the last empty Recv and Wait.
	emptyRecv()
	word(seen).Store(1)
	if err := ss[0].Notify(ss[1].LocalAddr()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := ss[1].Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second || word(own).Load() != 1 {
		t.Errorf("Wait after a Notify slept %v and sees the word %d, want no sleep and 1", d, word(own).Load())
	}

	// A Notify while the peer sleeps.
	emptyRecv()
	go func() {
		time.Sleep(50 * time.Millisecond)
		word(seen).Store(2)
		ss[0].Notify(ss[1].LocalAddr())
	}()
	start = time.Now()
	if err := ss[1].Wait(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second || word(own).Load() != 2 {
		t.Errorf("Wait woken by a Notify slept %v and sees the word %d, want 50ms and 2", d, word(own).Load())
	}

	// No Notify: the timeout. A doorbell of the Notify above may still
	// be on its way (the Wait it rang for may have returned on the note
	// alone) and wake one Wait early, which the next Recv then reads;
	// more than two early returns is a Wait that does not sleep.
	emptyRecv()
	start = time.Now()
	for early := 0; time.Since(start) < 100*time.Millisecond; early++ {
		if early > 2 {
			t.Errorf("Wait with nothing to wake it returned %d times within %v, before its timeout", early, time.Since(start))
			break
		}
		if err := ss[1].Wait(100*time.Millisecond - time.Since(start)); err != nil {
			t.Fatal(err)
		}
		emptyRecv()
	}
}

// newShareds returns n Shared transports on loopback, with default
// inboxes, closed when the test ends.
func newShareds(t *testing.T, n int) []*Shared {
	t.Helper()
	ss := make([]*Shared, n)
	for i := range ss {
		u, err := ListenUDP(loopback, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ss[i], err = NewShared(u, DefaultInbox); err != nil {
			u.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { ss[i].Close() })
	}
	return ss
}

// TestSetInboxes: SetInboxes skips an entry without a path (that peer
// goes by UDP), and of two entries for one address takes the later.
func TestSetInboxes(t *testing.T) {
	ss := newShareds(t, 3)
	a, b, c := ss[0], ss[1], ss[2]
	a.SetInboxes([]Inbox{
		{a.LocalAddr(), "/nonexistent/own"},
		{b.LocalAddr(), ""},
		{c.LocalAddr(), "/nonexistent/earlier"},
		{c.LocalAddr(), c.Inbox()},
	})
	if a.Area(b.LocalAddr()) != nil {
		t.Error("a peer named without a path has an area")
	}
	if len(a.Area(c.LocalAddr())) != AreaSize {
		t.Error("the later of two entries for a peer was not taken")
	}
}
