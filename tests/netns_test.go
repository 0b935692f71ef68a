package tests

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// Hosts made of network namespaces (DESIGN.md §9 tests): uch1..uchN have
// 10.77.0.i/24 on a bridge that lives in namespace ucsw; the console, in
// the root namespace, is 10.77.0.254 on veth uccon. Each host runs its own
// sshd on port 22 under its own host name. Only these tests create names
// with these prefixes.
const (
	netPrefix  = "10.77.0."
	consoleIP  = netPrefix + "254"
	switchNS   = "ucsw"
	consoleDev = "uccon"
)

// netHosts is a set of namespace hosts with an sshd each.
type netHosts struct {
	names  []string // uch1...
	addrs  []string
	sshds  []*sshd
	config string // ssh_config: Host uchI → HostName 10.77.0.I, the test key and known_hosts
	known  string
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// needNetns fails the test (never skips it) without what namespace hosts
// need: root, iproute2, unshare.
func needNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("network-namespace hosts need root")
	}
	needCommand("ip", "iproute2")(t)
	needCommand("unshare", "util-linux")(t)
	needSSHD(t)
}

// startHosts makes n namespace hosts with an sshd each, and removes them
// (with every process left in them) when the test ends.
func startHosts(t *testing.T, n int) *netHosts { return startHostsOn(t, n, false) }

// IPv6-only hosts (startHostsOn): uchI is fd00:77::I/64, the console
// fd00:77::fe.
const (
	net6Prefix = "fd00:77::"
	console6IP = net6Prefix + "fe"
)

// startHostsOn makes n namespace hosts as startHost does, on IPv6 alone
// when v6 is true (no IPv4 address but loopback's, anywhere).
func startHostsOn(t *testing.T, n int, v6 bool) *netHosts {
	t.Helper()
	addrOf := func(i int) (string, string) { return fmt.Sprintf("%s%d", netPrefix, i), "/24" }
	consoleAddr := consoleIP + "/24"
	if v6 {
		addrOf = func(i int) (string, string) { return fmt.Sprintf("%s%x", net6Prefix, i), "/64" }
		consoleAddr = console6IP + "/64"
	}
	needNetns(t)
	lockHosts(t)
	removeHosts() // what a killed earlier run left
	t.Cleanup(removeHosts)
	ip(t, "netns", "add", switchNS)
	ip(t, "-n", switchNS, "link", "add", "br0", "type", "bridge")
	ip(t, "-n", switchNS, "link", "set", "lo", "up")
	ip(t, "-n", switchNS, "link", "set", "br0", "up")
	ip(t, "link", "add", consoleDev, "type", "veth", "peer", "name", "con", "netns", switchNS)
	ip(t, "-n", switchNS, "link", "set", "con", "master", "br0", "up")
	ip(t, "addr", "add", consoleAddr, "dev", consoleDev, "nodad")
	ip(t, "link", "set", consoleDev, "up")
	h := &netHosts{}
	var known []string
	var cfg strings.Builder
	for i := 1; i <= n; i++ {
		name := fmt.Sprintf("uch%d", i)
		addr, bits := addrOf(i)
		ip(t, "netns", "add", name)
		ip(t, "link", "add", "eth0", "netns", name, "type", "veth", "peer", "name", name, "netns", switchNS)
		ip(t, "-n", switchNS, "link", "set", name, "master", "br0", "up")
		ip(t, "-n", name, "addr", "add", addr+bits, "dev", "eth0", "nodad")
		ip(t, "-n", name, "link", "set", "lo", "up")
		ip(t, "-n", name, "link", "set", "eth0", "up")
		d := startSSHD(t, sshdOptions{netns: name, hostname: name, addr: addr})
		h.names, h.addrs, h.sshds = append(h.names, name), append(h.addrs, addr), append(h.sshds, d)
		known = append(known, d.knownHostsLine(addr))
		fmt.Fprintf(&cfg, "Host %s\n  HostName %s\n", name, addr)
	}
	h.config, h.known = sshClientFiles(t, known, cfg.String())
	return h
}

// hostsLock is a file that a run of the tests holds locked (flock) while
// it has namespace hosts: the hosts' names and addresses are fixed, so a
// second run at the same time (another go test ./tests) waits for the
// first's to be removed, and removeHosts never takes a live run's hosts
// for a killed run's (the lock goes with the process that held it).
var hostsLock = filepath.Join(os.TempDir(), "udpconduit-tests-netns.lock")

// lockHosts locks hostsLock until the test ends, waiting for another
// run's hosts (a bound that scales) before failing.
func lockHosts(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(hostsLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	bound := testbound.For(t, 5*time.Minute)
	for deadline := time.Now().Add(bound); ; time.Sleep(100 * time.Millisecond) {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			t.Fatalf("another run of these tests has its namespace hosts (%s locked) after %v: %v", hostsLock, bound, err)
		}
	}
	t.Cleanup(func() { f.Close() }) // after removeHosts: cleanups run last first
}

// removeHosts kills every process in the test namespaces and deletes them.
func removeHosts() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || !(f[0] == switchNS || strings.HasPrefix(f[0], "uch")) {
			continue
		}
		pids, _ := exec.Command("ip", "netns", "pids", f[0]).Output()
		for _, p := range strings.Fields(string(pids)) {
			exec.Command("kill", "-9", p).Run()
		}
		exec.Command("ip", "netns", "del", f[0]).Run()
	}
	exec.Command("ip", "link", "del", consoleDev).Run()
}
