//go:build unix

package amudp

import (
	"net/netip"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// hangAfter declares a Wait that has not returned a hang (scaled,
// testbound). Every wait below should end within milliseconds; a hang is
// a lost wake-up.
const hangAfter = 10 * time.Second

// TestWaitWakesFor checks the wait contract of the UDP transports (UDP
// blocking in ppoll and parked in the runtime's poller, ConnUDP): Wait
// returns for a Wake before it and during it, for a datagram that arrives
// during it, for one that was already queued (also after an earlier Wait
// saw it and nothing took it), and for Close.
func TestWaitWakesFor(t *testing.T) {
	for _, tr := range []struct {
		name   string
		listen func(netip.AddrPort, int) (Transport, error)
	}{
		{"UDP", func(a netip.AddrPort, n int) (Transport, error) { return ListenUDP(a, n) }},
		{"UDPParked", func(a netip.AddrPort, n int) (Transport, error) {
			u, err := ListenUDP(a, n)
			if err == nil {
				err = u.SetPark(true)
			}
			return u, err
		}},
		{"ConnUDP", func(a netip.AddrPort, n int) (Transport, error) { return ListenConnUDP(a, n) }},
	} {
		t.Run(tr.name, func(t *testing.T) {
			a, err := tr.listen(loopback, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := tr.listen(loopback, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			buf := make([]byte, MaxDatagram)
			// wait runs b.Wait(forever) after start and fails the test if
			// it does not return.
			wait := func(what string, start func()) {
				t.Helper()
				done := make(chan error, 1)
				go func() { done <- b.Wait(1 << 40) }()
				if start != nil {
					time.Sleep(20 * time.Millisecond) // let Wait block first
					start()
				}
				select {
				case err := <-done:
					if err != nil {
						t.Fatalf("%s: Wait: %v", what, err)
					}
				case <-time.After(testbound.For(t, hangAfter)):
					t.Fatalf("%s: Wait did not return within %v", what, testbound.For(t, hangAfter))
				}
			}
			send := func() {
				if err := a.Send([]byte("ping"), b.LocalAddr()); err != nil {
					t.Error(err)
				}
			}

			b.Wake()
			wait("a Wake before Wait", nil)
			wait("a Wake during Wait", b.Wake)
			wait("a datagram during Wait", send)
			wait("the same datagram, still queued", nil)
			if n, _, err := b.Recv(buf); err != nil || string(buf[:n]) != "ping" {
				t.Fatalf("Recv = %q, %v", buf[:n], err)
			}
			send()
			time.Sleep(20 * time.Millisecond) // queued before the Wait
			wait("a datagram queued before Wait", nil)
			if _, _, err := b.Recv(buf); err != nil {
				t.Fatal(err)
			}
			// A parked Wait with nothing to wake it sleeps for its
			// timeout: a Wake it served does not end the next one.
			// (ppoll may return early, which the contract allows.)
			start := time.Now()
			if err := b.Wait(30 * time.Millisecond); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); tr.name == "UDPParked" && d < 25*time.Millisecond {
				t.Errorf("Wait(30ms) with nothing queued returned after %v", d)
			}
			done := make(chan error, 1)
			go func() { done <- b.Wait(1 << 40) }()
			time.Sleep(20 * time.Millisecond)
			b.Close()
			select {
			case <-done:
			case <-time.After(testbound.For(t, hangAfter)):
				t.Fatalf("Close: Wait did not return within %v", testbound.For(t, hangAfter))
			}
		})
	}
}

// TestParkedUDP runs the endpoint's tests on UDP transports that park
// their waits in the runtime's poller, as those of a crowded host do.
func TestParkedUDP(t *testing.T) {
	saved := listen
	listen = func(addr netip.AddrPort, bufSize int) (Transport, error) {
		u, err := ListenUDP(addr, bufSize)
		if err == nil {
			err = u.SetPark(true)
		}
		return u, err
	}
	t.Cleanup(func() { listen = saved })
	runSuite(t, transportSuite)
}
