package amudp

import (
	"fmt"
)

// selfRequest runs a request to this endpoint at once, without the network.
func (e *Endpoint) selfRequest(cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	if err := e.runLocal(true, cat, handler, payload, off, args); err != nil {
		return err
	}
	if e.blocked.Load() {
		e.tr.Wake()
	}
	return nil
}

// runLocal runs a message to this endpoint at once, on the caller's
// goroutine: a self request, or the reply to one. Copies keep the caller's
// slices from escaping through the handler call, so the network path does
// not allocate; self-sends may.
func (e *Endpoint) runLocal(isReq bool, cat Category, handler int, payload []byte, off uint64, args []uint32) error {
	tab := e.table.Load()
	h, seg := tab.handlers[handler], tab.segment
	if h == nil {
		return fmt.Errorf("%w: no handler registered at %d", ErrBadHandler, handler)
	}
	view, err := placeLocal(cat, seg, payload, off)
	if err != nil {
		return err
	}
	t := &Token{ep: e, src: e.rank, isReq: isReq, active: true, self: true, client: handler >= e.reserved}
	e.runLocalHandler(h, t, append([]uint32(nil), args...), view)
	t.active = false
	t.closeReply()
	return nil
}

// placeLocal writes a Long payload into seg and returns the handler's view;
// a Medium payload is copied, as the network path would.
func placeLocal(cat Category, seg, payload []byte, off uint64) ([]byte, error) {
	switch cat {
	case Short:
		return nil, nil
	case Medium:
		return append([]byte{}, payload...), nil
	case Long:
		dst, reason := intoSegment(seg, payload, off)
		switch reason {
		case ReasonNoSegment:
			return nil, ErrNoSegment
		case ReasonBadOffset:
			return nil, fmt.Errorf("%w: %d bytes at offset %d, segment of %d", ErrOutOfSegment, len(payload), off, len(seg))
		}
		return dst, nil
	}
	return nil, nil
}
