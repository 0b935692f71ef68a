package conduit

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/amudptest"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

// jobResult is how an in-process job ended.
type jobResult struct {
	Code int      // the code of the first Exit; 0 when none
	Ends []string // per rank: "returned", "exit C" or "terminated"
	Why  string   // why the first abort aborted the job
}

// testRetransmit: quick retransmission, and give-up after 1.1 s of
// silence; over real sockets (real time) runJob scales Max, and so the
// give-up time, as the hang bounds are scaled (testbound): a rank of an
// in-process job under -race, on a loaded machine, can go that long
// without being scheduled, and would be declared unreachable.
var testRetransmit = retransmit.Config{Initial: 5 * time.Millisecond, Backoff: 2, Max: 500 * time.Millisecond, MinRTO: time.Millisecond}

// Over real sockets, a job may run for jobBase and jobPerRank a rank
// (scaled, testbound) before runJob calls it a hang; no test's job takes a
// tenth of that on a quiet machine.
const (
	jobBase    = 20 * time.Second
	jobPerRank = 2 * time.Second
)

// jobNet opens the socket of rank i of an in-process job.
type jobNet struct {
	listen func(i int) (amudp.Transport, error)
	// limit is how long the job may run (virtual time in a synctest
	// bubble) before the test fails; 0: jobBase and jobPerRank a rank,
	// scaled.
	limit time.Duration
	// encrypt encrypts the datagrams.
	encrypt bool
	// barrier is the job's barrier algorithm (the zero value:
	// dissemination).
	barrier barrierAlgo
	// setup, if set, completes the job before its ranks start.
	setup func(lj *localJob)
}

// loopbackShared is loopbackUDP with the ranks sharing memory, as the
// ranks of one host do: amudp.Shared transports that know each other's
// inboxes, and one group, so that Attach puts the segments in shared
// memory, Put, Get and Long reach them by a copy, and the barrier and the
// all-gather synchronise on shared words (by dissemination).
func loopbackShared(t *testing.T) jobNet { return loopbackGroups(t, 0, false) }

// loopbackGroups is loopbackShared with groups of size consecutive ranks
// (0: one group of all), as on hosts of size ranks each, where the
// barrier runs in two levels; crowded, as on hosts with more ranks than
// CPUs: one group of up to eagerAreas ranks synchronises counted, and
// waiting ranks yield the CPU.
func loopbackGroups(t *testing.T, size int, crowded bool) jobNet {
	return loopbackGroupsOver(t, size, crowded, loopbackUDP.listen)
}

// loopbackGroupsOver is loopbackGroups with rank i's UDP transport
// from listen(i).
func loopbackGroupsOver(t *testing.T, size int, crowded bool, listen func(int) (amudp.Transport, error)) jobNet {
	var shared []*amudp.Shared
	jn := loopbackUDP
	jn.listen = func(i int) (amudp.Transport, error) {
		u, err := listen(i)
		if err != nil {
			return nil, err
		}
		s, err := amudp.NewShared(u, amudp.InboxSize(16))
		if err != nil {
			u.Close()
			t.Fatal(err)
		}
		shared = append(shared, s)
		return s, nil
	}
	jn.setup = func(lj *localJob) {
		n := len(lj.jobs)
		leaders := make([]int, n)
		addrs := make([]netip.AddrPort, n)
		for r := range leaders {
			if size > 0 {
				leaders[r] = r - r%size
			}
			addrs[r] = shared[r].LocalAddr()
		}
		for r, j := range lj.jobs {
			group := shmGroup(leaders, r)
			var inboxes []amudp.Inbox
			for _, g := range group {
				inboxes = append(inboxes, amudp.Inbox{Addr: addrs[g], Path: shared[g].Inbox()})
			}
			shared[r].SetInboxes(inboxes)
			shared[r].SetAllShared(len(group) == n)
			j.nb.group = group
			j.ep.SetPeerSegments(j.peerView)
			algo := barrierDissem
			if crowded {
				algo = barrierTree
			}
			j.setPlan(algo, leaders)
			if len(group) == n && n > 1 {
				w := newWords(shared[r], addrs, group, r)
				w.yield, w.fatal = crowded, j.fatal
				w.setWay(algo)
				j.words = w
			}
		}
	}
	return jn
}

// barrierHier, as a jobNet's barrier, has the job's collectives run over
// trees in two levels, as on hosts of three ranks each, with no shared
// memory.
const barrierHier barrierAlgo = 255

// memNet is a jobNet over an in-memory network, for synctest bubbles.
func memNet(n *amudptest.Network) jobNet {
	return jobNet{listen: func(i int) (amudp.Transport, error) { return n.Listen(i), nil }, limit: time.Hour}
}

// loopbackUDP is a jobNet over real UDP sockets on loopback; the kernel
// gives the race detector no happens-before edges between ranks. Its time
// is real: the job's limit and give-up time are scaled (runJob).
var loopbackUDP = jobNet{listen: func(int) (amudp.Transport, error) {
	return amudp.ListenUDP(netip.MustParseAddrPort("127.0.0.1:0"), amudp.DefaultSocketBufferInitial)
}}

// runJob runs body on n ranks of one in-process job over jn and returns how
// the job ended. Over an in-memory network, call it inside a synctest
// bubble, where time is virtual. A job still running after its limit
// (jn.limit, or one that grows with n) fails the test (its ranks are then
// told to terminate, so that the test ends).
//
// With rcvThread, a background goroutine polls each rank's endpoint, as
// GASNET_RCV_THREAD=1 has it, so handlers run on another goroutine than the
// program's.
func runJob(t *testing.T, n int, jn jobNet, rcvThread bool, body func(j *Job)) (jobResult, []*Job) {
	t.Helper()
	limit, rc := jn.limit, testRetransmit
	if limit == 0 {
		limit = testbound.For(t, jobBase+time.Duration(n)*jobPerRank)
		rc.Max = testbound.Scale(rc.Max)
	}
	lj, err := newLocalJob(n, jn.listen, amudp.Config{Secret: []byte("job test"), NetworkDepth: 16,
		Retransmit: rc, Polite: true, Encrypt: jn.encrypt}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	lj.setBarrier(jn.barrier)
	if jn.setup != nil {
		jn.setup(lj)
	}
	if jn.barrier == barrierHier {
		// Groups of three consecutive ranks, as on hosts of three.
		leaders := make([]int, n)
		for r := range leaders {
			leaders[r] = r - r%3
		}
		for _, j := range lj.jobs {
			j.setPlan(barrierDissem, leaders)
		}
	}
	c := lj.c
	var pollers sync.WaitGroup
	if rcvThread {
		for _, ep := range c.eps {
			pollers.Go(func() { progress(ep) })
		}
	}
	done := lj.start(body)
	select {
	case <-done:
	case <-time.After(limit):
		c.mu.Lock()
		t.Errorf("job still running after %v; ends so far %q", limit, c.ends)
		c.mu.Unlock()
		c.terminating.Store(true)
		c.wakeAll()
		heed := time.Minute
		if jn.limit == 0 {
			heed = testbound.For(t, 10*time.Second)
		}
		select {
		case <-done:
		case <-time.After(heed):
			// The ranks did not heed the console: closing their
			// endpoints ends every wait, so the bubble can end.
			t.Errorf("ranks still running %v after they were told to terminate", heed)
			lj.close()
			<-done
		}
	}
	lj.close()
	pollers.Wait()
	return jobResult{Code: c.code, Ends: c.ends, Why: c.why}, lj.jobs
}

func pattern(seed, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(seed*131 + i*7 + i>>8)
	}
	return b
}

// TestJobUnderLoss runs a whole conduit program on 4 in-process ranks over
// links that drop 20% and duplicate 5% of the datagrams: Attach, all-gather,
// Put and Get of several chunks each, client requests, barriers. Every
// handler runs exactly once, every byte arrives, and what a barrier orders
// is visible after it (the race detector checks the segment reads).
func TestJobUnderLoss(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		for _, rcv := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/rcvthread=%v", seed, rcv), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					lnet := amudptest.New(seed, 0.20, 0.05, 300*time.Microsecond)
					jobProgram(t, memNet(lnet), rcv)
					if lnet.Dropped() == 0 || lnet.Duplicated() == 0 {
						t.Errorf("the network dropped %d and duplicated %d datagrams: the test did not test loss", lnet.Dropped(), lnet.Duplicated())
					}
				})
			})
		}
	}
}

// TestJobUnderForgery: an attacker who sees every datagram and can spoof
// its source sends, for 30% of them, a copy with one bit flipped, ahead of
// the real one, and replays 5% of them 50 ms later, on top of loss and
// duplication. With payloads authenticated (the default) and with
// encryption, the program's results are exact (every request runs once,
// every byte of Put and Get arrives), no forged datagram aborts a rank,
// and each is dropped and counted. (Headers only, a flipped payload bit
// passes: see wire's TestSealedDatagramsDropped.)
func TestJobUnderForgery(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3, 4, 5} {
		for _, encrypt := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed%d/encrypt=%v", seed, encrypt), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					lnet := amudptest.New(seed, 0.05, 0.05, 300*time.Microsecond)
					lnet.SetForgery(0.3)
					lnet.SetReplay(0.05, 50*time.Millisecond)
					jn := memNet(lnet)
					jn.encrypt = encrypt
					jobs := jobProgram(t, jn, false)
					var bad uint64
					for _, j := range jobs {
						s := j.ep.Stats()
						bad += s.BadMAC + s.BadDatagrams
					}
					if lnet.Forged() == 0 || bad < uint64(lnet.Forged())*9/10 || lnet.Replayed() == 0 {
						t.Errorf("%d forged datagrams, %d dropped as not opening or malformed; %d replayed", lnet.Forged(), bad, lnet.Replayed())
					}
				})
			})
		}
	}
}

// TestJobOverUDP runs the same program over loopback UDP with a background
// poller: the kernel carries the ranks' messages, so only the library's own
// synchronisation (a barrier's fence) orders the poller's writes into the
// segment before the program's reads, and the race detector checks it.
func TestJobOverUDP(t *testing.T) {
	jobProgram(t, loopbackUDP, true)
}

// TestJobOverSharedMemory runs the same program with the ranks sharing
// memory: every Put and Get is a copy between the segments' mappings, and
// the messages go through the inboxes.
func TestJobOverSharedMemory(t *testing.T) {
	jobs := jobProgram(t, loopbackShared(t), true)
	for _, j := range jobs {
		if p, g := j.nb.puts.Load(), j.nb.gets.Load(); p == 0 || g == 0 {
			t.Errorf("rank %d: %d Puts and %d Gets by a copy, want some of each", j.rank, p, g)
		}
		if v := j.LocalView((j.rank + 1) % len(jobs)); v == nil || len(v) != j.SegmentSize((j.rank+1)%len(jobs)) {
			t.Errorf("rank %d: LocalView of the next rank: %d bytes", j.rank, len(v))
		}
	}
}

// jobProgram is a whole conduit program on 4 ranks: Attach, all-gather, Put
// and Get of several chunks each, client requests, barriers.
func jobProgram(t *testing.T, jn jobNet, rcvThread bool) []*Job {
	const (
		n       = 4
		perPeer = 150
		segSize = 3 * MaxLong
		putLen  = 2*MaxLong + 1234 // three Long chunks, three Medium ones back
	)
	var mu sync.Mutex
	runs := make([][][]int, n) // runs[dst][src][i]
	for d := range runs {
		runs[d] = make([][]int, n)
		for s := range runs[d] {
			runs[d][s] = make([]int, perPeer)
		}
	}
	var got [n]atomic.Int64
	res, jobs := runJob(t, n, jn, rcvThread, func(j *Job) {
		me := j.Rank()
		j.nb.counted = true // as GASNET_STATS=1 has it
		seg, err := j.Attach([]HandlerEntry{{130, func(tk *Token, a []uint32, _ []byte) {
			mu.Lock()
			runs[me][a[0]][a[1]]++
			mu.Unlock()
			got[me].Add(1)
		}}}, segSize)
		if err != nil {
			t.Errorf("rank %d: Attach: %v", me, err)
			return
		}
		for r := range n {
			if s := j.SegmentSize(r); s != segSize {
				t.Errorf("rank %d: SegmentSize(%d) = %d, want %d", me, r, s, segSize)
			}
		}
		parts, err := j.World().AllGather([]byte(fmt.Sprintf("rank %d", me)))
		if err != nil {
			t.Errorf("rank %d: AllGather: %v", me, err)
			return
		}
		for r, p := range parts {
			if string(p) != fmt.Sprintf("rank %d", r) {
				t.Errorf("rank %d: AllGather part %d = %q", me, r, p)
			}
		}
		next, prev := (me+1)%n, (me+n-1)%n
		if err := j.Put(next, 7, pattern(me, putLen)); err != nil {
			t.Errorf("rank %d: Put: %v", me, err)
			return
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: Barrier: %v", me, err)
			return
		}
		if !bytes.Equal(seg[7:7+putLen], pattern(prev, putLen)) {
			t.Errorf("rank %d: segment after the barrier does not hold rank %d's Put", me, prev)
		}
		back := make([]byte, putLen)
		if err := j.Get(next, 7, back); err != nil {
			t.Errorf("rank %d: Get: %v", me, err)
			return
		}
		if !bytes.Equal(back, pattern(me, putLen)) {
			t.Errorf("rank %d: Get from rank %d returned other bytes than this rank put there", me, next)
		}
		for i := range perPeer {
			for d := range n {
				if d != me {
					if err := j.RequestShort(d, 130, uint32(me), uint32(i)); err != nil {
						t.Errorf("rank %d: RequestShort: %v", me, err)
						return
					}
				}
			}
		}
		if err := j.WaitUntil(func() bool { return got[me].Load() == perPeer*(n-1) }); err != nil {
			t.Errorf("rank %d: WaitUntil: %v", me, err)
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: Barrier: %v", me, err)
		}
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned", "returned", "returned"}}, res); d != "" {
		t.Errorf("job end (-want +got):\n%s", d)
	}
	for d := range runs {
		for s := range runs[d] {
			for i, k := range runs[d][s] {
				if d != s && k != 1 {
					t.Errorf("request %d from rank %d ran %d times at rank %d", i, s, k, d)
				}
			}
		}
	}
	return jobs
}

// TestJobExitEndsTheOthers: one rank calls Exit(3) while the others wait in
// a barrier it never enters. The job's code is 3, and every other rank ends
// at its wait, told by the console, a quarter of the exit timeout later (the
// time a collective has to complete), not at a polite sleep's cap.
func TestJobExitEndsTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // virtual time
		res, _ := runJob(t, 3, memNet(amudptest.New(1, 0.1, 0, 0)), false, func(j *Job) {
			if j.Rank() == 2 {
				time.Sleep(10 * time.Millisecond) // the others wait in the barrier
				j.Exit(3)
				t.Error("Exit returned")
			}
			j.World().Barrier()
			t.Errorf("rank %d: Barrier returned although rank 2 never entered it", j.Rank())
		})
		want := jobResult{Code: 3, Ends: []string{"terminated", "terminated", "exit 3"}}
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
		// runJob's exit timeout is 1 s: the ranks leave their barrier
		// 250 ms after the Terminate.
		if d := time.Since(start); d < 260*time.Millisecond || d > 310*time.Millisecond {
			t.Errorf("the job took %v of virtual time; want 260 ms: 10 ms, then a quarter of the exit timeout", d)
		}
	})
}

// TestJobExitEndsSendersWaitingForCredit: one rank calls Exit(24) while the
// others flood it with requests, which it no longer answers: their requests
// wait for credit, and they end there a quarter of the exit timeout after
// the Terminate, as a collective's wait does, not when a request to the
// silent rank is given up (2 s here) or later.
func TestJobExitEndsSendersWaitingForCredit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // virtual time
		res, _ := runJob(t, 3, memNet(amudptest.New(1, 0, 0, 0)), false, func(j *Job) {
			if _, err := j.Attach([]HandlerEntry{{130, func(*Token, []uint32, []byte) {}}}, 0); err != nil {
				t.Error(err)
				return
			}
			if j.Rank() == 0 {
				time.Sleep(10 * time.Millisecond) // the others run out of credit
				j.Exit(24)
			}
			for {
				if err := j.RequestShort(0, 130); err != nil {
					t.Errorf("rank %d: %v", j.Rank(), err)
					return
				}
			}
		})
		want := jobResult{Code: 24, Ends: []string{"exit 24", "terminated", "terminated"}}
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
		if d := time.Since(start); d < 260*time.Millisecond || d > 310*time.Millisecond {
			t.Errorf("the job took %v of virtual time; want 260 ms: 10 ms, then a quarter of the exit timeout", d)
		}
	})
}

// TestJobUndeliverableAborts: a rank whose peer is cut off from the network
// gives its request up after the peer's silence, and the default handler 0
// aborts the job with code 1; the waiting ranks end.
func TestJobUndeliverableAborts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lnet := amudptest.New(1, 0, 0, 0)
		res, _ := runJob(t, 2, memNet(lnet), false, func(j *Job) {
			if _, err := j.Attach([]HandlerEntry{{130, func(*Token, []uint32, []byte) {}}}, 0); err != nil {
				t.Error(err)
				return
			}
			if j.Rank() == 0 {
				lnet.SetDown(j.ep.LocalAddr(), true)
				if err := j.RequestShort(1, 130); err != nil {
					t.Error(err)
				}
			}
			j.WaitUntil(func() bool { return false })
		})
		want := jobResult{Code: 1, Ends: []string{"abort 1", "terminated"}}
		if !strings.Contains(res.Why, "rank 1") {
			t.Errorf("the abort says %q, which names no rank 1", res.Why)
		}
		res.Why = ""
		if d := cmp.Diff(want, res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// TestJobMisuseErrors: calls made too early, to the library's handlers or
// outside the segment return errors naming what is wrong, and the job goes
// on.
func TestJobMisuseErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		res, _ := runJob(t, 2, memNet(amudptest.New(1, 0, 0, 0)), false, func(j *Job) {
			check := func(what string, err, want error) {
				if !errors.Is(err, want) {
					t.Errorf("rank %d: %s: %v, want %v", j.Rank(), what, err, want)
				}
			}
			buf := make([]byte, 8)
			_, err := j.PutNB(1-j.Rank(), 0, buf)
			check("Put before Attach", err, ErrNotAttached)
			_, err = j.GetNB(1-j.Rank(), 0, buf)
			check("Get before Attach", err, ErrNotAttached)
			check("request before Attach", j.RequestShort(1-j.Rank(), 130), ErrNotAttached)
			_, err = j.Attach([]HandlerEntry{{130, nil}}, 64)
			check("nil handler", err, ErrHandlerTable)
			_, err = j.Attach([]HandlerEntry{{65, func(*Token, []uint32, []byte) {}}}, 64)
			check("library handler index", err, ErrHandlerIndex)
			if _, err := j.Attach([]HandlerEntry{{130, func(*Token, []uint32, []byte) {}}}, 64); err != nil {
				t.Errorf("rank %d: Attach after refused tables: %v", j.Rank(), err)
				return
			}
			_, err = j.Attach(nil, 64)
			check("second Attach", err, ErrAttached)
			check("request to handler 65", j.RequestShort(1-j.Rank(), 65), ErrHandlerIndex)
			check("Put past the segment", j.Put(1-j.Rank(), 60, buf), ErrOutOfSegment)
			check("Get past the segment", j.Get(1-j.Rank(), 1<<40, buf), ErrOutOfSegment)
			if err := j.Put(1-j.Rank(), 56, buf); err != nil {
				t.Errorf("rank %d: Put at the segment's end: %v", j.Rank(), err)
			}
			j.World().Barrier()
		})
		if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
	})
}

// TestJobCollectivesFromSeveralGoroutines: two goroutines of each rank call
// Barrier and AllGather at once; the race detector finds nothing and every
// call completes.
func TestJobCollectivesFromSeveralGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rounds = 10
		res, jobs := runJob(t, 3, memNet(amudptest.New(2, 0.1, 0, 100*time.Microsecond)), true, func(j *Job) {
			var wg sync.WaitGroup
			for g := range 2 {
				wg.Go(func() {
					for range rounds {
						if err := j.World().Barrier(); err != nil {
							t.Error(err)
						}
						if parts, err := j.World().AllGather([]byte{byte(j.Rank()), byte(g)}); err != nil || len(parts) != 3 {
							t.Errorf("AllGather: %d parts, %v", len(parts), err)
						}
					}
				})
			}
			wg.Wait()
		})
		if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned", "returned"}}, res); d != "" {
			t.Errorf("(-want +got):\n%s", d)
		}
		for _, j := range jobs {
			if j.world.seq != 4*rounds {
				t.Errorf("rank %d made %d collectives, want %d", j.rank, j.world.seq, 4*rounds)
			}
		}
	})
}
