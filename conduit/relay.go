package conduit

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/internal/binomial"
)

// hTable is the core handler that receives a chunk of the address table
// relayed down the job's binomial tree (package binomial, DESIGN.md §7).
const hTable = 1

// tableIn collects the relayed table's chunks.
type tableIn struct {
	mu sync.Mutex
	assembly
}

// chunk runs for each chunk: args are its index, the chunk count and the
// table's length in bytes.
func (t *tableIn) chunk(_ *amudp.Token, a []uint32, p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(a) != 3 {
		return
	}
	t.add(int(a[0]), int(a[1]), int(a[2]), p, "the relayed address table")
}

// relayLink is what relayTable needs of the rank's link to its console
// (a *spawn.Worker): its place, and the address table as far as it has
// it.
type relayLink interface {
	Rank() int
	Size() int
	HasTable() bool
	EncodedTable() []byte
	SetTable(blob []byte) error
	Addrs() ([]netip.AddrPort, error)
}

// relayTable completes this worker's address table: rank 0 has it from the
// console; every other rank waits for it from its tree parent. Each then
// passes it on to its tree children and goes on, without a barrier: a rank
// that has the table may send to one still waiting for it, whose endpoint
// takes the sender's address from the authenticated datagram and answers
// (amudp's Endpoint.FillPeers), so nothing waits for a retransmission.
func (j *Job) relayTable(w relayLink) error {
	ep, tab := j.ep, &j.table
	var blob []byte // the table's wire form, passed on as it came
	if w.HasTable() {
		blob = w.EncodedTable()
		if err := j.tableHere(); err != nil {
			return err
		}
	} else {
		// A job that ends meanwhile (a rank that has the table may
		// already have called Exit) ends this rank here.
		if err := j.wait(tab.done.Load); err != nil {
			return fmt.Errorf("waiting for the address table: %w", err)
		}
		tab.mu.Lock()
		var bad error
		blob, bad = tab.take()
		tab.mu.Unlock()
		if bad != nil {
			return bad
		}
		if err := w.SetTable(blob); err != nil {
			return err
		}
		if err := j.tableHere(); err != nil {
			return err
		}
		addrs, err := w.Addrs()
		if err != nil {
			return err
		}
		if err := ep.FillPeers(addrs); err != nil {
			return err
		}
	}
	for _, c := range binomial.Children(w.Rank(), w.Size()) {
		err := sendChunks(blob, func(i, chunks int, part []byte) error {
			return ep.RequestMedium(c, hTable, part, uint32(i), uint32(chunks), uint32(len(blob)))
		})
		if err != nil {
			return fmt.Errorf("relaying the address table to rank %d: %w", c, err)
		}
	}
	return nil
}

// tableHere runs onTable, if set, once this rank has the address table.
func (j *Job) tableHere() error {
	if j.onTable == nil {
		return nil
	}
	return j.onTable()
}
