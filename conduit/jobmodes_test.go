package conduit

// Tests of how a job waits and synchronises: the barrier's algorithms,
// the progress and procs modes, the first retransmission's wait, and
// all-gathers over active messages.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
)

// TestBarrierAlgorithms: under each algorithm (the hierarchical one with
// groups of three consecutive ranks), on 1 to 13 ranks over links
// that drop 10% and duplicate 5% of the datagrams and reorder them, ranks
// entering in an order that changes from barrier to barrier, no rank leaves
// a barrier before every rank has entered it, through Barrier and through
// BarrierNB and its Wait with work between them.
func TestBarrierAlgorithms(t *testing.T) {
	names := map[barrierAlgo]string{barrierDissem: "AMDISSEM", barrierTree: "AMTREE", barrierCentral: "AMCENTRAL", barrierHier: "two levels"}
	for algo, name := range names {
		for _, n := range []int{1, 2, 3, 5, 8, 13} {
			t.Run(fmt.Sprintf("%s/N=%d", name, n), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					const barriers = 12
					var entered [barriers]atomic.Int32
					jn := memNet(amudptest.New(uint64(n), 0.1, 0.05, 100*time.Microsecond))
					jn.barrier = algo
					res, jobs := runJob(t, n, jn, false, func(j *Job) { enterBarriers(t, j, entered[:], time.Millisecond) })
					want := jobResult{Ends: slices.Repeat([]string{"returned"}, n)}
					if d := cmp.Diff(want, res); d != "" {
						t.Errorf("(-want +got):\n%s", d)
					}
					for _, j := range jobs {
						if j.world.seq != barriers {
							t.Errorf("rank %d made %d collectives, want %d", j.rank, j.world.seq, barriers)
						}
					}
				})
			})
		}
	}
}

// enterBarriers has j enter len(entered) barriers, each after a pause (in
// units of unit) that changes with the rank and the barrier, alternately
// through Barrier and through BarrierNotify and BarrierWait with work
// between them, counting its entries in entered; it fails the test when j
// leaves a barrier before every rank has entered it.
func enterBarriers(t *testing.T, j *Job, entered []atomic.Int32, unit time.Duration) {
	me, n := j.Rank(), int32(j.Size())
	for e := range entered {
		time.Sleep(time.Duration((me*7+e*3)%5) * unit)
		entered[e].Add(1)
		var err error
		if e%2 == 0 {
			err = j.World().Barrier()
		} else {
			h := j.World().BarrierNB()
			time.Sleep(time.Duration(me%3) * unit) // work between
			_, err = h.Wait()
		}
		if err != nil {
			t.Errorf("rank %d: barrier %d: %v", me, e+1, err)
			return
		}
		if got := entered[e].Load(); got != n {
			t.Errorf("rank %d left barrier %d when %d of %d ranks had entered it", me, e+1, got, n)
		}
	}
}

// TestChooseBarrier: GASNET_BARRIER wins; unset, the tree when some host
// has more ranks than CPUs, else the dissemination.
func TestChooseBarrier(t *testing.T) {
	for _, c := range []struct {
		set     string
		crowded bool
		want    barrierAlgo
	}{
		{"", false, barrierDissem}, {"", true, barrierTree},
		{"AMDISSEM", true, barrierDissem}, {"AMTREE", false, barrierTree}, {"AMCENTRAL", true, barrierCentral},
	} {
		if got, why := chooseBarrier(c.set, c.crowded); got != c.want || why == "" {
			t.Errorf("chooseBarrier(%q, %v) = %v %q, want %v", c.set, c.crowded, got, why, c.want)
		}
	}
}

// TestProgressMode: waits spin unless the host is oversubscribed and the
// user did not set GASNET_POLL_SPIN, which always wins.
func TestProgressMode(t *testing.T) {
	for _, c := range []struct {
		spin        time.Duration
		set         bool
		ranks, cpus int
		wantSpin    time.Duration
		wantPolite  bool
		say         string
	}{
		{100 * time.Microsecond, false, 2, 2, 100 * time.Microsecond, false, "spin 100µs"},
		{100 * time.Microsecond, false, 3, 2, 0, true, "polite progress: 3 ranks share this host's 2 CPUs"},
		{50 * time.Microsecond, true, 512, 2, 50 * time.Microsecond, false, "as set"},
		{0, true, 1, 8, 0, true, "spin 0s"},
	} {
		spin, polite, why := progressMode(c.spin, c.set, c.ranks, c.cpus)
		if spin != c.wantSpin || polite != c.wantPolite || !strings.Contains(why, c.say) {
			t.Errorf("progressMode(%v, %v, %d, %d) = %v, %v, %q", c.spin, c.set, c.ranks, c.cpus, spin, polite, why)
		}
	}
}

// TestProcsMode: one P per rank where ranks outnumber CPUs, unless the
// user set GOMAXPROCS; the default elsewhere.
func TestProcsMode(t *testing.T) {
	for _, c := range []struct {
		set         bool
		ranks, cpus int
		want        int
		say         string
	}{
		{false, 3, 2, 1, "GOMAXPROCS=1: 3 ranks share this host's 2 CPUs (set GOMAXPROCS to choose)"},
		{false, 1024, 2, 1, "GOMAXPROCS=1: 1024 ranks"},
		{false, 2, 2, 0, ""},
		{false, 1, 8, 0, ""},
		{true, 64, 2, 0, ""},
	} {
		got, why := procsMode(c.set, c.ranks, c.cpus)
		if got != c.want || !strings.Contains(why, c.say) || (c.say == "") != (why == "") {
			t.Errorf("procsMode(%v, %d, %d) = %d, %q; want %d, %q", c.set, c.ranks, c.cpus, got, why, c.want, c.say)
		}
	}
}

// TestFirstWait: on a crowded host the first retransmission waits 2 ms per
// rank per CPU, at most GASNET_REQUESTTIMEOUT_MAX, unless the user set it
// or the configured wait is longer.
func TestFirstWait(t *testing.T) {
	const ms = time.Millisecond
	for _, c := range []struct {
		initial, max time.Duration
		set          bool
		ranks, cpus  int
		want         time.Duration
		say          string
	}{
		{100 * ms, 30 * time.Second, false, 1024, 2, 1024 * ms, "first retransmission after 1.024s: 1024 ranks share this host's 2 CPUs"},
		{100 * ms, 30 * time.Second, false, 256, 2, 256 * ms, "after 256ms"},
		{100 * ms, 30 * time.Second, false, 64, 2, 100 * ms, ""},  // 64 ms: the configured wait is longer
		{100 * ms, 30 * time.Second, false, 2, 2, 100 * ms, ""},   // not crowded
		{100 * ms, 30 * time.Second, true, 1024, 2, 100 * ms, ""}, // the user's
		{100 * ms, 500 * ms, false, 1024, 2, 500 * ms, "after 500ms"},
		{100 * ms, 0, false, 1024, 2, 1024 * ms, "after 1.024s"}, // never give up: no cap
	} {
		got, why := firstWait(c.initial, c.max, c.set, c.ranks, c.cpus)
		if got != c.want || !strings.Contains(why, c.say) || (c.say == "") != (why == "") {
			t.Errorf("firstWait(%v, %v, %v, %d, %d) = %v, %q; want %v, %q", c.initial, c.max, c.set, c.ranks, c.cpus, got, why, c.want, c.say)
		}
	}
}

// TestAllGatherOverAMs: all-gathers over active messages on 1 to 13
// ranks, Bruck's (under the dissemination barrier) and over trees (under
// AMTREE, as where ranks outnumber CPUs; and over the two-level tree, in
// groups of three), under loss and duplication, with
// parts of different sizes (empty, and past MaxMedium, so that a round
// spans several messages), between broadcasts of the other sequence; every
// rank gets every part, in rank order.
func TestAllGatherOverAMs(t *testing.T) {
	for _, c := range []struct {
		name string
		algo barrierAlgo
		n    int
	}{
		{"Bruck", barrierDissem, 1}, {"Bruck", barrierDissem, 3}, {"Bruck", barrierDissem, 5}, {"Bruck", barrierDissem, 8},
		{"tree", barrierTree, 1}, {"tree", barrierTree, 2}, {"tree", barrierTree, 5}, {"tree", barrierTree, 8}, {"tree", barrierTree, 13},
		{"hierarchical", barrierHier, 2}, {"hierarchical", barrierHier, 5}, {"hierarchical", barrierHier, 8}, {"hierarchical", barrierHier, 13},
	} {
		n := c.n
		t.Run(fmt.Sprintf("%s/N=%d", c.name, n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				part := func(r, round int) []byte {
					size := []int{0, 7, MaxMedium + 100, 3 * MaxMedium}[(r+round)%4]
					b := make([]byte, size)
					for i := range b {
						b[i] = byte(r*31 + round + i)
					}
					return b
				}
				jn := memNet(amudptest.New(uint64(n), 0.1, 0.05, 100*time.Microsecond))
				jn.barrier = c.algo
				res, _ := runJob(t, n, jn, false, func(j *Job) {
					for round := range 3 {
						parts, err := j.World().AllGather(part(j.Rank(), round))
						if err != nil {
							t.Errorf("rank %d: %v", j.Rank(), err)
							return
						}
						if b, err := j.World().Broadcast(round%n, []byte{byte(j.Rank())}); err != nil || !bytes.Equal(b, []byte{byte(round % n)}) {
							t.Errorf("rank %d: broadcast %d: %q, %v", j.Rank(), round, b, err)
						}
						for r := range n {
							// Appending to a part must not write over the next one's.
							_ = append(parts[(r+n-1)%n], bytes.Repeat([]byte{0xee}, 16)...)
							if !bytes.Equal(parts[r], part(r, round)) {
								t.Errorf("rank %d, all-gather %d: part %d has %d bytes, want %d, or other bytes", j.Rank(), round, r, len(parts[r]), len(part(r, round)))
							}
						}
					}
				})
				want := jobResult{}
				for range n {
					want.Ends = append(want.Ends, "returned")
				}
				if d := cmp.Diff(want, res); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
			})
		})
	}
}
