package amudp

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

// TestSettleRun: a run of answers gives back the credits of the requests
// it names that are outstanding, none of those given up (at or below the
// floor), and nothing for a run that names requests not reserved, more
// than are outstanding, or more than maxRun.
func TestSettleRun(t *testing.T) {
	for _, tc := range []struct {
		name        string
		reserved    int    // requests reserved, numbered 1..reserved
		gaveUp      int    // the first gaveUp of them given up
		first, last uint32 // the run
		want        int
		left        int // outstanding after
	}{
		{"one", 3, 0, 2, 2, 1, 2},
		{"all", 3, 0, 1, 3, 3, 0},
		{"a later run", 5, 0, 4, 5, 2, 3},
		{"past the last reserved", 3, 0, 2, 4, 0, 3},
		{"from before the floor", 3, 2, 1, 3, 1, 0},
		{"all given up", 3, 3, 1, 3, 0, 0},
		{"partly given up", 6, 3, 2, 5, 2, 1},
		{"reversed", 3, 0, 3, 1, 0, 3},
		{"longer than maxRun", 3, 0, 1<<32 + 3 - maxRun, 3, 0, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l lane
			for range tc.gaveUp {
				l.reserve(1 << 20)
			}
			if tc.gaveUp > 0 {
				l.giveUp()
			}
			for range tc.reserved - tc.gaveUp {
				l.reserve(1 << 20)
			}
			if got := l.settleRun(tc.first, tc.last); got != tc.want || l.outstanding() != tc.left {
				t.Errorf("settleRun(%d, %d) = %d, %d left; want %d, %d left", tc.first, tc.last, got, l.outstanding(), tc.want, tc.left)
			}
		})
	}
}

// TestDirectRuns: requests waiting in a rank's inbox when it starts to
// poll, whose handler does not reply, are answered in runs, fewer records
// than requests, each handler running once; the rank's wait ends once
// the last one ran, and the credits all come back although the rank
// polls no more after it, and while it waits on; so with a network
// depth of 1 (one request a run).
func TestDirectRuns(t *testing.T) {
	for _, depth := range []int{0, 1} {
		var eps []*Endpoint
		if depth == 0 {
			eps = sharedJob(t, 2, DefaultInbox)
		} else {
			saved := listen
			listen = listenShared(t, DefaultInbox)
			eps = newJob(t, 2, Config{NetworkDepth: depth})
			listen = saved
		}
		const k = 64
		var ran atomic.Int32
		eps[1].Register(130, func(*Token, []uint32, []byte) { ran.Add(1) })
		waited := make(chan error, 1)
		sends := k
		if depth > 0 {
			sends = depth // what the credit lets go before rank 1 polls
		}
		go func() {
			// Rank 1 polls once every request waits, until the last one
			// ran, and never again.
			for eps[1].tr.(*Shared).Stats().ShmReceived == 0 && eps[0].Outstanding() < sends {
				time.Sleep(time.Millisecond)
			}
			waited <- eps[1].WaitUntil(func() bool { return ran.Load() == k })
		}()
		for i := range k {
			if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case err := <-waited:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(testbound.For(t, 10*time.Second)):
			t.Fatalf("depth %d: rank 1's wait for %d requests did not end (%d ran)", depth, k, ran.Load())
		}
		waitFor(t, eps[0], "every credit back", func() bool { return eps[0].Outstanding() == 0 })
		if n := ran.Load(); n != k {
			t.Errorf("depth %d: %d handlers ran, want %d", depth, n, k)
		}
		if r := eps[0].tr.(*Shared).Stats().ShmReceived; depth == 0 && r > k/2 {
			t.Errorf("%d requests answered in %d records, want runs", k, r)
		}
		// Rank 1 waits on (serve) and rank 0 sends more: the runs its
		// spin holds come back at its full passes.
		serve(t, eps[1])
		for i := range k {
			if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, eps[0], "every credit back while rank 1 waits", func() bool { return eps[0].Outstanding() == 0 })
		if n := ran.Load(); n != 2*k {
			t.Errorf("depth %d: %d handlers ran, want %d", depth, n, 2*k)
		}
		if d := eps[0].Stats().DupReplies; d != 0 {
			t.Errorf("depth %d: %d duplicate replies", depth, d)
		}
	}
}

// TestDirectRun: an answer settles its own request, an automatic reply
// with one pair the run from the pair to its own number (across 2^32),
// and one with more pairs, or a run longer than maxRun, nothing.
func TestDirectRun(t *testing.T) {
	msg := func(kind Kind, num uint32, pairs ...uint32) *wire.Message {
		m := &wire.Message{Header: wire.Header{Kind: kind, Slot: uint16(num >> 16), Seq: uint16(num)}}
		for _, p := range pairs {
			m.Payload = wire.AppendAckPair(m.Payload, uint16(p>>16), uint16(p))
		}
		return m
	}
	for _, tc := range []struct {
		name        string
		m           *wire.Message
		first, last uint32
		ok          bool
	}{
		{"a reply", msg(KindShortReply, 70000), 70000, 70000, true},
		{"one automatic reply", msg(KindAutoReply, 9), 9, 9, true},
		{"a run", msg(KindAutoReply, 70000, 69990), 69990, 70000, true},
		{"a run across 2^32", msg(KindAutoReply, 2, 1<<32-3), 1<<32 - 3, 2, true},
		{"two pairs", msg(KindAutoReply, 9, 3, 5), 0, 0, false},
		{"a run too long", msg(KindAutoReply, maxRun, 0), 0, maxRun, false},
		{"a reversed run", msg(KindAutoReply, 5, 9), 9, 5, false},
	} {
		first, last, ok := directRun(tc.m)
		if ok != tc.ok || ok && (first != tc.first || last != tc.last) {
			t.Errorf("%s: directRun = %d, %d, %v; want %d, %d, %v", tc.name, first, last, ok, tc.first, tc.last, tc.ok)
		}
	}
}

// TestAutoReplyHolds: a spinning poller (holdAuto) holds the automatic
// answers to consecutive requests as a run, and sends it as one record
// when a request breaks the run or asks for its answer at once (answered
// automatically or by its handler), when the run reaches a quarter of the
// network depth, or at a full pass once the first run held is autoHold
// old; a poller that does not spin answers each at once.
func TestAutoReplyHolds(t *testing.T) {
	type call struct {
		num uint32
		now bool
	}
	limit := uint32(DefaultNetworkDepth / 4)
	run := func(first, n uint32) []call {
		var cs []call
		for i := range n {
			cs = append(cs, call{num: first + i})
		}
		return cs
	}
	for _, tc := range []struct {
		name  string
		hold  bool
		reply bool // after the calls, a request asking at once answered by its handler
		calls []call
		sent  uint64 // records sent after the calls
		pass  string // "young", "old": then a full pass, which sends...
		after uint64 // ...this many records in all
	}{
		{"not spinning", false, false, run(1, 3), 3, "", 3},
		{"a run held", true, false, run(1, 3), 0, "", 0},
		{"asked at once", true, false, append(run(1, 2), call{3, true}), 1, "", 1},
		{"broken", true, false, append(run(1, 2), call{num: 5}), 1, "", 1},
		{"a quarter of the depth", true, false, run(1, limit+1), 1, "", 1},
		{"held on at a full pass", true, false, run(1, 3), 0, "young", 0},
		{"sent at a full pass once old", true, false, run(1, 3), 0, "old", 1},
		{"a broken run's rest sent once old", true, false, append(run(1, 2), call{num: 9}), 1, "old", 2},
		{"a reply to a request asking at once", true, true, run(1, 2), 1, "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eps := sharedJob(t, 2, DefaultInbox)
			e := eps[1]
			l := e.lane(0, false)
			if l == nil {
				t.Fatal("no lane to rank 0")
			}
			sent := func() uint64 { return e.tr.(*Shared).Stats().ShmSent }
			e.pollMu.Lock()
			defer e.pollMu.Unlock()
			e.clock = e.now()
			e.holdAuto = tc.hold
			defer func() { e.holdAuto = false }()
			for _, c := range tc.calls {
				e.autoReply(l, c.num, c.now)
			}
			if tc.reply {
				e.answeredNow(l, true)
			}
			if got := sent(); got != tc.sent {
				t.Fatalf("%d records sent after the calls, want %d", got, tc.sent)
			}
			switch tc.pass {
			case "young":
				// Held an hour from now: young whatever the scheduler
				// does between this and the pass's clock.
				e.autoSince = e.now() + retransmit.Time(time.Hour)
			case "old":
				e.autoSince = e.now() - retransmit.Time(2*autoHold)
			default:
				return
			}
			if err := e.pollLocked(nil); err != nil {
				t.Fatal(err)
			}
			if got := sent(); got != tc.after {
				t.Errorf("%d records sent after a full pass, want %d", got, tc.after)
			}
		})
	}
}

// TestDirectAskAtOnce: a direct request asks for its answer at once
// (wire.FlagAckNow) when it is its sender's only one outstanding to the
// rank, or uses up the credit; the others let the rank hold theirs.
func TestDirectAskAtOnce(t *testing.T) {
	saved := listen
	listen = listenShared(t, DefaultInbox)
	eps := newJob(t, 2, Config{NetworkDepth: 3})
	listen = saved
	for i := range 3 {
		if err := eps[0].RequestShort(1, 130, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	var got []bool
	var m wire.Message
	for {
		d, ok := eps[1].shared.peekDirect()
		if !ok {
			break
		}
		if err := wire.Decode(d, &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m.Flags&wire.FlagAckNow != 0)
		eps[1].shared.Release()
	}
	if want := []bool{true, false, true}; !slices.Equal(got, want) {
		t.Errorf("asked at once: %v, want %v", got, want)
	}
}
