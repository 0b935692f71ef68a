package amudp

import (
	"errors"
	"net/netip"
	"time"
)

// ErrNoData is returned by Transport.Recv when no datagram is pending.
var ErrNoData = errors.New("amudp: no datagram pending")

// Transport is the datagram socket an Endpoint runs on, narrow so that tests
// can plug in an in-memory network (modelled on wireguard-go conn.Bind).
//
// Send may be called from many goroutines at once. Recv and Wait are called
// by one goroutine at a time (the endpoint's poller). Wake may be called from
// any goroutine at any time. After Close, every method returns net.ErrClosed
// (Wake does nothing).
type Transport interface {
	// Send transmits b as one datagram to to. It must not retain b. It does
	// not block for long: when the socket cannot take the datagram soon it
	// drops it and returns nil (retransmission recovers), as a network would.
	Send(b []byte, to netip.AddrPort) error
	// Recv reads one pending datagram into b without blocking and returns its
	// size and source, or ErrNoData. A datagram longer than b is truncated;
	// callers pass a buffer of MaxDatagram+1 bytes to tell.
	Recv(b []byte) (int, netip.AddrPort, error)
	// Wait blocks until a datagram may be pending, Wake is called, or timeout
	// passes. A Wake before Wait makes the next Wait return at once.
	Wait(timeout time.Duration) error
	// Wake makes a current or the next Wait return.
	Wake()
	// LocalAddr is the address peers send to.
	LocalAddr() netip.AddrPort
	// SetBuffers asks for kernel buffers of n bytes each way and returns the
	// receive and send sizes in force afterwards; n <= 0 only reads them.
	SetBuffers(n int) (rcv, snd int, err error)
	// Close releases the socket.
	Close() error
}

// Viewer is a Transport that can give a datagram in place, without
// copying it into the caller's buffer (Shared, for its inbox's records).
type Viewer interface {
	Transport
	// View returns the next datagram: in place (inPlace true) until
	// Release, which the caller calls before its next View or Recv, or,
	// when there is none to give in place, as Recv(b) would, in b.
	View(b []byte) (d []byte, from netip.AddrPort, inPlace bool, err error)
	// Release frees the datagram that View gave in place.
	Release()
}

// Parker is a Transport whose Wait can park the goroutine in the Go
// runtime's network poller instead of blocking a thread in a system call
// (UDP's SetPark; Shared passes it on to its UDP transport).
type Parker interface {
	SetPark(park bool) error
}
