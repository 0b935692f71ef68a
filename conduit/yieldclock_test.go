package conduit

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestYieldClock: a yielding wait reads the clock only once the counter
// has advanced by yieldTicks since its last read, or at every
// yieldLooks-th turn (or, without a counter, at every turn), starts its
// yieldFor at its first read, and is up once the clock has advanced
// yieldFor from there.
func TestYieldClock(t *testing.T) {
	type turn struct {
		ticks uint64        // the counter at this turn
		clock time.Duration // the clock, were it read
	}
	const g = yieldTicks
	// A counter that does not advance: reads at turns yieldLooks and
	// 2·yieldLooks.
	stuck := make([]turn, 2*yieldLooks)
	for i := range stuck {
		stuck[i] = turn{7, time.Duration(i) * time.Millisecond}
	}
	for _, c := range []struct {
		name  string
		begin uint64
		turns []turn // the wait's turns from the second
		reads int    // reads of the clock over the turns
		up    int    // the turn at which the wait is up, -1 for none
	}{
		{"no counter: a read at every turn", 0,
			[]turn{{0, 0}, {0, 5 * time.Millisecond}, {0, 19 * time.Millisecond}, {0, 20 * time.Millisecond}}, 4, 5},
		{"counter below the gate: no read, however late the clock", 100,
			[]turn{{101, 0}, {100 + g/2, time.Hour}, {99 + g, 2 * time.Hour}}, 0, -1},
		{"the gate passed: first read starts yieldFor", 100,
			[]turn{{100 + g, time.Second}, {100 + g + 1, time.Hour}, {100 + 2*g, time.Second + yieldFor - 1}, {100 + 3*g, time.Second + yieldFor}}, 3, 5},
		{"a counter that does not advance", 7, stuck, 2, 2 * yieldLooks},
		{"a counter that went back reads", 5 * g,
			[]turn{{g, 0}, {g + 1, time.Hour}, {0x10, time.Hour}}, 2, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			var clk yieldClock
			clk.begin(c.begin)
			reads, up := 0, -1
			for i, tu := range c.turns {
				now := func() time.Time { reads++; return time.Unix(0, 0).Add(tu.clock) }
				if clk.up(i+2, tu.ticks, now) && up < 0 {
					up = i + 2
				}
			}
			if d := cmp.Diff([2]int{c.reads, c.up}, [2]int{reads, up}); d != "" {
				t.Errorf("[reads, up turn] (-want +got):\n%s", d)
			}
		})
	}
}
