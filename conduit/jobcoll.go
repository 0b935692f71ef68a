package conduit

// This file is the Job's collectives: each a collective of its World.

import "fmt"

// Barrier is World().Barrier(): it waits until every rank has reached it.
// A rank enters once every request it sent has been answered, so every
// request sent anywhere before the barrier has run when it completes, and
// what those handlers did on this rank (a Put's data written into the
// segment, say) happens before Barrier returns. It runs without the
// console.
func (j *Job) Barrier() error { return j.world.Barrier() }

// BarrierNotify enters the next barrier of World without waiting (if the
// barrier it last entered has not been waited for, BarrierWait for that
// one comes first). Pair it with BarrierWait on the same rank; between
// the two the rank may compute and communicate from any goroutine.
func (j *Job) BarrierNotify() error {
	j.enter()
	j.splitMu.Lock()
	defer j.splitMu.Unlock()
	if j.notified != nil {
		if _, err := j.notified.Wait(); err != nil {
			j.notified = nil
			return err
		}
	}
	j.notified = j.world.BarrierNB()
	return nil
}

// BarrierWait waits, servicing the network, until every rank has entered
// the barrier this rank last notified. Everything the program's handlers
// did before the other ranks entered happens before BarrierWait returns.
// A rank whose job ended elsewhere (the others completed the barrier and
// called Exit) still completes a barrier it notified and returns, as a
// plain Barrier does, so that what it prints after it is not lost.
func (j *Job) BarrierWait() error {
	j.splitMu.Lock()
	defer j.splitMu.Unlock()
	h := j.notified
	if h == nil {
		j.enter()
		return fmt.Errorf("conduit: BarrierWait without BarrierNotify")
	}
	j.notified = nil
	_, err := h.Wait()
	return err
}
