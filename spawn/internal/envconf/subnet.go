package envconf

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// AddrOnSubnet returns this host's address in the subnet s (CIDR, or an
// address prefix such as "10.77.").
func AddrOnSubnet(s string) (netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("GASNET_WORKERIP=%s: listing interfaces: %w", s, err)
	}
	pfx, perr := netip.ParsePrefix(s)
	if perr != nil {
		if a, err := netip.ParseAddr(s); err == nil {
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		if (pfx.IsValid() && pfx.Contains(ip)) || (!pfx.IsValid() && strings.HasPrefix(ip.String(), s)) {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("GASNET_WORKERIP=%s: no interface of this host is on that subnet; accepted: a CIDR such as 10.77.0.0/24 or an address prefix", s)
}
