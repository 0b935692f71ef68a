package conduit

import "time"

// yieldClock tells a wait that yields (wordWait) when it has yielded for
// yieldFor. A read of the clock at each turn cost a crowded rank more
// than its look at the words (BENCHMARKS.md), so the wait reads it only
// once the processor's counter (ticks) has advanced by yieldTicks since
// the last read, or the wait began, or at every yieldLooks-th turn
// whatever the counter says (one that does not advance): a wait shorter
// than that, the common one in a barrier, reads no clock. Where there is
// no counter (ticks returns 0), it reads the clock at every look. Its
// first read starts the yieldFor.
type yieldClock struct {
	start time.Time // the first read; zero before it
	mark  uint64    // the counter at the last read, or when the wait began
}

// yieldTicks is how far the counter advances between two reads of the
// clock by a yielding wait: 2^20 ticks, at most 1.05 ms for a counter of
// a GHz or more. The first read comes up to that late, and so may the
// last: a wait yields for at most about 2.1 ms longer than yieldFor.
const yieldTicks = 1 << 20

// yieldLooks: a wait reads the clock at least at every yieldLooks-th
// turn, whatever the counter.
const yieldLooks = 256

// begin starts a wait whose counter reads t.
func (c *yieldClock) begin(t uint64) { *c = yieldClock{mark: t} }

// due reports whether the wait, its counter reading t, would read the
// clock at its next look (up) whatever its turn: always where there is
// no counter.
func (c *yieldClock) due(t uint64) bool { return t == 0 || t-c.mark >= yieldTicks }

// up reports whether the wait, at its turn-th turn and its counter
// reading t, has yielded for yieldFor; now reads the clock.
func (c *yieldClock) up(turn int, t uint64, now func() time.Time) bool {
	if !c.due(t) && turn%yieldLooks != 0 {
		return false
	}
	c.mark = t
	if c.start.IsZero() {
		c.start = now()
		return false
	}
	return now().Sub(c.start) >= yieldFor
}
