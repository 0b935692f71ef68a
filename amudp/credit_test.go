package amudp

import (
	"testing"
	"testing/quick"
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
				got := send.canSend() && pools[peer].available() > 0
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
			if send.out != model.total {
				return false
			}
		}
		return true
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 500}); err != nil {
		t.Error(err)
	}
}
