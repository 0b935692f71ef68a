package envconf

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Subnets splits a GASNET_WORKERIP value into its entries: CIDRs,
// addresses or address prefixes (IPv4 or IPv6), separated by commas or
// blanks, in order of preference.
func Subnets(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
}

// AddrOnSubnet returns this host's address on the first entry of the list
// s (Subnets: CIDRs, addresses, or address prefixes such as "10.77.")
// that one of its interfaces is on.
func AddrOnSubnet(s string) (netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Addr{}, fmt.Errorf("GASNET_WORKERIP=%s: listing interfaces: %w", s, err)
	}
	var ips []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				ips = append(ips, ip.Unmap())
			}
		}
	}
	entries := Subnets(s)
	for _, e := range entries {
		for _, ip := range ips {
			if onEntry(e, ip) {
				return ip, nil
			}
		}
	}
	that := "that subnet"
	if len(entries) > 1 {
		that = "any of those subnets"
	}
	return netip.Addr{}, fmt.Errorf("GASNET_WORKERIP=%s: no interface of this host is on %s; accepted: CIDRs such as 10.77.0.0/24 or fd00::/64, addresses or address prefixes, separated by commas", s, that)
}

// onEntry reports whether ip is on e, an entry of a GASNET_WORKERIP list: a
// CIDR, an address, or the prefix of an address's text.
func onEntry(e string, ip netip.Addr) bool {
	pfx, err := netip.ParsePrefix(e)
	if err != nil {
		if a, err := netip.ParseAddr(e); err == nil {
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if pfx.IsValid() {
		return pfx.Contains(ip)
	}
	return strings.HasPrefix(ip.String(), e)
}

// OnSubnets returns whether an address is on one of the entries of the
// GASNET_WORKERIP list s (see AddrOnSubnet); nil for an empty list.
func OnSubnets(s string) func(netip.Addr) bool {
	entries := Subnets(s)
	if len(entries) == 0 {
		return nil
	}
	return func(ip netip.Addr) bool {
		ip = ip.Unmap()
		for _, e := range entries {
			if onEntry(e, ip) {
				return true
			}
		}
		return false
	}
}
