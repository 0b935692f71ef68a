package conduit

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/conduit/internal/coll"
	"github.com/udpconduit/udpconduit/spawn"
)

// TestHangWatch: a wait in a collective is reported once it has lasted
// half of GASNET_HANG_WARN (within a quarter more), once, and again when it
// ends; a shorter wait never is; waits in collectives of different locks
// at once are each reported; and the watch goes on after an idle spell.
func TestHangWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const warn = 4 * time.Second
		var mu sync.Mutex
		var got []string
		start := time.Now()
		report := func(c spawn.Coll) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, c.Kind+map[bool]string{true: " in at ", false: " out at "}[c.In]+time.Since(start).String())
			return nil
		}
		var h hangWatch
		world := &Team{ranks: []int{0}}
		kinds := map[string]coll.Kind{"barrier": coll.Barrier, "all-gather": coll.AllGather, "broadcast": coll.Broadcast}
		wait := func(kind string, d time.Duration) {
			i := h.newSlot()
			h.enter(i, &teamCall{t: world, seq: 1, call: coll.Call{Kind: kinds[kind]}}, warn, report)
			time.Sleep(d)
			h.leave(i)
		}
		wait("barrier", time.Second) // shorter than warn/2: never reported
		var wg sync.WaitGroup
		wg.Go(func() { wait("barrier", 5*time.Second) })
		wg.Go(func() { time.Sleep(time.Second); wait("all-gather", 3*time.Second) })
		wg.Wait()
		time.Sleep(10 * time.Second) // idle
		wait("broadcast", 3*time.Second)
		want := []string{
			"barrier in at 3s", "all-gather in at 4s", // at the checks 2s after each began
			"all-gather out at 5s", "barrier out at 6s",
			"broadcast in at 18s", "broadcast out at 19s", // checks 1s apart from 16s
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("reports (-want +got):\n%s", d)
		}
	})
}
