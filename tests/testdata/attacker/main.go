// Command attacker is the fault suite's hostile neighbour (Linux, root; run
// it inside the job's network namespace). It sniffs the loopback device for
// the UDP datagrams of a job and attacks every UDP port bound in the
// namespace:
//
//	attacker capture SECONDS FILE
//	attacker attack SECONDS [FILE]
//
// capture records the datagrams seen on lo for SECONDS (source, destination
// and payload) into FILE. attack sends, for SECONDS and as fast as it can,
// to every UDP port bound in the namespace but its own: random garbage of
// random length, truncated copies and 65000-byte oversized copies of live
// datagrams, live datagrams replayed from their original source address
// (a raw socket forges it), and the datagrams of FILE (an earlier job's)
// replayed from their original source too. It prints what it sent.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/gob"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// datagram is one captured UDP datagram.
type datagram struct {
	Src, Dst netip.AddrPort
	Payload  []byte
}

func main() {
	if len(os.Args) < 3 {
		die("usage: attacker capture SECONDS FILE | attacker attack SECONDS [FILE]")
	}
	secs, err := strconv.ParseFloat(os.Args[2], 64)
	if err != nil {
		die("SECONDS=%q: %v", os.Args[2], err)
	}
	until := time.Now().Add(time.Duration(secs * float64(time.Second)))
	switch os.Args[1] {
	case "capture":
		if len(os.Args) != 4 {
			die("usage: attacker capture SECONDS FILE")
		}
		var got []datagram
		sniff(until, func(d datagram) { got = append(got, d) })
		f, err := os.Create(os.Args[3])
		if err != nil {
			die("%v", err)
		}
		if err := gob.NewEncoder(f).Encode(got); err != nil {
			die("%v", err)
		}
		f.Close()
		fmt.Printf("captured %d datagrams\n", len(got))
	case "attack":
		var old []datagram
		if len(os.Args) == 4 {
			f, err := os.Open(os.Args[3])
			if err != nil {
				die("%v", err)
			}
			if err := gob.NewDecoder(f).Decode(&old); err != nil {
				die("%s: %v", os.Args[3], err)
			}
			f.Close()
		}
		attack(until, old)
	default:
		die("unknown mode %q", os.Args[1])
	}
}

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "attacker: "+format+"\n", a...)
	os.Exit(1)
}

// sniff calls f for every IPv4 UDP datagram on lo until the deadline.
func sniff(until time.Time, f func(datagram)) {
	const ethPAll = 0x0300 // htons(ETH_P_ALL)
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_DGRAM, ethPAll)
	if err != nil {
		die("packet socket: %v", err)
	}
	defer syscall.Close(fd)
	lo, err := ifIndex("lo")
	if err != nil {
		die("%v", err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: ethPAll, Ifindex: lo}); err != nil {
		die("bind lo: %v", err)
	}
	tv := syscall.NsecToTimeval(int64(50 * time.Millisecond))
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	buf := make([]byte, 1<<17)
	for time.Now().Before(until) {
		n, from, err := syscall.Recvfrom(fd, buf, 0)
		if err != nil {
			continue
		}
		// On lo every packet is seen leaving and arriving: keep one.
		if ll, ok := from.(*syscall.SockaddrLinklayer); ok && ll.Pkttype == syscall.PACKET_OUTGOING {
			continue
		}
		if d, ok := parseIPv4UDP(buf[:n]); ok {
			f(d)
		}
	}
}

func ifIndex(name string) (int, error) {
	b, err := os.ReadFile("/sys/class/net/" + name + "/ifindex")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

func parseIPv4UDP(p []byte) (datagram, bool) {
	if len(p) < 28 || p[0]>>4 != 4 || p[9] != syscall.IPPROTO_UDP {
		return datagram{}, false
	}
	ihl := int(p[0]&0x0f) * 4
	if len(p) < ihl+8 {
		return datagram{}, false
	}
	src := netip.AddrFrom4([4]byte(p[12:16]))
	dst := netip.AddrFrom4([4]byte(p[16:20]))
	u := p[ihl:]
	ulen := int(binary.BigEndian.Uint16(u[4:6]))
	if ulen < 8 || ulen > len(u) {
		return datagram{}, false
	}
	return datagram{
		Src:     netip.AddrPortFrom(src, binary.BigEndian.Uint16(u[0:2])),
		Dst:     netip.AddrPortFrom(dst, binary.BigEndian.Uint16(u[2:4])),
		Payload: append([]byte(nil), u[8:ulen]...),
	}, true
}

// udpPorts lists the UDP ports bound on 127.0.0.1 or any address in this
// namespace.
func udpPorts() []uint16 {
	f, err := os.Open("/proc/net/udp")
	if err != nil {
		die("%v", err)
	}
	defer f.Close()
	var out []uint16
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		_, port, ok := strings.Cut(fields[1], ":")
		if p, err := strconv.ParseUint(port, 16, 16); ok && err == nil {
			out = append(out, uint16(p))
		}
	}
	return out
}

// rawSender sends IPv4 UDP datagrams with any source address (IP_HDRINCL).
type rawSender struct{ fd int }

func newRawSender() rawSender {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
	if err != nil {
		die("raw socket: %v", err)
	}
	return rawSender{fd}
}

func (r rawSender) send(src, dst netip.AddrPort, payload []byte) error {
	pkt := make([]byte, 28+len(payload))
	pkt[0] = 0x45
	binary.BigEndian.PutUint16(pkt[2:], uint16(len(pkt)))
	pkt[8] = 64
	pkt[9] = syscall.IPPROTO_UDP
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(pkt[12:16], s4[:])
	copy(pkt[16:20], d4[:])
	binary.BigEndian.PutUint16(pkt[20:], src.Port())
	binary.BigEndian.PutUint16(pkt[22:], dst.Port())
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(payload)))
	// UDP checksum 0: none (IPv4). The kernel fills the IP checksum.
	copy(pkt[28:], payload)
	return syscall.Sendto(r.fd, pkt, 0, &syscall.SockaddrInet4{Addr: d4})
}

// attack floods every bound UDP port (but its own sockets') until the
// deadline; see the command's doc.
func attack(until time.Time, old []datagram) {
	raw := newRawSender()
	plain, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_DGRAM, 0)
	if err != nil {
		die("udp socket: %v", err)
	}
	syscall.Bind(plain, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}})
	var mu sync.Mutex
	var live []datagram
	go sniff(until, func(d datagram) {
		mu.Lock()
		if len(live) < 4096 {
			live = append(live, d)
		} else {
			live[rand.IntN(len(live))] = d
		}
		mu.Unlock()
	})
	own := map[uint16]bool{}
	if sa, err := syscall.Getsockname(plain); err == nil {
		own[uint16(sa.(*syscall.SockaddrInet4).Port)] = true
	}
	var counts [5]int
	names := [5]string{"garbage", "truncated", "oversized", "live replays", "earlier job's replays"}
	junk := make([]byte, 65000)
	loopback := [4]byte{127, 0, 0, 1}
	for time.Now().Before(until) {
		var ports []uint16
		for _, p := range udpPorts() {
			if !own[p] {
				ports = append(ports, p)
			}
		}
		mu.Lock()
		var d datagram
		if len(live) > 0 {
			d = live[rand.IntN(len(live))]
		}
		mu.Unlock()
		for _, port := range ports {
			to := &syscall.SockaddrInet4{Port: int(port), Addr: loopback}
			n := rand.IntN(200)
			for i := range n {
				junk[i] = byte(rand.Uint32())
			}
			if syscall.Sendto(plain, junk[:n], 0, to) == nil {
				counts[0]++
			}
			if len(d.Payload) > 1 {
				if syscall.Sendto(plain, d.Payload[:rand.IntN(len(d.Payload))], 0, to) == nil {
					counts[1]++
				}
				big := append(append([]byte(nil), d.Payload...), junk[:65000-len(d.Payload)%65000]...)
				if len(big) > 65000 {
					big = big[:65000]
				}
				if syscall.Sendto(plain, big, 0, to) == nil {
					counts[2]++
				}
			}
		}
		if len(d.Payload) > 0 && raw.send(d.Src, d.Dst, d.Payload) == nil {
			counts[3]++
		}
		if len(old) > 0 {
			o := old[rand.IntN(len(old))]
			// To a port of this job, from the source it had then.
			if len(ports) > 0 {
				dst := netip.AddrPortFrom(netip.AddrFrom4(loopback), ports[rand.IntN(len(ports))])
				if raw.send(o.Src, dst, o.Payload) == nil {
					counts[4]++
				}
			}
		}
	}
	for i, c := range counts {
		fmt.Printf("%s %d\n", names[i], c)
	}
}
