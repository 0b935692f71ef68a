//go:build unix

package amudp

import (
	"net/netip"
	"testing"
	"time"
)

// TestConnUDP runs the endpoint's tests on the portable transport that
// systems other than Linux use, so that Linux CI exercises it too.
func TestConnUDP(t *testing.T) {
	saved := listen
	listen = func(addr netip.AddrPort, bufSize int) (Transport, error) { return ListenConnUDP(addr, bufSize) }
	t.Cleanup(func() { listen = saved })
	runSuite(t, transportSuite)
}

// transportSuite is the endpoint tests that TestConnUDP and TestParkedUDP
// run again on another transport.
var transportSuite = []struct {
	name string
	run  func(*testing.T)
}{
	{"EveryKindBothDirections", TestEveryKindBothDirections},
	{"SelfSendRunsAtOnce", TestSelfSendRunsAtOnce},
	{"AutoReplyFreesCredit", TestAutoReplyFreesCredit},
	{"ReturnedToHandlerZero", TestReturnedToHandlerZero},
	{"UndeliverableAfterTimeout", TestUndeliverableAfterTimeout},
	{"ConcurrentSenders", TestConcurrentSenders},
	{"InterruptEndsWaits", TestInterruptEndsWaits},
}

func runSuite(t *testing.T, suite []struct {
	name string
	run  func(*testing.T)
}) {
	for _, tc := range suite {
		t.Run(tc.name, tc.run)
	}
}

// TestConnUDPWaitAndWake checks the transport's own contract: Recv never
// blocks, Wait returns for a datagram and for a Wake, and a datagram longer
// than MaxDatagram is seen as longer.
func TestConnUDPWaitAndWake(t *testing.T) {
	a, err := ListenConnUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := ListenConnUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	buf := make([]byte, MaxDatagram+1)
	if _, _, err := b.Recv(buf); err != ErrNoData {
		t.Fatalf("Recv on an empty socket: %v, want ErrNoData", err)
	}
	b.Wake()
	if err := b.Wait(1 << 40); err != nil { // returns at once: woken before
		t.Fatal(err)
	}
	if err := a.Send([]byte("ping"), b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(1 << 40); err != nil {
		t.Fatal(err)
	}
	n, from, err := b.Recv(buf)
	if err != nil || string(buf[:n]) != "ping" || from != a.LocalAddr() {
		t.Fatalf("Recv = %q from %v, %v; want ping from %v", buf[:n], from, err, a.LocalAddr())
	}
	if err := a.Send(make([]byte, MaxDatagram+10), b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	if n, err := recvWithin(b, buf, 5*time.Second); err != nil || n != MaxDatagram+1 {
		t.Fatalf("oversized datagram: Recv = %d, %v; want %d (truncated, seen as too long)", n, err, MaxDatagram+1)
	}
	if rcv, snd, err := b.SetBuffers(256 << 10); err != nil || rcv < 256<<10 || snd < 256<<10 {
		t.Errorf("SetBuffers = %d, %d, %v", rcv, snd, err)
	}
	b.Close()
	if err := b.Wait(1 << 40); err == nil {
		t.Error("Wait after Close returned nil")
	}
}

// recvWithin waits up to d for a datagram on u; Wait may return early.
func recvWithin(u Transport, buf []byte, d time.Duration) (int, error) {
	end := time.Now().Add(d)
	for {
		n, _, err := u.Recv(buf)
		if err != ErrNoData || time.Now().After(end) {
			return n, err
		}
		if err := u.Wait(time.Until(end)); err != nil {
			return 0, err
		}
	}
}
