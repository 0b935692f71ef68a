package ifmatch

import (
	"fmt"
	"net"
	"net/netip"
)

// Iface is one network interface of a host, as Usable reads it.
type Iface struct {
	Name         string
	Up, Loopback bool
	MTU          int
	Addrs        []netip.Prefix // its addresses with their prefixes
}

// Usable returns the addresses of ifaces that a rank publishes as its
// candidates, with their interfaces' MTUs: those of interfaces that are
// up; loopback ones only when every rank of the job is on this host
// (oneHost); no IPv6 link-local address (it needs its interface's zone,
// which a peer cannot name); and, when keep is not nil (GASNET_WORKERIP),
// only addresses it keeps. The order is ifaces' order, then each one's.
func Usable(ifaces []Iface, oneHost bool, keep func(netip.Addr) bool) []Net {
	var out []Net
	for _, f := range ifaces {
		if !f.Up || f.Loopback && !oneHost {
			continue
		}
		for _, p := range f.Addrs {
			a := p.Addr().Unmap()
			if a.Is6() && a.IsLinkLocalUnicast() || a.IsLoopback() && !oneHost {
				continue
			}
			if keep != nil && !keep(a) {
				continue
			}
			out = append(out, Net{netip.PrefixFrom(a, min(p.Bits(), a.BitLen())), f.MTU})
		}
	}
	return out
}

// Interfaces reads this host's interfaces and their addresses.
func Interfaces() ([]Iface, error) {
	nifs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("listing network interfaces: %w", err)
	}
	out := make([]Iface, 0, len(nifs))
	for _, n := range nifs {
		f := Iface{Name: n.Name, Up: n.Flags&net.FlagUp != 0, Loopback: n.Flags&net.FlagLoopback != 0, MTU: n.MTU}
		addrs, err := n.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of interface %s: %w", n.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ones, _ := ipn.Mask.Size()
			ip = ip.Unmap()
			if ip.Is4() && ones > 32 {
				ones -= 96
			}
			f.Addrs = append(f.Addrs, netip.PrefixFrom(ip, ones))
		}
		out = append(out, f)
	}
	return out, nil
}
