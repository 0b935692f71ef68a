package amudp

import (
	"testing"
	"testing/quick"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// creditModel is the naive reference: counts per peer and in total.
type creditModel struct {
	depth, limit int
	out          map[int]map[uint16]bool
	total        int
}

func (m *creditModel) canAcquire(peer int) bool {
	return len(m.out[peer]) < m.depth && (m.limit < 0 || m.total < m.limit)
}

// TestCreditsAgainstModel drives the slot pools and send credits the way the
// endpoint does, with random operations, and checks them against the model.
func TestCreditsAgainstModel(t *testing.T) {
	f := func(ops []uint16, depthSeed, limitSeed uint8) bool {
		depth := 1 + int(depthSeed%8)
		limit := int(limitSeed%20) - 1 // -1 = unlimited
		const peers = 4
		pools := make([]slotPool, peers)
		for i := range pools {
			pools[i] = newSlotPool(depth)
		}
		send := sendCredits{limit: limit}
		model := creditModel{depth: depth, limit: limit, out: map[int]map[uint16]bool{}}
		for p := 0; p < peers; p++ {
			model.out[p] = map[uint16]bool{}
		}
		for _, op := range ops {
			peer := int(op % peers)
			if op&0x100 == 0 { // acquire
				want := model.canAcquire(peer)
				got := mayRequest(&send, &pools[peer], &byteWindow{}, 0, 0)
				if got != want {
					t.Logf("acquire peer %d: got %v want %v", peer, got, want)
					return false
				}
				if !got {
					continue
				}
				s, ok := pools[peer].acquire()
				if !ok || int(s) >= depth || model.out[peer][s] {
					t.Logf("acquire gave slot %d (ok %v) already out or out of range", s, ok)
					return false
				}
				send.take()
				model.out[peer][s] = true
				model.total++
			} else { // release some outstanding slot
				for s := range model.out[peer] {
					pools[peer].release(s)
					send.give()
					delete(model.out[peer], s)
					model.total--
					break
				}
			}
			if int(send.out.Load()) != model.total {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 500}); err != nil {
		t.Error(err)
	}
}

// TestSlotsReusedBeforeNew: a released slot is handed out again before a
// slot never used, so the slots in use stay as few as the requests that were
// outstanding at once.
func TestSlotsReusedBeforeNew(t *testing.T) {
	p := newSlotPool(8)
	var got []uint16
	take := func() {
		s, ok := p.acquire()
		if !ok {
			t.Fatal("no slot with credit left")
		}
		got = append(got, s)
	}
	take()
	take()
	take()
	p.release(1)
	p.release(0)
	take()
	take()
	take()
	if d := cmp.Diff([]uint16{0, 1, 2, 0, 1, 3}, got); d != "" {
		t.Errorf("slots handed out (-want +got):\n%s", d)
	}
	if p.available() != 4 {
		t.Errorf("available = %d, want 4", p.available())
	}
}

// TestPeerStateGrowsWithUse: a peer's per-slot state is allocated a chunk at
// a time as slots are first used, at the sender and at the receiver: a job
// of many ranks that each talk to a few peers with few requests outstanding
// does not pay the network depth's worth of state per peer.
func TestPeerStateGrowsWithUse(t *testing.T) {
	e, raw := wireJob(t, Config{NetworkDepth: 128})
	e.Register(130, func(*Token, []uint32, []byte) {})
	allocated := func(slots, rx int) {
		t.Helper()
		e.mu.Lock()
		defer e.mu.Unlock()
		p := e.peers[1]
		if s, r := chunksSet(p.slots), chunksSet(p.rx); s != slots || r != rx {
			t.Errorf("chunks allocated: %d of request slots, %d of receive slots; want %d and %d", s, r, slots, rx)
		}
	}
	for i := range slotChunk + 1 { // never answered: slots 0..16
		if err := e.RequestShort(1, 130, uint32(i)); err != nil {
			t.Fatal(err)
		}
	}
	allocated(2, 0)
	ran := 0
	e.Register(131, func(*Token, []uint32, []byte) { ran++ })
	for seq := uint16(1); seq <= 3; seq++ { // one slot, used three times
		m := wire.Message{Header: wire.Header{Kind: KindShortRequest, Handler: 131, Src: 1, Slot: 0, Seq: seq}}
		b, err := m.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		raw.Send(sealed("wire secret", 0, b), e.LocalAddr())
		if err := e.WaitUntil(func() bool { return ran == int(seq) }); err != nil {
			t.Fatal(err)
		}
	}
	allocated(2, 1)
}

// chunksSet counts the chunks of a chunk table that are allocated.
func chunksSet[T any](tab []*[slotChunk]T) int {
	n := 0
	for _, c := range tab {
		if c != nil {
			n++
		}
	}
	return n
}
