package conduit

import (
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/spawn"
)

// The handlers by which a rank of a directly launched job (no console;
// DESIGN.md §9) that ends tells the others the job's code: a Short request
// carrying it, answered at once by a Short reply before the receiver ends
// with it.
const (
	hExit    = 6
	hExitAck = 7
)

// directExit sets, for a job that a launcher started directly, how a rank
// that calls Exit or aborts tells every other rank its code, and how one
// that is told ends: as with the console's Terminate, at the program's next
// call into the library or after the grace period.
func (j *Job) directExit(w *spawn.Worker) {
	// told[r]: rank r has taken this rank's code, or told its own (it
	// ends too); count is how many are.
	told := make([]atomic.Bool, j.size)
	var count atomic.Int64
	mark := func(r int) {
		if r >= 0 && r < j.size && r != j.rank && !told[r].Swap(true) {
			count.Add(1)
		}
	}
	j.ep.Register(hExit, func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) != 1 || !t.IsRequest() {
			return
		}
		t.ReplyShort(hExitAck)
		mark(t.Source())
		w.PeerExit(int(int32(args[0])))
	})
	j.ep.Register(hExitAck, func(t *amudp.Token, _ []uint32, _ []byte) {
		if !t.IsRequest() {
			mark(t.Source())
		}
	})
	w.SetPeerExit(func(code int, grace time.Duration) bool {
		others := int64(j.size - 1)
		for r := range j.size {
			if r == j.rank || told[r].Load() {
				continue
			}
			// Refused inside a handler (the poll pass that would carry
			// the replies is this goroutine's): the launcher ends the
			// others instead (Worker.Abort).
			if err := j.ep.RequestShort(r, hExit, uint32(int32(code))); err != nil {
				return false
			}
		}
		deadline := time.Now().Add(grace)
		err := j.ep.WaitUntil(func() bool { return count.Load() >= others || time.Now().After(deadline) })
		return err == nil && count.Load() >= others
	})
}
