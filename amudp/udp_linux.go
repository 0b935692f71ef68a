package amudp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDP is a Transport over a kernel UDP socket. Receives and sends are raw
// non-blocking syscalls into caller buffers and preallocated socket
// addresses, which allocate nothing (DESIGN.md §12: x/sys Recvfrom allocates
// on every call). Wait blocks in ppoll on the socket and an eventfd that Wake
// writes, so a blocked poller costs no CPU; or, once SetPark(true), it parks
// the goroutine in the Go runtime's network poller (see SetPark).
type UDP struct {
	fd, efd int
	local   netip.AddrPort
	v6      bool
	closed  atomic.Bool
	users   atomic.Int32 // syscalls in progress, so Close does not reuse an fd under them

	// Parking (SetPark): file holds fd in the runtime's poller, raw is
	// its RawConn, and woken records a Wake the next Wait must not miss.
	park  atomic.Bool
	file  *os.File
	raw   syscall.RawConn
	woken atomic.Bool

	// Owned by the single Recv/Wait caller.
	from     unix.RawSockaddrAny
	fromLen  uint32
	pfds     [2]unix.PollFd
	ts       unix.Timespec
	ebuf     [8]byte
	peekBuf  [1]byte
	readable func(fd uintptr) bool // u.peek, made once
}

var _ Transport = (*UDP)(nil)

// ListenUDP opens a UDP socket bound to addr (port 0 picks a free port) with
// close-on-exec set, and asks for bufSize-byte kernel buffers when bufSize > 0.
func ListenUDP(addr netip.AddrPort, bufSize int) (*UDP, error) {
	fam := unix.AF_INET
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		fam = unix.AF_INET6
	}
	fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("amudp: udp socket: %w", err)
	}
	u := &UDP{fd: fd, efd: -1, v6: fam == unix.AF_INET6}
	fail := func(what string, err error) (*UDP, error) {
		unix.Close(fd)
		if u.efd >= 0 {
			unix.Close(u.efd)
		}
		return nil, fmt.Errorf("amudp: %s %v: %w", what, addr, err)
	}
	if u.v6 && addr.Addr().IsUnspecified() {
		// Every address of the host, IPv4 ones too (as IPv4-mapped).
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			return fail("dual-stack socket for", err)
		}
	}
	var sa unix.Sockaddr
	if u.v6 {
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().Unmap().As4()}
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fail("getsockname", err)
	}
	switch s := got.(type) {
	case *unix.SockaddrInet4:
		u.local = netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port))
	case *unix.SockaddrInet6:
		u.local = netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port))
	}
	if u.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fail("eventfd for", err)
	}
	if bufSize > 0 {
		if _, _, err := u.SetBuffers(bufSize); err != nil {
			return fail("socket buffers of", err)
		}
	}
	u.pfds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	u.pfds[1] = unix.PollFd{Fd: int32(u.efd), Events: unix.POLLIN}
	return u, nil
}

// LocalAddr returns the bound address, or the one SetLocalAddr set.
func (u *UDP) LocalAddr() netip.AddrPort { return u.local }

// SetLocalAddr sets the address LocalAddr returns, for a socket bound to
// every address of its host (an unspecified address): the one by which
// its peers know it (the address table's), on its port. Call it before
// the socket is used.
func (u *UDP) SetLocalAddr(a netip.AddrPort) { u.local = a }

func (u *UDP) enter() bool {
	u.users.Add(1)
	if u.closed.Load() {
		u.users.Add(-1)
		return false
	}
	return true
}

func (u *UDP) leave() { u.users.Add(-1) }

// toSockaddr fills a raw socket address for to and returns its length.
func toSockaddr(sa *unix.RawSockaddrAny, to netip.AddrPort, v6 bool) uint32 {
	if !v6 {
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		s4.Family = unix.AF_INET
		binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:], to.Port())
		s4.Addr = to.Addr().Unmap().As4()
		return unix.SizeofSockaddrInet4
	}
	s6 := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
	s6.Family = unix.AF_INET6
	binary.BigEndian.PutUint16((*[2]byte)(unsafe.Pointer(&s6.Port))[:], to.Port())
	s6.Addr = to.Addr().As16()
	return unix.SizeofSockaddrInet6
}

func fromSockaddr(sa *unix.RawSockaddrAny) netip.AddrPort {
	switch sa.Addr.Family {
	case unix.AF_INET:
		s4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s4.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom4(s4.Addr), port)
	case unix.AF_INET6:
		s6 := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		port := binary.BigEndian.Uint16((*[2]byte)(unsafe.Pointer(&s6.Port))[:])
		return netip.AddrPortFrom(netip.AddrFrom16(s6.Addr).Unmap(), port)
	}
	return netip.AddrPort{}
}

// sendSpinLimit bounds how long Send waits for room in a full socket buffer
// before dropping the datagram.
const sendWaitLimit = 20 * time.Millisecond

// Send transmits one datagram.
func (u *UDP) Send(b []byte, to netip.AddrPort) error {
	if len(b) == 0 {
		return nil
	}
	if !u.enter() {
		return net.ErrClosed
	}
	defer u.leave()
	var sa unix.RawSockaddrAny
	salen := toSockaddr(&sa, to, u.v6)
	var deadline time.Time
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(u.fd), uintptr(unsafe.Pointer(&b[0])),
			uintptr(len(b)), unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&sa)), uintptr(salen))
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		case unix.EAGAIN, unix.ENOBUFS:
			// The send buffer is full: wait a little for room, then drop.
			if deadline.IsZero() {
				deadline = time.Now().Add(sendWaitLimit)
			} else if time.Now().After(deadline) {
				return nil
			}
			pfd := [1]unix.PollFd{{Fd: int32(u.fd), Events: unix.POLLOUT}}
			_, _ = unix.Poll(pfd[:], 1)
		case unix.ECONNREFUSED, unix.EHOSTUNREACH, unix.ENETUNREACH:
			return nil // a lossy network, for retransmission to handle
		default:
			return fmt.Errorf("amudp: sendto %v: %w", to, e)
		}
	}
}

// Recv reads one pending datagram.
func (u *UDP) Recv(b []byte) (int, netip.AddrPort, error) {
	if !u.enter() {
		return 0, netip.AddrPort{}, net.ErrClosed
	}
	defer u.leave()
	for {
		u.fromLen = unix.SizeofSockaddrAny
		r, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(u.fd), uintptr(unsafe.Pointer(&b[0])),
			uintptr(len(b)), unix.MSG_DONTWAIT, uintptr(unsafe.Pointer(&u.from)), uintptr(unsafe.Pointer(&u.fromLen)))
		switch e {
		case 0:
			return int(r), fromSockaddr(&u.from), nil
		case unix.EAGAIN:
			return 0, netip.AddrPort{}, ErrNoData
		case unix.EINTR, unix.ECONNREFUSED:
			continue
		default:
			return 0, netip.AddrPort{}, fmt.Errorf("amudp: recvfrom: %w", e)
		}
	}
}

// SetPark chooses how Wait blocks, before the first Wait: with park false
// (the default), in a ppoll system call that an eventfd written by Wake
// ends, which wakes soonest; with park true, by parking the goroutine in the
// Go runtime's network poller until the socket is readable or a deadline
// passes, which Wake moves to the past. A goroutine blocked in a system
// call keeps the runtime's monitor thread waking every 20 µs to take its
// processor back and hand it to another thread; on a host with many more
// ranks than CPUs that churn costs more than the ranks' own work
// (BENCHMARKS.md, Scale), and a parked goroutine costs nothing. It is not
// safe to call concurrently with Wait or Wake.
func (u *UDP) SetPark(park bool) error {
	if !park || u.raw != nil {
		u.park.Store(park)
		return nil
	}
	if !u.enter() {
		return net.ErrClosed
	}
	defer u.leave()
	// The descriptor is non-blocking, so the file joins the poller. From
	// here f owns fd, failure or not (Close closes fd through it): a File
	// dropped would close fd when collected.
	f := os.NewFile(uintptr(u.fd), "amudp "+u.local.String())
	u.file = f
	raw, err := f.SyscallConn()
	if err == nil {
		err = f.SetReadDeadline(time.Time{}) // fails unless in the poller
	}
	if err != nil {
		return fmt.Errorf("amudp: udp socket %v in the runtime's poller: %w", u.local, err)
	}
	u.raw, u.readable = raw, u.peek
	u.park.Store(true)
	return nil
}

// Wait blocks until the socket is readable, Wake is called, or timeout.
func (u *UDP) Wait(timeout time.Duration) error {
	if !u.enter() {
		return net.ErrClosed
	}
	defer u.leave()
	if timeout < 0 {
		timeout = 0
	}
	if u.park.Load() {
		return u.parkWait(timeout)
	}
	u.ts = unix.NsecToTimespec(int64(timeout))
	u.pfds[0].Revents, u.pfds[1].Revents = 0, 0
	_, _, e := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&u.pfds[0])), 2,
		uintptr(unsafe.Pointer(&u.ts)), 0, 0, 0)
	if e != 0 && e != unix.EINTR {
		return fmt.Errorf("amudp: ppoll: %w", e)
	}
	if u.pfds[1].Revents&unix.POLLIN != 0 {
		unix.RawSyscall(unix.SYS_READ, uintptr(u.efd), uintptr(unsafe.Pointer(&u.ebuf[0])), 8)
	}
	return nil
}

// parkWait is Wait in the runtime's poller (SetPark).
func (u *UDP) parkWait(timeout time.Duration) error {
	// The deadline first, then the Wake flag: a Wake that the flag missed
	// moves the deadline after this, and the wait ends at once.
	if err := u.file.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return fmt.Errorf("amudp: udp wait: %w", err)
	}
	if u.woken.Swap(false) {
		return nil
	}
	err := u.raw.Read(u.readable)
	u.woken.Store(false) // a Wake during this wait is served: it returns
	wakeMonitor()
	if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("amudp: udp wait: %w", err)
	}
	return nil
}

// wakeMonitor makes one ordinary system call, which wakes the Go
// runtime's monitor thread (sysmon) if it sleeps. While every P was idle
// (this rank parked, say) the monitor sleeps until the next timer is due
// (a parked Wait's deadline, up to seconds away), and a goroutine that
// the poller wakes takes a P without waking it. If this rank's program
// then computes on its one P (GOMAXPROCS=1 on a crowded host), making
// only the library's raw system calls or none, nothing preempts it: the
// worker's control goroutine would answer neither the console's pings
// (the rank judged stopped after GASNET_LIVENESS_TIMEOUT) nor the job's
// end. Once awake, the monitor preempts a goroutine that computes for
// 10-20 ms and polls the network for the others.
func wakeMonitor() { unix.Syscall(unix.SYS_GETPID, 0, 0, 0) }

// peek reports whether a datagram (or an error) waits on the socket,
// without taking it: the poller wakes a parked Wait when one arrives, so
// the Wait looks first for one that came before it.
func (u *UDP) peek(fd uintptr) bool {
	_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&u.peekBuf[0])),
		1, unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return e != unix.EAGAIN
}

var wakeOne = [8]byte{1}

// Wake makes a current or the next Wait return.
func (u *UDP) Wake() {
	if !u.enter() {
		return
	}
	defer u.leave()
	u.wakeRaw()
}

// SetBuffers sets SO_RCVBUF and SO_SNDBUF to n bytes, trying the FORCE
// variants (root) first, and reads back (n <= 0 only reads back) what the kernel granted (which Linux
// reports doubled, for its bookkeeping).
func (u *UDP) SetBuffers(n int) (rcv, snd int, err error) {
	if !u.enter() {
		return 0, 0, net.ErrClosed
	}
	defer u.leave()
	for _, o := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
		if n <= 0 {
			break
		}
		if unix.SetsockoptInt(u.fd, unix.SOL_SOCKET, o[0], n) != nil {
			if err := unix.SetsockoptInt(u.fd, unix.SOL_SOCKET, o[1], n); err != nil {
				return 0, 0, err
			}
		}
	}
	if rcv, err = unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_RCVBUF); err != nil {
		return 0, 0, err
	}
	snd, err = unix.GetsockoptInt(u.fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	return rcv, snd, err
}

// Close closes the socket once no syscall uses it.
func (u *UDP) Close() error {
	if u.closed.Swap(true) {
		return net.ErrClosed
	}
	u.wakeRaw()
	for u.users.Load() > 0 {
		u.wakeRaw()
		time.Sleep(50 * time.Microsecond)
	}
	unix.Close(u.efd)
	if u.file != nil {
		return u.file.Close() // leaves the poller, closes fd
	}
	return unix.Close(u.fd)
}

// wakeRaw ends a current Wait, or makes the next one return.
func (u *UDP) wakeRaw() {
	if u.park.Load() {
		u.woken.Store(true)
		_ = u.file.SetReadDeadline(longAgo)
		return
	}
	unix.RawSyscall(unix.SYS_WRITE, uintptr(u.efd), uintptr(unsafe.Pointer(&wakeOne[0])), 8)
}

// longAgo is a deadline that has passed.
var longAgo = time.Unix(1, 0)
