package amudp

// Idle waiters: how often a poller that finds nothing sleeps.

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countWaits counts the transport's sleeps in the kernel.
type countWaits struct {
	Transport
	waits atomic.Int64
}

func (c *countWaits) Wait(d time.Duration) error {
	c.waits.Add(1)
	return c.Transport.Wait(d)
}

// idlePassesPerSleep has g goroutines wait on an idle endpoint for d and
// returns the poll passes per sleep in the kernel.
func idlePassesPerSleep(tb testing.TB, g int, d time.Duration) float64 {
	u, err := ListenUDP(loopback, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tr := &countWaits{Transport: u}
	e, err := NewEndpoint(tr, Config{Spin: 100 * time.Microsecond})
	if err != nil {
		tb.Fatal(err)
	}
	defer e.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() { e.WaitUntil(stop.Load) })
	}
	time.Sleep(d)
	stop.Store(true)
	e.Wake()
	wg.Wait()
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	return float64(e.pass) / float64(max(tr.waits.Load(), 1))
}

// BenchmarkIdleWaiters: goroutines waiting on an idle endpoint must not
// keep each other awake. The poller spins for its spin time, then sleeps
// in the kernel, however many goroutines wait for its passes; a poller
// that handed the poll to a waiter after every empty pass would restart
// the spin each time and spin most of the time, stealing the cores that,
// on a host with more workers than cores, the workers it waits for need.
// It reports poll passes per sleep with one waiting goroutine and with
// two, and their ratio (near 1; the fault it guards against made it
// above 4). A figure of the machine's timing, so a benchmark, not a test.
func BenchmarkIdleWaiters(b *testing.B) {
	var one, two float64
	for b.Loop() {
		one += idlePassesPerSleep(b, 1, 100*time.Millisecond)
		two += idlePassesPerSleep(b, 2, 100*time.Millisecond)
	}
	b.ReportMetric(one/float64(b.N), "passes/sleep-1-waiter")
	b.ReportMetric(two/float64(b.N), "passes/sleep-2-waiters")
	b.ReportMetric(two/max(one, 1), "ratio")
}
