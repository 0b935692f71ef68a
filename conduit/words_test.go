package conduit

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/udpconduit/udpconduit/amudp"
)

// wordModes are the shapes of the groups whose collectives run on shared
// words: one group of every rank (dissemination; counted, with yielding
// waits where ranks outnumber CPUs; gathered and released, as in a group
// larger than eagerAreas, whose members map only the leader's area), and
// groups of a few consecutive ranks, whose leaders exchange messages.
var wordModes = []wordMode{
	{"one group", 0, false, false},
	{"one group crowded", 0, true, false},
	{"one group gathered", 0, true, true},
	{"groups of 3", 3, false, false},
	{"groups of 2 crowded", 2, true, false},
}

type wordMode struct {
	name     string
	size     int
	crowded  bool
	gathered bool // eagerAreas 1 for the test
}

// quiet reports whether collectives whose data fit their slots send no
// datagram: in one group, unless gathered, where data that fit their
// slots but not the leader's buffer go over messages (TestWordsLazyAreas).
func (m wordMode) quiet() bool { return m.size == 0 && !m.gathered }

// net returns the job network of the mode for t.
func (m wordMode) net(t *testing.T) jobNet {
	if m.gathered {
		e := eagerAreas
		eagerAreas = 1
		t.Cleanup(func() { eagerAreas = e })
	}
	return loopbackGroups(t, m.size, m.crowded)
}

// sentBy counts the datagrams j's endpoint sent and the records it put
// into inboxes, direct messages among them (a datagram through an inbox
// counts twice, which the tests' checks of nothing sent do not mind).
func sentBy(j *Job) uint64 {
	n := j.ep.Stats().Sent
	if s, ok := j.ep.Transport().(*amudp.Shared); ok {
		n += s.Stats().ShmSent
	}
	return n
}

// TestWordsBarrier: over shared words, on 1 to 8 ranks entering in an
// order that changes from barrier to barrier, no rank leaves a barrier
// before every rank has entered it, through Barrier and through
// BarrierNB and its Wait with work between them. In one group no
// barrier sends a datagram; in groups, only the leaders send between
// groups.
func TestWordsBarrier(t *testing.T) {
	for _, m := range wordModes {
		for _, n := range []int{1, 2, 3, 5, 8} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				const barriers = 40
				var entered [barriers]atomic.Int32
				var sent, udp [8]uint64
				res, jobs := runJob(t, n, m.net(t), false, func(j *Job) {
					me := j.Rank()
					before, beforeUDP := sentBy(j), j.ep.Stats().Sent
					enterBarriers(t, j, entered[:], 100*time.Microsecond)
					sent[me], udp[me] = sentBy(j)-before, j.ep.Stats().Sent-beforeUDP
				})
				want := jobResult{Ends: slices.Repeat([]string{"returned"}, n)}
				if d := cmp.Diff(want, res); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
				for r, j := range jobs {
					if n > 1 && (j.words != nil) != (len(j.nb.group) == n) {
						t.Errorf("rank %d: words %v, in a group of %d of %d", r, j.words != nil, len(j.nb.group), n)
					}
					if lead := j.nb.group[0] == r; !lead && udp[r] != 0 {
						t.Errorf("rank %d, not a leader, sent %d datagrams between hosts in %d barriers", r, udp[r], barriers)
					}
					if m.size == 0 && sent[r] != 0 {
						t.Errorf("rank %d of a job of one group sent %d datagrams in %d barriers", r, sent[r], barriers)
					}
				}
			})
		}
	}
}

// TestWordsAllGather: an all-gather over shared words returns every part
// in rank order, parts of every size: empty, the largest a slot takes, one
// byte more (the all-gather then runs over messages, on every rank), and,
// on eight ranks, parts that fit their slots but not together in the
// leader's buffer. Appending to a part never writes over the next. In one
// group, all-gathers whose parts fit (after one whose parts fit, whose
// messages nothing answers) send no datagram but answers to
// retransmissions of earlier ones.
func TestWordsAllGather(t *testing.T) {
	for _, m := range wordModes {
		for _, n := range []int{1, 2, 5, 8} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				sizes := []int{0, 7, maxPost, maxPost + 1, 1500}
				part := func(r, round int) []byte {
					size := sizes[(r+round)%len(sizes)]
					if round >= 10 {
						size = 1600 // 8 of them overflow the leader's buffer
					}
					b := make([]byte, size)
					for i := range b {
						b[i] = byte(r*31 + round + i)
					}
					return b
				}
				var quiet, resent [8]uint64
				res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
					fitBefore := false
					// fresh counts the datagrams that are neither
					// retransmissions nor resent replies.
					fresh := func() uint64 { s := j.ep.Stats(); return sentBy(j) - s.Retransmits - s.ReplyResends }
					defer func() { resent[j.Rank()] = j.ep.Stats().Retransmits }()
					for round := range 14 {
						before := fresh()
						parts, err := j.World().AllGather(part(j.Rank(), round))
						if err != nil {
							t.Errorf("rank %d: %v", j.Rank(), err)
							return
						}
						fit := true
						for r := range n {
							fit = fit && len(part(r, round)) <= maxPost
							_ = append(parts[(r+n-1)%n], bytes.Repeat([]byte{0xee}, 16)...)
							if !bytes.Equal(parts[r], part(r, round)) {
								t.Errorf("rank %d, all-gather %d: part %d has %d bytes, want %d, or other bytes", j.Rank(), round, r, len(parts[r]), len(part(r, round)))
							}
						}
						if fit && fitBefore { // no answer to an earlier one's messages
							quiet[j.Rank()] += fresh() - before
						}
						fitBefore = fit
					}
				})
				checkQuiet(t, res, m.quiet(), quiet[:n], resent[:n], "all-gathers whose parts fit their slots")
			})
		}
	}
}

// TestWordsLayout: the words of an area lie each on its own cache line
// where several ranks write them, apart from each other, the slots and the
// leader's buffer, all within the area; the docs say what a slot takes.
func TestWordsLayout(t *testing.T) {
	type span struct {
		name     string
		off, end int
	}
	var spans []span
	for _, k := range []struct {
		name string
		g    groupSync
	}{{"collectives", syncColl}} {
		spans = append(spans, span{k.name + " arrive", k.g.arrive, k.g.arrive + 64}, span{k.name + " release", k.g.release, k.g.release + 64},
			span{k.name + " rounds", k.g.rounds, k.g.rounds + 8*maxGroupRounds})
	}
	spans = append(spans, span{"slots", offSlots, offSlots + 2*slotSize}, span{"buffer where counted", offCombined, offStaged}, span{"staged posts", offStaged, amudp.AreaSize})
	for i, a := range spans {
		if a.off%64 != 0 && !strings.HasSuffix(a.name, "rounds") || a.off >= a.end || a.end > amudp.AreaSize {
			t.Errorf("%s at [%d, %d): not aligned, or outside an area of %d bytes", a.name, a.off, a.end, amudp.AreaSize)
		}
		for _, b := range spans[i+1:] {
			if a.off < b.end && b.off < a.end {
				t.Errorf("%s at [%d, %d) overlaps %s at [%d, %d)", a.name, a.off, a.end, b.name, b.off, b.end)
			}
		}
	}
	// The words of the count's line and of the release line: each of
	// its own, on its line.
	type lineWord struct {
		name string
		off  int
	}
	for _, l := range []struct {
		at    int
		words []lineWord
	}{
		{syncColl.arrive, []lineWord{{"collectives' count", syncColl.arrive}, {"start-up's count", syncStart.arrive}, {"agreement", offAgree}, {"accumulator", offAcc}}},
		{syncColl.release, []lineWord{{"collectives' release", syncColl.release}, {"start-up's release", syncStart.release}, {"verdict", offVerdict}, {"sleepers", offSleepers}, {"reduction's result", offResult}}},
	} {
		line := map[int]string{}
		for _, w := range l.words {
			if w.off%8 != 0 || w.off/64 != l.at/64 || line[w.off] != "" {
				t.Errorf("%s at %d: not a word of its own on the line [%d, %d) (%q there)", w.name, w.off, l.at, l.at+64, line[w.off])
			}
			line[w.off] = w.name
		}
	}
	// The staged posts: a line for each rank of a counted group, in the
	// last page of the inbox's header (the area begins 256 bytes in).
	if stagedLines < eagerAreas || (offStaged+256)%4096 != 0 || offStaged+stagedLines*stagedSize != amudp.AreaSize {
		t.Errorf("staged posts at %d: %d lines for groups counted up to %d ranks, not the header's last page", offStaged, stagedLines, eagerAreas)
	}
	if maxPost != 1632 {
		t.Errorf("slots take data of up to %d bytes; the docs say 1632", maxPost)
	}
}

// TestWordsTreeCollectives: broadcasts from every root, reductions to
// every root and all-reduces, of uint64 and float64 vectors under each
// operator, return what they return over messages, with data of every
// size: empty, the largest a slot takes, and one element or byte more
// (which runs over messages, on every rank). Every rank of an all-reduce
// gets the same bits. In one group, those whose data fit (after one whose
// data fit) send no datagram.
func TestWordsTreeCollectives(t *testing.T) {
	for _, m := range wordModes {
		for _, n := range []int{1, 2, 5, 8} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				lens := []int{0, 1, 3, maxPost / 8, maxPost/8 + 1}
				var quiet [8]uint64
				var sums [8][]float64
				res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
					me := j.Rank()
					fitBefore := false
					for round := range 2 * len(lens) {
						before := sentBy(j)
						root := round % n
						k := lens[round%len(lens)]
						fit := 8*k <= maxPost
						data := bytes.Repeat([]byte{byte(root + round)}, 8*k)
						if round%2 == 1 && fit {
							data = append(data, make([]byte, maxPost-len(data))...)
						}
						got, err := j.World().Broadcast(root, append(data, byte(me))[:len(data)])
						if err != nil || !bytes.Equal(got, data) {
							t.Errorf("rank %d: broadcast %d from %d: %d bytes, %v; want %d bytes", me, round, root, len(got), err, len(data))
						}
						v := make([]uint64, k)
						for i := range v {
							v[i] = uint64(me*100 + i + round)
						}
						op := []Op{Sum, Min, Max}[round%3]
						red, err := Reduce(j.World(), root, op, v)
						full := make([]uint64, k)
						for i := range full {
							switch op {
							case Sum:
								full[i] = uint64(100*n*(n-1)/2 + n*(i+round))
							case Min:
								full[i] = uint64(i + round)
							case Max:
								full[i] = uint64(100*(n-1) + i + round)
							}
						}
						want := full
						if me != root {
							want = nil
						}
						if err != nil || !cmp.Equal(red, want, cmpopts.EquateEmpty()) || (me != root) != (red == nil) {
							t.Errorf("rank %d: reduce %d to %d (%v): %v, %v; want %v", me, round, root, op, red, err, want)
						}
						all, err := AllReduce(j.World(), op, v)
						if err != nil || !cmp.Equal(all, full, cmpopts.EquateEmpty()) {
							t.Errorf("rank %d: all-reduce %d (%v): %v, %v; want %v", me, round, op, all, err, full)
						}
						f := make([]float64, k)
						for i := range f {
							f[i] = 1 / float64(me+i+round+1)
						}
						fs, err := AllReduce(j.World(), Sum, f)
						if err != nil || len(fs) != k {
							t.Errorf("rank %d: float all-reduce %d: %v, %v", me, round, fs, err)
						}
						if round == 2 {
							sums[me] = fs
						}
						if fit && fitBefore {
							quiet[me] += sentBy(j) - before
						}
						fitBefore = fit
					}
				})
				want := jobResult{Ends: slices.Repeat([]string{"returned"}, n)}
				if d := cmp.Diff(want, res); d != "" {
					t.Errorf("(-want +got):\n%s", d)
				}
				for r := range n {
					if !slices.Equal(sums[r], sums[0]) {
						t.Errorf("rank %d's float all-reduce gave %v, rank 0's %v", r, sums[r], sums[0])
					}
					if m.quiet() && quiet[r] != 0 {
						t.Errorf("rank %d of a job of one group sent %d datagrams in collectives whose data fit their slots", r, quiet[r])
					}
				}
			})
		}
	}
}

// checkQuiet checks that every rank of a job returned, and, for a job of
// one group (oneGroup), that its ranks sent nothing (quiet, by rank) in the
// rounds named by what, but answers to retransmissions (resent, by rank):
// a retransmission of an earlier message (a reply late on a loaded
// machine) may be answered during a quiet round, at most once each.
func checkQuiet(t *testing.T, res jobResult, oneGroup bool, quiet, resent []uint64, what string) {
	t.Helper()
	want := jobResult{Ends: slices.Repeat([]string{"returned"}, len(quiet))}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	var sent, retrans uint64
	for r := range quiet {
		sent, retrans = sent+quiet[r], retrans+resent[r]
	}
	if oneGroup && sent > retrans {
		t.Errorf("a job of one group sent %d datagrams and messages (%v by rank) in %s, and %d retransmissions in all", sent, quiet, what, retrans)
	}
}

// TestWordsAlltoall: an all-to-all of the whole job gives each rank, in
// rank order, the block every rank sent it, for blocks of every size:
// none, one byte, eight, the largest whose blocks fit a slot together, and
// one byte more (the all-to-all then runs over messages, on every rank).
// In one group, all-to-alls whose blocks fit (after one that fit) send
// nothing but answers to retransmissions.
func TestWordsAlltoall(t *testing.T) {
	for _, m := range wordModes {
		for _, n := range []int{1, 2, 5, 8} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				sizes := []int{0, 1, 8, maxPost / n, maxPost/n + 1, 8, 8}
				block := func(from, to, round int) []byte {
					b := make([]byte, sizes[round%len(sizes)])
					for i := range b {
						b[i] = byte(from*31 + to*7 + round + i)
					}
					return b
				}
				var quiet, resent [8]uint64
				res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
					me := j.Rank()
					fresh := func() uint64 { s := j.ep.Stats(); return sentBy(j) - s.Retransmits - s.ReplyResends }
					defer func() { resent[me] = j.ep.Stats().Retransmits }()
					fitBefore := false
					for round := range 2 * len(sizes) {
						var data []byte
						for to := range n {
							data = append(data, block(me, to, round)...)
						}
						before := fresh()
						got, err := j.World().Alltoall(data)
						if err != nil {
							t.Errorf("rank %d, all-to-all %d: %v", me, round, err)
							return
						}
						var want []byte
						for from := range n {
							want = append(want, block(from, me, round)...)
						}
						if !bytes.Equal(got, want) {
							t.Errorf("rank %d, all-to-all %d: got %x, want %x", me, round, got, want)
						}
						fit := len(data) <= maxPost
						if fit && fitBefore {
							quiet[me] += fresh() - before
						}
						fitBefore = fit
					}
				})
				checkQuiet(t, res, m.quiet(), quiet[:n], resent[:n], "all-to-alls whose blocks fit their slots")
			})
		}
	}
}

// TestWordsAlltoallMismatch: in a job of one group, a rank that calls
// Alltoall while the others call AllGather gets ErrCollectiveMismatch, and
// so does every other rank, by dissemination, counted, and gathered and
// released, also when one side's part does not fit its slot; none waits
// forever.
func TestWordsAlltoallMismatch(t *testing.T) {
	dissem, counted, gathered := wordModes[0], wordModes[1], wordModes[2]
	for _, c := range []struct {
		name         string
		mode         wordMode
		blocks, part int // the all-to-all's block size, the all-gather's part
	}{
		{"dissemination", dissem, 1, 1},
		{"counted", counted, 1, 1},
		{"gathered", gathered, 1, 1},
		{"dissemination, large blocks", dissem, maxPost, 1},
		{"counted, large part", counted, 1, maxPost + 1},
		{"counted, large blocks", counted, maxPost, 1},
		{"gathered, large part", gathered, 1, maxPost + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n = 3
			errs := make([]error, n)
			runJob(t, n, c.mode.net(t), false, func(j *Job) {
				if j.Rank() == 0 {
					_, errs[0] = j.World().Alltoall(make([]byte, n*c.blocks))
				} else {
					_, errs[j.Rank()] = j.World().AllGather(make([]byte, c.part))
				}
			})
			for r, err := range errs {
				if !errors.Is(err, ErrCollectiveMismatch) {
					t.Errorf("rank %d: %v, want ErrCollectiveMismatch", r, err)
				}
			}
		})
	}
}

// TestWordsGather: a gather of the whole job gives its root every rank's
// part in rank order, for parts of every size (none, one byte, eight, the
// largest that fits a gather slot, and one byte more, which goes to the
// root by message), to a root that changes from gather to gather, 40 in a
// row with no other synchronisation, then 24 to a root that starts late
// (non-roots run ahead, and each slot is reused only once its last root
// has read it). In one group, gathers whose parts fit send nothing but
// answers to retransmissions.
func TestWordsGather(t *testing.T) {
	for _, m := range wordModes {
		for _, n := range []int{1, 2, 5, 8} {
			t.Run(fmt.Sprintf("%s/N=%d", m.name, n), func(t *testing.T) {
				sizes := []int{0, 1, 8, maxPost, maxPost + 1, 8}
				part := func(from, round int) []byte {
					b := make([]byte, sizes[round%len(sizes)])
					for i := range b {
						b[i] = byte(from*31 + round + i)
					}
					return b
				}
				var quiet, resent [8]uint64
				res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
					me := j.Rank()
					fresh := func() uint64 { s := j.ep.Stats(); return sentBy(j) - s.Retransmits - s.ReplyResends }
					defer func() { resent[me] = j.ep.Stats().Retransmits }()
					for round := range 40 {
						root := (round * 3) % n
						before := fresh()
						got, err := j.World().Gather(root, part(me, round))
						if err != nil {
							t.Errorf("rank %d, gather %d: %v", me, round, err)
							return
						}
						if me != root {
							if got != nil {
								t.Errorf("rank %d, gather %d to %d: a non-root got %d parts", me, round, root, len(got))
							}
						} else {
							for from := range n {
								if from >= len(got) || !bytes.Equal(got[from], part(from, round)) {
									t.Errorf("rank %d, gather %d: part of rank %d wrong", me, round, from)
									break
								}
							}
						}
						// Quiet: this round fit, and the one before (whose
						// root may still answer messages in this one).
						if fits := func(r int) bool { return len(part(me, r)) <= maxPost }; round > 0 && fits(round) && fits(round-1) {
							quiet[me] += fresh() - before
						}
					}
					// A slow root: the others run up to 8 gathers
					// ahead, and wait for it to read their slots.
					j.World().Barrier()
					if me == 0 {
						time.Sleep(50 * time.Millisecond)
					}
					for round := range 3 * 8 {
						got, err := j.World().Gather(0, []byte{byte(me), byte(round)})
						if err != nil {
							t.Errorf("rank %d, gather %d to a slow root: %v", me, round, err)
							return
						}
						for from := range got {
							if !bytes.Equal(got[from], []byte{byte(from), byte(round)}) {
								t.Errorf("slow root, gather %d: rank %d's part is %v", round, from, got[from])
							}
						}
					}
					j.World().Barrier()
				})
				checkQuiet(t, res, m.quiet(), quiet[:n], resent[:n], "gathers whose parts fit their slots")
			})
		}
	}
}

// TestWordsGatherRootsDiffer: ranks 0 and 1 each take themselves for the
// root of one gather on shared words: every rank sees every rank's call
// in the slots and returns ErrCollectiveMismatch naming both roots, and
// the next collective matches.
func TestWordsGatherRootsDiffer(t *testing.T) {
	res, _ := runJob(t, 4, loopbackShared(t), false, func(j *Job) {
		root := 0
		if j.Rank() == 1 {
			root = 1
		}
		_, err := j.World().Gather(root, []byte{byte(j.Rank())})
		if !errors.Is(err, ErrCollectiveMismatch) || !strings.Contains(err.Error(), "gather to root 1") || !strings.Contains(err.Error(), "gather to root 0") {
			t.Errorf("rank %d: %v; want the mismatch naming both roots", j.Rank(), err)
		}
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: the next barrier: %v", j.Rank(), err)
		}
	})
	if res.Code != 0 {
		t.Errorf("job ended %d (%q), %q; want 0", res.Code, res.Ends, res.Why)
	}
}

// TestWordsCorrupt: a rank's area of words overwritten with ones (as 0xff
// over its inbox's header does) between two barriers, of the leader or of
// another rank, by dissemination, counted, or gathered and released, ends
// the job with code 1, its reason naming that rank's corrupted inbox and
// the rank that found it, at a barrier, an all-gather, a broadcast, a
// gather or an all-to-all: whichever reads a word of it first that no rank
// wrote there (a rank's own gather slot, at the latest). Nothing panics.
func TestWordsCorrupt(t *testing.T) {
	for _, m := range wordModes[:3] { // one group: every collective on words
		for _, victim := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/rank %d", m.name, victim), func(t *testing.T) {
				const n = 4
				res, _ := runJob(t, n, m.net(t), false, func(j *Job) {
					j.World().Barrier()
					if j.Rank() == 1 {
						a, err := j.words.area(victim)
						if err != nil {
							t.Error(err)
						}
						for off := 0; off+8 <= len(a); off += 8 {
							word(a, off).Store(^uint64(0))
						}
					}
					for round := range 3 {
						j.World().Barrier()
						j.World().AllGather([]byte{byte(round)})
						j.World().Broadcast(round%n, []byte{1})
						j.World().Gather(round%n, []byte{2})
						j.World().Alltoall(make([]byte, n))
					}
				})
				why := regexp.MustCompile(fmt.Sprintf(`^rank %d: corrupted shared-memory inbox \(found by rank \d: .*\)$`, victim))
				if res.Code != 1 || !why.MatchString(res.Why) {
					t.Errorf("code %d, reason %q; want 1 and %s", res.Code, res.Why, why)
				}
				t.Logf("%s", res.Why)
			})
		}
	}
}

// TestSetWay: a group disseminates under AMDISSEM, but a crowded one of
// more than eagerAreas ranks, whose ranks would each map every inbox, is
// gathered and released; otherwise counted up to eagerAreas ranks, and
// gathered and released beyond.
func TestSetWay(t *testing.T) {
	for _, c := range []struct {
		algo                  barrierAlgo
		ranks                 int
		yield                 bool
		wantDissem, wantCount bool
	}{
		{barrierDissem, 2, false, true, false},
		{barrierDissem, eagerAreas + 1, false, true, false},
		{barrierDissem, eagerAreas, true, true, false},
		{barrierDissem, eagerAreas + 1, true, false, false},
		{barrierTree, eagerAreas, true, false, true},
		{barrierCentral, eagerAreas, false, false, true},
		{barrierTree, eagerAreas + 1, false, false, false},
	} {
		w := &words{group: make([]int, c.ranks), yield: c.yield}
		w.setWay(c.algo)
		if w.dissem != c.wantDissem || w.counted != c.wantCount {
			t.Errorf("algorithm %d, %d ranks, yield %v: dissemination %v, counted %v; want %v, %v", c.algo, c.ranks, c.yield, w.dissem, w.counted, c.wantDissem, c.wantCount)
		}
	}
}
