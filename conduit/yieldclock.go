package conduit

import "time"

// yieldClock tells a wait that yields (wordWait) when it has yielded for
// yieldFor. A read of the clock after a context switch costs a crowded
// rank a fair part of its turn (the vDSO's data page, missed after the
// other ranks' turns; BENCHMARKS.md), so the wait reads it only once the
// processor's counter (ticks) has advanced by yieldTicks since the last
// read, or the wait began: a wait shorter than that, the common one in a
// barrier, reads no clock. Where there is no counter (ticks returns 0),
// it reads the clock at every turn. Its first read starts the yieldFor.
type yieldClock struct {
	start time.Time // the first read; zero before it
	mark  uint64    // the counter at the last read, or when the wait began
}

// yieldTicks is how far the counter advances between two reads of the
// clock by a yielding wait: 2^21 ticks, at most 2.1 ms for a counter of
// a GHz or more, so that a wait yields for at most about that longer
// than yieldFor.
const yieldTicks = 1 << 21

// begin starts a wait whose counter reads t.
func (c *yieldClock) begin(t uint64) { *c = yieldClock{mark: t} }

// up reports whether the wait, its counter reading t, has yielded for
// yieldFor; now reads the clock.
func (c *yieldClock) up(t uint64, now func() time.Time) bool {
	if t != 0 && t-c.mark < yieldTicks {
		return false
	}
	c.mark = t
	if c.start.IsZero() {
		c.start = now()
		return false
	}
	return now().Sub(c.start) >= yieldFor
}
