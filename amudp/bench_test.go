package amudp

import (
	"encoding/binary"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The raw-UDP floors are measured in the same run, through the same socket
// mode (raw non-blocking syscalls, busy-polling), so every AM figure can be
// reported as a ratio to what the kernel allows here (DESIGN.md §12).

const floorIters = 20000

var (
	rawRTTOnce sync.Once
	rawRTT     float64 // ns per round trip
	rawBWOnce  sync.Once
	rawBW      float64 // bytes per second, 65000-byte datagrams
)

func spinRecv(u *UDP, b []byte) int {
	for {
		n, _, err := u.Recv(b)
		if err == nil {
			return n
		}
		if err != ErrNoData {
			panic(err)
		}
	}
}

// measureRawRTT is a busy-polling UDP ping-pong of 8-byte datagrams.
func measureRawRTT(tb testing.TB) float64 {
	rawRTTOnce.Do(func() {
		a, err1 := ListenUDP(loopback, 0)
		s, err2 := ListenUDP(loopback, 0)
		if err1 != nil || err2 != nil {
			tb.Fatal(err1, err2)
		}
		defer a.Close()
		defer s.Close()
		const warm = 2000
		go func() {
			runtime.LockOSThread()
			b := make([]byte, 64)
			for i := 0; i < floorIters+warm; i++ {
				n := spinRecv(s, b)
				s.Send(b[:n], a.LocalAddr())
			}
		}()
		b := make([]byte, 64)
		var start time.Time
		for i := 0; i < floorIters+warm; i++ {
			if i == warm {
				start = time.Now()
			}
			a.Send(b[:8], s.LocalAddr())
			spinRecv(a, b)
		}
		rawRTT = float64(time.Since(start).Nanoseconds()) / floorIters
	})
	return rawRTT
}

// measureRawBandwidth streams 65000-byte datagrams with a window of 64 and a
// cumulative ack every 16, as ../shared/bench/c/udp_stream.c does.
func measureRawBandwidth(tb testing.TB) float64 {
	rawBWOnce.Do(func() {
		const size, count, window, every = 65000, 20000, 64, 16
		tx, err1 := ListenUDP(loopback, 8<<20)
		rx, err2 := ListenUDP(loopback, 8<<20)
		if err1 != nil || err2 != nil {
			tb.Fatal(err1, err2)
		}
		defer tx.Close()
		defer rx.Close()
		go func() {
			runtime.LockOSThread()
			b := make([]byte, MaxDatagram+1)
			ack := make([]byte, 8)
			for got := uint64(0); got < count; {
				spinRecv(rx, b)
				got++
				if got%every == 0 || got == count {
					binary.LittleEndian.PutUint64(ack, got)
					rx.Send(ack, tx.LocalAddr())
				}
			}
		}()
		b := make([]byte, size)
		ack := make([]byte, 64)
		start := time.Now()
		var acked uint64
		for sent := uint64(0); sent < count; {
			for sent < count && sent-acked < window {
				tx.Send(b, rx.LocalAddr())
				sent++
			}
			n := spinRecv(tx, ack)
			if n == 8 {
				acked = max(acked, binary.LittleEndian.Uint64(ack))
			}
		}
		for acked < count {
			spinRecv(tx, ack)
			acked = max(acked, binary.LittleEndian.Uint64(ack))
		}
		rawBW = float64(size*count) / time.Since(start).Seconds()
	})
	return rawBW
}

// BenchmarkRawUDPPingPong reports the floor itself.
func BenchmarkRawUDPPingPong(b *testing.B) {
	b.ReportMetric(measureRawRTT(b)/1000, "µs/rtt")
	for b.Loop() {
	}
}

// spinJob is two endpoints that busy-poll; rank 1 serves in the background.
func spinJob(b *testing.B, depth int) []*Endpoint {
	eps := newJob(b, 2, Config{Spin: -1, NetworkDepth: depth, SendDepth: -1})
	stop := &atomic.Bool{}
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		eps[1].WaitUntil(stop.Load)
	}()
	b.Cleanup(func() { stop.Store(true); <-done })
	return eps
}

// BenchmarkShortRoundTrip: a short request and its short reply between two
// endpoints on loopback, both busy-polling.
func BenchmarkShortRoundTrip(b *testing.B) {
	floor := measureRawRTT(b)
	eps := spinJob(b, 0)
	var replies atomic.Uint64
	eps[1].Register(130, func(t *Token, args []uint32, _ []byte) { t.ReplyShort(131, args[0]) })
	eps[0].Register(131, func(*Token, []uint32, []byte) { replies.Add(1) })
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var want uint64
	cond := func() bool { return replies.Load() == want }
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		want++
		if err := eps[0].RequestShort(1, 130, uint32(want)); err != nil {
			b.Fatal(err)
		}
		if err := eps[0].WaitUntil(cond); err != nil {
			b.Fatal(err)
		}
	}
	per := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(per/1000, "µs/rtt")
	b.ReportMetric(floor/1000, "raw-µs/rtt")
	b.ReportMetric(per/floor, "ratio-to-raw")
}

func benchFlood(b *testing.B, cat Category) {
	floor := measureRawBandwidth(b)
	eps := spinJob(b, 0)
	for _, e := range eps {
		e.SetSegment(make([]byte, MaxLong))
	}
	var got atomic.Uint64
	eps[1].Register(130, func(*Token, []uint32, []byte) { got.Add(1) })
	payload := make([]byte, MaxMedium)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(MaxMedium)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		var err error
		if cat == Medium {
			err = eps[0].RequestMedium(1, 130, payload)
		} else {
			err = eps[0].RequestLong(1, 130, payload, 0)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := eps[0].Drain(); err != nil {
		b.Fatal(err)
	}
	bw := float64(b.N) * MaxMedium / time.Since(start).Seconds()
	b.ReportMetric(bw/1e6, "MB/s")
	b.ReportMetric(floor/1e6, "raw-MB/s")
	b.ReportMetric(bw/floor, "ratio-to-raw")
}

// BenchmarkMediumBandwidth floods 65000-byte medium requests, pipelined up to
// the network depth.
func BenchmarkMediumBandwidth(b *testing.B) { benchFlood(b, Medium) }

// BenchmarkLongBandwidth floods 65000-byte long requests into the segment.
func BenchmarkLongBandwidth(b *testing.B) { benchFlood(b, Long) }
