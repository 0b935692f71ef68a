package amudp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/retransmit"
)

// wireJob is an endpoint of rank 0 whose peer, rank 1, is a bare UDP socket
// the test reads and writes datagrams on, to check what goes on the wire.
func wireJob(t *testing.T, cfg Config) (*Endpoint, *UDP) {
	t.Helper()
	u, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Secret = []byte("wire secret")
	e, err := NewEndpoint(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.SetPeers([]netip.AddrPort{u.LocalAddr(), raw.LocalAddr()}); err != nil {
		t.Fatal(err)
	}
	mode := wire.AuthPayload
	if cfg.Encrypt {
		mode = wire.Encrypt
	} else if cfg.HeaderOnlyAuth {
		mode = wire.AuthHeader
	}
	wireKeys.Store(raw, wire.NewKey(cfg.Secret, mode))
	t.Cleanup(func() { e.Close(); raw.Close(); wireKeys.Delete(raw) })
	return e, raw
}

// wireKeys holds the key of each wireJob's endpoint, by its peer's
// socket, for recvMsg.
var wireKeys sync.Map

// recvMsg reads the next datagram on u within a second.
func recvMsg(t *testing.T, u *UDP) *wire.Message {
	t.Helper()
	b := make([]byte, MaxDatagram+1)
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		n, _, err := u.Recv(b)
		if err == ErrNoData {
			u.Wait(10 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		key, _ := wireKeys.Load(u)
		body, ok := key.(*wire.Key).Open(b[:n], 1)
		if !ok {
			t.Fatal("a datagram of the endpoint does not open")
		}
		m := &wire.Message{}
		if err := wire.Decode(body, m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	t.Fatal("no datagram within a second")
	return nil
}

// TestAckNowFlag: a lone request, and the one that uses up the peer's
// credit, ask for their reply at once; the others let the receiver batch.
func TestAckNowFlag(t *testing.T) {
	e, raw := wireJob(t, Config{NetworkDepth: 4})
	var flags []uint8
	for i := range 4 {
		if err := e.RequestShort(1, 130, uint32(i)); err != nil {
			t.Fatal(err)
		}
		flags = append(flags, recvMsg(t, raw).Flags)
	}
	want := []uint8{wire.FlagAckNow, 0, 0, wire.FlagAckNow}
	if d := cmp.Diff(want, flags); d != "" {
		t.Errorf("flags of 4 requests with depth 4 (-want +got):\n%s", d)
	}
}

// TestAutoRepliesShareADatagram: requests that do not ask for their reply
// at once are acknowledged together, in one AutoReply listing them all,
// when the receiver's wait ends; a flagged one at the end of its pass.
func TestAutoRepliesShareADatagram(t *testing.T) {
	e, raw := wireJob(t, Config{})
	ran := 0
	e.Register(130, func(*Token, []uint32, []byte) { ran++ })
	send := func(slot, seq uint16, flags uint8) {
		m := wire.Message{Header: wire.Header{Kind: KindShortRequest, Flags: flags, Handler: 130, Src: 1, Slot: slot, Seq: seq}}
		b, err := m.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw.Send(sealed("wire secret", 0, b), e.LocalAddr())
	}
	send(0, 1, 0)
	send(1, 1, 0)
	send(2, 1, 0)
	if err := e.WaitUntil(func() bool { return ran == 3 }); err != nil {
		t.Fatal(err)
	}
	m := recvMsg(t, raw)
	type pair struct{ Slot, Seq uint16 }
	got := []pair{{m.Slot, m.Seq}}
	for i := range len(m.Payload) / wire.AckPairLen {
		s, q := m.AckPair(i)
		got = append(got, pair{s, q})
	}
	if m.Kind != KindAutoReply {
		t.Fatalf("got a %v, want one auto-reply", m.Kind)
	}
	if d := cmp.Diff([]pair{{0, 1}, {1, 1}, {2, 1}}, got); d != "" {
		t.Errorf("acknowledged (-want +got):\n%s", d)
	}

	// A flagged request is answered at the end of the pass that ran it,
	// with no wait ending.
	send(3, 1, wire.FlagAckNow)
	for ran < 4 {
		if err := e.Poll(); err != nil {
			t.Fatal(err)
		}
	}
	if m := recvMsg(t, raw); m.Kind != KindAutoReply || m.Slot != 3 || len(m.Payload) != 0 {
		t.Errorf("flagged request: got %v slot %d with %d more, want its own auto-reply", m.Kind, m.Slot, len(m.Payload)/wire.AckPairLen)
	}
	if st := e.Stats(); st.Sent != 2 {
		t.Errorf("sent %d datagrams for 4 requests, want 2", st.Sent)
	}
}

// TestFloodBatchesReplies: requests that are waiting together in the
// receiver's socket get one reply datagram per ackBatch of them, and every
// handler runs once. The sender fills its whole window before the receiver
// polls, round after round, so the figure does not depend on which side is
// faster (a receiver that keeps up answers each request as it comes, which is
// right, and only a benchmark should look at that). The timeouts are long:
// a round-trip time learnt from quick rounds would otherwise time out a
// round that the race detector slows, and each resent request is answered
// on its own.
func TestFloodBatchesReplies(t *testing.T) {
	const depth, rounds = 128, 40
	slow := retransmit.Config{Initial: 10 * time.Second, Backoff: 2, Max: time.Minute, MinRTO: 10 * time.Second}
	eps := newJob(t, 2, Config{NetworkDepth: depth, Retransmit: slow})
	ran := 0
	eps[1].Register(130, func(*Token, []uint32, []byte) { ran++ })
	filled := make(chan int)
	done := make(chan error, 1)
	go func() {
		for target := range filled {
			if err := eps[1].WaitUntil(func() bool { return ran == target }); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for r := range rounds {
		for i := range depth {
			if err := eps[0].RequestShort(1, 130, uint32(r*depth+i)); err != nil {
				t.Fatal(err)
			}
		}
		filled <- (r + 1) * depth
	}
	close(filled)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := eps[0].Drain(); err != nil {
		t.Fatal(err)
	}
	const n = depth * rounds
	if ran != n {
		t.Fatalf("%d handlers ran for %d requests", ran, n)
	}
	sent := eps[1].Stats().Sent
	t.Logf("%d reply datagrams for %d requests", sent, n)
	if want := uint64(n / ackBatch); sent != want {
		t.Errorf("%d reply datagrams for %d requests, want %d (one per %d)", sent, n, want, ackBatch)
	}
}

// TestPartialPeerTable: while the table is relayed at startup, a rank
// whose address is unknown cannot be sent to, but a request from it runs
// and is answered at the datagram's source address, which becomes the
// rank's; FillPeers completes the table without changing a known (or so
// learned) address, and a datagram from another address is then dropped.
func TestPartialPeerTable(t *testing.T) {
	eps := newJob(t, 2, Config{})
	full := []netip.AddrPort{eps[0].LocalAddr(), eps[1].LocalAddr()}
	if err := eps[0].SetPeers([]netip.AddrPort{full[0], {}}); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	eps[0].Register(130, func(*Token, []uint32, []byte) { ran.Add(1) })
	if err := eps[0].RequestShort(1, 130); !errors.Is(err, ErrNoAddress) {
		t.Errorf("request to a rank of unknown address: %v, want ErrNoAddress", err)
	}
	serve(t, eps[0])
	if err := eps[1].RequestShort(0, 130); err != nil {
		t.Fatal(err)
	}
	if err := eps[1].Drain(); err != nil { // answered: rank 0 replied to where it came from
		t.Fatal(err)
	}
	if s := eps[0].Stats(); ran.Load() != 1 || s.BadSource != 0 {
		t.Errorf("a request from a rank of unknown address ran %d times (want 1), %d datagrams dropped as from a bad source", ran.Load(), s.BadSource)
	}
	other := netip.AddrPortFrom(full[1].Addr(), full[1].Port()+1)
	for _, bad := range [][]netip.AddrPort{{full[1], full[1]}, {full[0], other}} {
		if err := eps[0].FillPeers(bad); err == nil {
			t.Errorf("FillPeers(%v) changed a known or learned address", bad)
		}
	}
	if err := eps[0].FillPeers(full); err != nil {
		t.Fatal(err)
	}
	// A datagram that says it is rank 1's, from another address, is now
	// dropped: a known address is not learned again.
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(full[1].Addr(), 0)), net.UDPAddrFromAddrPort(full[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := wire.Message{Header: wire.Header{Kind: KindShortRequest, Handler: 130, Src: 1, Slot: 1, Seq: 1}}
	b, err := m.Append(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(sealed("test secret", 0, b)); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(time.Second); eps[0].Stats().BadSource == 0 && time.Now().Before(end); {
		time.Sleep(time.Millisecond) // rank 0 is served in the background
	}
	if eps[0].Stats().BadSource == 0 || ran.Load() != 1 {
		t.Errorf("a request from an address the table does not give ran (%d runs) or was not counted", ran.Load())
	}
}

// socketDrops reads the kernel's count of datagrams dropped at u's socket
// for want of buffer space (/proc/net/udp, last column).
func socketDrops(t *testing.T, u *UDP) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		t.Skip("no /proc/net/udp:", err)
	}
	port := fmt.Sprintf(":%04X", u.LocalAddr().Port())
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 12 && strings.HasSuffix(f[1], port) {
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	t.Fatalf("socket %v not in /proc/net/udp", u.LocalAddr())
	return 0
}

// TestByteWindowKeepsFloodInBuffer: 65000-byte requests flooded into a
// receiver whose kernel buffer holds only a few of them are held back by the
// byte window instead of being dropped by the kernel (without the window,
// 44 to 650 of the 3000 were dropped in runs here).
func TestByteWindowKeepsFloodInBuffer(t *testing.T) {
	// A long minimum timeout: no spurious retransmission of a request still
	// queued at a slow receiver (under -race) may overrun its buffer.
	slow := retransmit.Config{Initial: 500 * time.Millisecond, Backoff: 2, Max: 30 * time.Second, MinRTO: 500 * time.Millisecond}
	eps := newJob(t, 2, Config{SendDepth: -1, Retransmit: slow})
	for _, e := range eps {
		e.tr.SetBuffers(100000)
		rcv, _, _ := e.tr.SetBuffers(0)
		e.mu.Lock()
		e.window = windowFor(rcv)
		e.mu.Unlock()
		e.bufMax = 100000 // no growth
	}
	eps[1].Register(130, func(*Token, []uint32, []byte) {})
	serve(t, eps[1])
	rx := eps[1].tr.(*UDP)
	before := socketDrops(t, rx)
	p := make([]byte, MaxMedium)
	for range 3000 {
		if err := eps[0].RequestMedium(1, 130, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := eps[0].Drain(); err != nil {
		t.Fatal(err)
	}
	if d := socketDrops(t, rx) - before; d > 0 {
		t.Errorf("the kernel dropped %d of 3000 datagrams", d)
	}
}

// TestRepliesToUnusedSlots: an authenticated reply naming a slot that no
// request of this endpoint ever used (a peer's bug, or an old job's replay
// with the same secret) is a duplicate, not a crash, whether the endpoint
// has talked to the peer yet or not, and alone or in an auto-reply's list.
func TestRepliesToUnusedSlots(t *testing.T) {
	e, raw := wireJob(t, Config{NetworkDepth: 64})
	replies := 0
	e.Register(131, func(*Token, []uint32, []byte) { replies++ })
	send := func(kind Kind, slot uint16, pairs ...uint16) {
		m := wire.Message{Header: wire.Header{Kind: kind, Src: 1, Slot: slot, Seq: 1}}
		if kind == KindShortReply {
			m.Handler = 131
		}
		for i := 0; i+1 < len(pairs); i += 2 {
			m.Payload = wire.AppendAckPair(m.Payload, pairs[i], pairs[i+1])
		}
		b, err := m.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw.Send(sealed("wire secret", 0, b), e.LocalAddr())
	}
	dups := func(want uint64) {
		t.Helper()
		if err := e.WaitUntil(func() bool { return e.Stats().DupReplies >= want }); err != nil {
			t.Fatal(err)
		}
	}
	send(KindShortReply, 5) // no state for rank 1 yet
	dups(1)
	if err := e.RequestShort(1, 130); err != nil { // slot 0 of rank 1 in use
		t.Fatal(err)
	}
	recvMsg(t, raw)
	send(KindShortReply, 40)       // a slot of a chunk never allocated
	send(KindAutoReply, 63, 50, 1) // the same, twice in one datagram
	dups(4)
	if replies != 0 {
		t.Errorf("%d reply handlers ran for requests never sent", replies)
	}
	send(KindShortReply, 0) // the real reply still completes the request
	if err := e.WaitUntil(func() bool { return replies == 1 }); err != nil {
		t.Fatal(err)
	}
	if err := e.Drain(); err != nil {
		t.Fatal(err)
	}
}
