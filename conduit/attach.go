package conduit

// This file is Attach: the handler table, the segment, and the all-gather
// that makes every rank's segment known, and a client's requests.

import (
	"encoding/binary"
	"fmt"

	"github.com/udpconduit/udpconduit/amudp"
)

// Attach registers the program's handlers (indexes 128..255) and allocates
// its segment of segmentSize bytes, which Long messages and Put/Get address.
// It is collective: every rank calls it once, before its first request. On
// an error nothing is registered, and Attach may be called again.
func (j *Job) Attach(handlers []HandlerEntry, segmentSize int) ([]byte, error) {
	ep := j.enter()
	if err := checkTable(handlers); err != nil {
		return nil, err
	}
	j.attachMu.Lock()
	if j.attach {
		j.attachMu.Unlock()
		return nil, ErrAttached
	}
	seg, err := j.nb.alloc(segmentSize)
	if err == nil {
		j.attach = true
	}
	j.attachMu.Unlock()
	if err != nil {
		return nil, err
	}
	hs := make(map[int]amudp.Handler, len(handlers))
	for _, h := range handlers {
		fn := h.Fn
		hs[h.Index] = func(t *amudp.Token, args []uint32, p []byte) { fn((*Token)(t), args, p) }
	}
	if err := ep.RegisterAll(hs); err != nil {
		j.nb.release()
		return nil, err
	}
	ep.SetSegment(seg)
	// Every rank's segment size, and the path by which the ranks of its
	// shared-memory group map it ("" for none).
	b := binary.LittleEndian.AppendUint64(nil, uint64(segmentSize))
	parts, err := j.world.AllGather(append(b, j.nb.path()...))
	if err != nil {
		return nil, err
	}
	segs, paths := make([]uint64, len(parts)), make([]string, len(parts))
	for i, p := range parts {
		if len(p) >= 8 {
			segs[i], paths[i] = binary.LittleEndian.Uint64(p), string(p[8:])
		}
	}
	j.segs = segs
	j.nb.setPaths(paths)
	j.nb.views[j.rank].Store(&seg) // Put and Get to this rank: mapped
	j.attached.Store(true)
	if !j.nb.counted {
		j.nb.direct.Store(&j.nb.views)
		if j.aborting.Load() { // setAborting's store may have come first
			j.nb.direct.Store(nil)
		}
	}
	return seg, nil
}

// checkTable checks a handler table: client indexes, each once, no nil
// function.
func checkTable(handlers []HandlerEntry) error {
	seen := map[int]bool{}
	for i, h := range handlers {
		switch {
		case h.Index < FirstClientHandler || h.Index >= amudp.NumHandlers:
			return fmt.Errorf("%w (entry %d has index %d)", ErrHandlerIndex, i, h.Index)
		case seen[h.Index]:
			return fmt.Errorf("%w: index %d appears twice", ErrHandlerTable, h.Index)
		case h.Fn == nil:
			return fmt.Errorf("%w: index %d has a nil handler", ErrHandlerTable, h.Index)
		}
		seen[h.Index] = true
	}
	return nil
}

// SegmentSize returns the segment size of rank (after Attach; 0 before).
func (j *Job) SegmentSize(rank int) int {
	if !j.attached.Load() || rank < 0 || rank >= len(j.segs) {
		return 0
	}
	return int(j.segs[rank])
}

// clientCall checks a client request before it is sent: Attach done, a
// client handler index.
func (j *Job) clientCall(handler int) (*amudp.Endpoint, error) {
	ep := j.enter()
	if !j.attached.Load() {
		return nil, ErrNotAttached
	}
	if handler < FirstClientHandler || handler >= amudp.NumHandlers {
		return nil, fmt.Errorf("%w (got %d)", ErrHandlerIndex, handler)
	}
	return ep, nil
}

// RequestShort sends a Short request to handler (128..255) of dest.
func (j *Job) RequestShort(dest, handler int, args ...uint32) error {
	ep, err := j.clientCall(handler)
	if err != nil {
		return err
	}
	return j.done(ep.RequestShort(dest, handler, args...))
}

// RequestMedium sends a Medium request; payload may be reused on return.
func (j *Job) RequestMedium(dest, handler int, payload []byte, args ...uint32) error {
	ep, err := j.clientCall(handler)
	if err != nil {
		return err
	}
	return j.done(ep.RequestMedium(dest, handler, payload, args...))
}

// RequestLong sends a Long request writing payload at offset of dest's
// segment.
func (j *Job) RequestLong(dest, handler int, payload []byte, offset uint64, args ...uint32) error {
	ep, err := j.clientCall(handler)
	if err != nil {
		return err
	}
	if err := j.checkRemote(dest, offset, len(payload)); err != nil {
		return err
	}
	return j.done(ep.RequestLong(dest, handler, payload, offset, args...))
}

// checkRemote checks a range of dest's segment against the sizes exchanged
// at Attach, which must have run.
func (j *Job) checkRemote(dest int, offset uint64, n int) error {
	if !j.attached.Load() {
		return ErrNotAttached
	}
	if dest < 0 || dest >= len(j.segs) {
		return nil // amudp reports a bad rank
	}
	if offset > j.segs[dest] || uint64(n) > j.segs[dest]-offset {
		return fmt.Errorf("%w: %d bytes at offset %d of rank %d's segment of %d", ErrOutOfSegment, n, offset, dest, j.segs[dest])
	}
	return nil
}
