package ifmatch

import (
	"net"
	"net/netip"
)

// Routable reports whether this host's kernel routes datagrams from its
// address local to remote: a UDP socket bound to local connects to remote
// (a route lookup; nothing is sent). An address this host does not have,
// another family, or no route is false.
func Routable(local, remote netip.Addr) bool {
	local, remote = local.Unmap(), remote.Unmap()
	if !local.IsValid() || !remote.IsValid() || local.Is4() != remote.Is4() {
		return false
	}
	c, err := net.DialUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(local, 0)),
		net.UDPAddrFromAddrPort(netip.AddrPortFrom(remote, 9)))
	if err != nil {
		return false
	}
	c.Close()
	return true
}
