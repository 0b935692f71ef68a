package conduit

// Tests of how a rank waits for shared words on a crowded host (wordWait).

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestWordsWaitServes: on a crowded host, a rank that yields in a barrier
// answers the requests of a rank that has not entered it yet as they
// reach its inbox (Endpoint.Pending, and amudp.Probe in its quiet turns),
// not only at its whole poll passes: with those made never to come
// (yieldPoll), and a counter that stands still (no clock to read), the
// other rank's round trips still complete, and then the barrier.
func TestWordsWaitServes(t *testing.T) {
	defer func(p int, c func() uint64) { yieldPoll, waitTicks = p, c }(yieldPoll, waitTicks)
	yieldPoll, waitTicks = 1<<30, func() uint64 { return 1 }
	const trips = 50
	var answered atomic.Int32
	res, _ := runJob(t, 2, loopbackGroups(t, 0, true), false, func(j *Job) {
		if _, err := j.Attach([]HandlerEntry{
			{130, func(tk *Token, _ []uint32, _ []byte) {
				if err := tk.ReplyShort(131); err != nil {
					t.Error(err)
				}
			}},
			{131, func(*Token, []uint32, []byte) { answered.Add(1) }},
		}, 0); err != nil {
			t.Fatal(err)
		}
		if !j.words.yield {
			t.Fatal("the job's words do not yield")
		}
		if j.Rank() == 1 {
			for i := range trips {
				if err := j.RequestShort(0, 130); err != nil {
					t.Errorf("request %d: %v", i, err)
					return
				}
				if err := j.WaitUntil(func() bool { return answered.Load() == int32(i+1) }); err != nil {
					t.Errorf("reply %d: %v", i, err)
					return
				}
			}
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: %v", j.Rank(), err)
		}
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if answered.Load() != trips {
		t.Errorf("%d of %d requests answered", answered.Load(), trips)
	}
}

// TestWordsStartSleeps: on a crowded host, the ranks that wait at
// start-up for the others to map their areas (shareAreas) sleep at once
// instead of yielding the CPU to the ranks still starting; the ranks that
// wait in a barrier yield.
func TestWordsStartSleeps(t *testing.T) {
	defer func(y func()) { yieldTurn = y }(yieldTurn)
	var turns atomic.Int64
	yieldTurn = func() { turns.Add(1); yieldCPU() }
	const n = 3
	// Each rank reads the count as it returns from shareAreas: the first
	// to read it does so before any rank entered a barrier.
	var afterStart [n]int64
	res, _ := runJob(t, n, loopbackGroups(t, 0, true), false, func(j *Job) {
		me := j.Rank()
		time.Sleep(time.Duration(me) * 20 * time.Millisecond) // rank 0 waits 40 ms for rank 2
		if err := j.shareAreas(j.words); err != nil {
			t.Errorf("rank %d: %v", me, err)
			return
		}
		afterStart[me] = turns.Load()
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: %v", me, err)
		}
		time.Sleep(time.Duration(n-me) * 20 * time.Millisecond) // rank 2 waits for rank 0
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: %v", me, err)
		}
	})
	if d := cmp.Diff(jobResult{Ends: slices.Repeat([]string{"returned"}, n)}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got := slices.Min(afterStart[:]); got != 0 {
		t.Errorf("%d turns yielded in the start-up's synchronisation, want none", got)
	}
	if turns.Load() == 0 {
		t.Error("no turn yielded in the barriers")
	}
}

// TestWordsYieldBounded: a rank that waits for a word yields for about
// yieldFor and then sleeps, however long its turns: with turns of 3 ms,
// a rank waiting 200 ms in a barrier takes no more turns than fit in
// yieldFor, and one more.
func TestWordsYieldBounded(t *testing.T) {
	defer func(y func()) { yieldTurn = y }(yieldTurn)
	const turn = 3 * time.Millisecond
	var turns atomic.Int64 // rank 1 arrives last, and does not wait
	yieldTurn = func() {
		turns.Add(1)
		time.Sleep(turn)
	}
	res, _ := runJob(t, 2, loopbackGroups(t, 0, true), false, func(j *Job) {
		if j.Rank() == 1 {
			time.Sleep(200 * time.Millisecond)
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: %v", j.Rank(), err)
		}
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got, most := turns.Load(), int64(yieldFor/turn)+2; got > most {
		t.Errorf("rank 0 yielded %d turns of %v in a wait of 200 ms, want at most %d (yieldFor %v)", got, turn, most, yieldFor)
	}
}

// TestWordsReleaseRingsSleepers: the release of a barrier rings the bell
// of a rank that sleeps in the kernel for it (offSleepers), which then
// returns: rank 0 yields for yieldFor and sleeps until rank 1, 100 ms
// late, arrives and releases it with a doorbell. Where no rank sleeps,
// a release rings none (BENCHMARKS.md has what that saves).
func TestWordsReleaseRingsSleepers(t *testing.T) {
	var rung [2]uint64
	res, _ := runJob(t, 2, loopbackGroups(t, 0, true), false, func(j *Job) {
		me := j.Rank()
		if !j.words.counted || !j.words.yield {
			t.Fatal("the job's barrier is not counted on words that yield")
		}
		if me == 1 {
			time.Sleep(yieldFor + 100*time.Millisecond)
		}
		before := j.words.sh.Stats().Doorbells
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: %v", me, err)
		}
		rung[me] = j.words.sh.Stats().Doorbells - before
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if rung[1] == 0 {
		t.Error("rank 1 released rank 0, asleep in the barrier, without a doorbell")
	}
}

// TestQuietTurns: the turns a yielding wait takes between its whole
// looks end as soon as the watched word reaches its mark, after n turns,
// or once the counter says the clock is due; an empty inbox does not end
// them (TestWordsWaitServes has one that does).
func TestQuietTurns(t *testing.T) {
	defer func(y func(), c func() uint64) { yieldTurn, waitTicks = y, c }(yieldTurn, waitTicks)
	runJob(t, 1, loopbackGroups(t, 0, true), false, func(j *Job) {
		var w atomic.Uint64
		turns, reachAt := 0, 0
		yieldTurn = func() {
			turns++
			if turns == reachAt {
				w.Store(7)
			}
		}
		for _, c := range []struct {
			name              string
			start, mark       uint64
			reachAt, n        int
			ticks, clockTicks uint64 // the counter now, and at the last clock read
			want              int
		}{
			{"reached at the third", 0, 7, 3, 15, 1, 1, 3},
			{"already reached", 7, 7, 0, 15, 1, 1, 0},
			{"n turns", 0, 8, 3, 15, 1, 1, 15},
			{"none asked", 0, 8, 0, 0, 1, 1, 0},
			{"the clock due", 0, 8, 0, 15, yieldTicks + 1, 1, 0},
			{"no counter", 0, 8, 0, 15, 0, 0, 0},
		} {
			w.Store(c.start)
			turns, reachAt = 0, c.reachAt
			waitTicks = func() uint64 { return c.ticks }
			clk := yieldClock{mark: c.clockTicks}
			if got := quietTurns(watch{word: &w, mark: c.mark}, j.ep.Probe(), &clk, c.n); got != c.want || turns != c.want {
				t.Errorf("%s: %d turns (%d yielded), want %d", c.name, got, turns, c.want)
			}
		}
	})
}
