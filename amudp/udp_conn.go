//go:build unix

package amudp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"
)

// connRing is the number of received datagrams ConnUDP holds between its
// reader and the poller.
const connRing = 16

// ConnUDP is a Transport over the standard library's net.UDPConn, for the
// systems where the raw-syscall UDP is not built (it is Linux-only). One
// reader goroutine per socket reads datagrams into a fixed ring of buffers
// and hands them to the poller over a channel, so Recv never blocks and Wait
// can wait for a datagram, a Wake and a timeout at once. It allocates
// nothing per datagram, but copies each one once more than UDP does.
type ConnUDP struct {
	c     *net.UDPConn
	local netip.AddrPort
	full  chan *connPacket // read by the reader, waiting for Recv
	free  chan *connPacket // buffers for the reader
	wake  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the single Recv/Wait caller.
	held  *connPacket // taken off full by Wait, for the next Recv
	timer *time.Timer
}

type connPacket struct {
	b    []byte
	n    int
	from netip.AddrPort
}

var _ Transport = (*ConnUDP)(nil)

// ListenConnUDP opens a ConnUDP bound to addr (port 0 picks a free port) and
// asks for bufSize-byte kernel buffers when bufSize > 0.
func ListenConnUDP(addr netip.AddrPort, bufSize int) (*ConnUDP, error) {
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return nil, fmt.Errorf("amudp: bind %v: %w", addr, err)
	}
	u := &ConnUDP{
		c:     c,
		local: c.LocalAddr().(*net.UDPAddr).AddrPort(),
		full:  make(chan *connPacket, connRing),
		free:  make(chan *connPacket, connRing),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
		timer: time.NewTimer(time.Hour),
	}
	u.timer.Stop()
	if bufSize > 0 {
		if _, _, err := u.SetBuffers(bufSize); err != nil {
			c.Close()
			return nil, fmt.Errorf("amudp: socket buffers of %v: %w", addr, err)
		}
	}
	for range connRing {
		u.free <- &connPacket{b: make([]byte, MaxDatagram+1)}
	}
	go u.read()
	return u, nil
}

// read moves datagrams from the socket into the ring until Close.
func (u *ConnUDP) read() {
	for {
		var p *connPacket
		select {
		case p = <-u.free:
		case <-u.done:
			return
		}
		for {
			n, from, err := u.c.ReadFromUDPAddrPort(p.b)
			if err == nil {
				// A dual-stack socket's IPv4 peers come IPv4-mapped.
				p.n, p.from = n, netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
				break
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ICMP errors reported on the socket (a closed port) and
			// short reads: nothing to deliver, read on.
		}
		u.full <- p // never blocks: the ring has connRing buffers
	}
}

// LocalAddr returns the bound address, or the one SetLocalAddr set.
func (u *ConnUDP) LocalAddr() netip.AddrPort { return u.local }

// SetLocalAddr sets the address LocalAddr returns, for a socket bound to
// every address of its host (an unspecified address): the one by which
// its peers know it (the address table's), on its port. Call it before
// the socket is used.
func (u *ConnUDP) SetLocalAddr(a netip.AddrPort) { u.local = a }

// Send transmits one datagram, dropping it when the socket cannot take it
// within sendWaitLimit.
func (u *ConnUDP) Send(b []byte, to netip.AddrPort) error {
	if len(b) == 0 {
		return nil
	}
	if u.closed() {
		return net.ErrClosed
	}
	_ = u.c.SetWriteDeadline(time.Now().Add(sendWaitLimit))
	_, err := u.c.WriteToUDPAddrPort(b, to)
	switch {
	case err == nil, errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ENOBUFS):
		return nil // dropped, as a lossy network would: retransmission recovers
	case errors.Is(err, net.ErrClosed):
		return net.ErrClosed
	}
	return fmt.Errorf("amudp: send to %v: %w", to, err)
}

// Recv returns one datagram the reader has taken off the socket.
func (u *ConnUDP) Recv(b []byte) (int, netip.AddrPort, error) {
	p := u.held
	u.held = nil
	if p == nil {
		select {
		case p = <-u.full:
		default:
			if u.closed() {
				return 0, netip.AddrPort{}, net.ErrClosed
			}
			return 0, netip.AddrPort{}, ErrNoData
		}
	}
	n := copy(b, p.b[:p.n])
	from := p.from
	u.free <- p
	return n, from, nil
}

// Wait blocks until a datagram is pending, Wake is called, or timeout.
func (u *ConnUDP) Wait(timeout time.Duration) error {
	if u.closed() {
		return net.ErrClosed
	}
	if u.held != nil || len(u.full) > 0 {
		return nil
	}
	if timeout <= 0 {
		return nil
	}
	u.timer.Reset(timeout)
	defer u.timer.Stop()
	select {
	case p := <-u.full:
		u.held = p
	case <-u.wake:
	case <-u.timer.C:
	case <-u.done:
	}
	return nil
}

// SetPark does nothing: ConnUDP's Wait always parks its goroutine (on a
// channel that its reader goroutine fills), never blocking a thread in a
// system call.
func (u *ConnUDP) SetPark(bool) error { return nil }

// Wake makes a current or the next Wait return.
func (u *ConnUDP) Wake() {
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// SetBuffers sets the kernel buffers to n bytes each way (n <= 0 only reads
// them) and reads back what the kernel granted.
func (u *ConnUDP) SetBuffers(n int) (rcv, snd int, err error) {
	if n > 0 {
		if err := u.c.SetReadBuffer(n); err != nil {
			return 0, 0, err
		}
		if err := u.c.SetWriteBuffer(n); err != nil {
			return 0, 0, err
		}
	}
	rc, err := u.c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		if rcv, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF); gerr != nil {
			return
		}
		snd, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF)
	}); err != nil {
		return 0, 0, err
	}
	return rcv, snd, gerr
}

// Close closes the socket and ends the reader.
func (u *ConnUDP) Close() error {
	err := net.ErrClosed
	u.once.Do(func() {
		close(u.done)
		err = u.c.Close()
	})
	return err
}

func (u *ConnUDP) closed() bool {
	select {
	case <-u.done:
		return true
	default:
		return false
	}
}
