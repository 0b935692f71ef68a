package conduit

import (
	"fmt"
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
			got = append(got, fmt.Sprintf("%s %d/%d", c.Kind, c.Seq, c.Root)+map[bool]string{true: " in at ", false: " out at "}[c.In]+time.Since(start).String())
			return nil
		}
		h := hangWatch{report: report}
		world := &Team{ranks: []int{0}}
		kinds := map[string]coll.Kind{"barrier": coll.Barrier, "all-gather": coll.AllGather, "broadcast": coll.Broadcast}
		// Each wait's number and root, as the console reads them: a
		// number beyond 2^30 and a negative root (a refused call's).
		seqs := map[string]uint64{"barrier": 1<<40 | 7, "all-gather": 2, "broadcast": 1<<30 + 3}
		roots := map[string]int{"barrier": 0, "all-gather": -1, "broadcast": 5}
		wait := func(kind string, d time.Duration) {
			s := h.add(&hangSlot{}, world)
			h.enter(s, &teamCall{t: world, seq: seqs[kind], call: coll.Call{Kind: kinds[kind], Root: roots[kind]}}, warn)
			time.Sleep(d)
			h.leave(s)
		}
		// Checks every second from the first wait at 0; a wait is
		// reported at the third check after it began.
		wait("barrier", 1500*time.Millisecond) // shorter than warn/2: never reported
		var wg sync.WaitGroup
		wg.Go(func() { wait("barrier", 5*time.Second) })
		wg.Go(func() { time.Sleep(time.Second); wait("all-gather", 3*time.Second) })
		wg.Wait()
		time.Sleep(10 * time.Second) // idle: the checks stop at 7s
		wait("broadcast", 3500*time.Millisecond)
		want := []string{
			"barrier 1099511627783/0 in at 4s", "all-gather 2/-1 in at 5s", // 2.5s after each began
			"all-gather 2/-1 out at 5.5s", "barrier 1099511627783/0 out at 6.5s",
			"broadcast 1073741827/5 in at 19.5s", "broadcast 1073741827/5 out at 20s", // checks 1s apart from 17.5s
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("reports (-want +got):\n%s", d)
		}
	})
}
