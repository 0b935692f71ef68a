//go:build unix && !linux

package amudp

import (
	"net/netip"
	"time"
)

// sendWaitLimit bounds how long Send waits for room in a full socket buffer
// before dropping the datagram.
const sendWaitLimit = 20 * time.Millisecond

// UDP is the Transport over a kernel UDP socket. Outside Linux it is
// ConnUDP, on the standard library's net.UDPConn.
type UDP = ConnUDP

// ListenUDP opens a UDP socket bound to addr (port 0 picks a free port) and
// asks for bufSize-byte kernel buffers when bufSize > 0.
func ListenUDP(addr netip.AddrPort, bufSize int) (*UDP, error) {
	return ListenConnUDP(addr, bufSize)
}
