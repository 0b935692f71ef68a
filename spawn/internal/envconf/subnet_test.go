package envconf

import (
	"net/netip"
	"strings"
	"testing"
)

// TestAddrOnSubnet: the first entry of the list that an interface of this
// host is on gives the address (loopback here), whatever the form; a list
// none of whose entries is here is an error that names it.
func TestAddrOnSubnet(t *testing.T) {
	lo := netip.MustParseAddr("127.0.0.1")
	for _, s := range []string{"127.0.0.0/8", "127.", "127.0.0.1", "198.51.100.0/24, 127.0.0.0/8", "198.51.100.0/24,203.0.113.7 127.0.0.1"} {
		if a, err := AddrOnSubnet(s); err != nil || a != lo {
			t.Errorf("GASNET_WORKERIP=%s: %v, %v; want %v", s, a, err, lo)
		}
	}
	if _, err := AddrOnSubnet("198.51.100.0/24, 203.0.113.0/24"); err == nil || !strings.Contains(err.Error(), "GASNET_WORKERIP=198.51.100.0/24, 203.0.113.0/24: no interface of this host is on any of those subnets") {
		t.Errorf("a list of subnets not here: %v", err)
	}
	if _, err := AddrOnSubnet("198.51.100.0/24"); err == nil || !strings.Contains(err.Error(), "no interface of this host is on that subnet") {
		t.Errorf("a subnet not here: %v", err)
	}
}

// TestOnSubnets: each form of entry keeps what it covers and nothing else.
func TestOnSubnets(t *testing.T) {
	if OnSubnets(" , ") != nil {
		t.Error("an empty list restricts")
	}
	on := OnSubnets("10.2.0.0/16, 192.168.7.9 fd00::/16 172.1")
	for a, want := range map[string]bool{
		"10.2.3.4": true, "10.3.0.1": false, "192.168.7.9": true, "192.168.7.10": false,
		"fd00::5": true, "fd01::5": false, "172.16.0.1": true, "172.2.0.1": false, "::ffff:10.2.0.1": true,
	} {
		if got := on(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %v, want %v", a, got, want)
		}
	}
}
