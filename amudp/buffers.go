package amudp

// growBuffers doubles the socket buffers, up to the maximum, when one drain
// took more than half of them (DESIGN.md §6).
func (e *Endpoint) growBuffers(drained int) {
	if e.bufSize == 0 && drained > 0 {
		if rcv, _, err := e.tr.SetBuffers(0); err == nil {
			e.bufSize = max(rcv/2, 1)
		}
	}
	if drained < e.bufSize/2 || e.bufSize >= e.bufMax {
		return
	}
	if rcv, _, err := e.tr.SetBuffers(min(2*e.bufSize, e.bufMax)); err == nil {
		e.bufSize = max(rcv/2, e.bufSize+1)
		e.mu.Lock()
		e.window = windowFor(rcv)
		e.mu.Unlock()
	}
}

// windowFor returns the byte window per peer for a kernel receive buffer of
// rcv bytes as read back (Linux reports twice the size asked for and
// charges each datagram its buffer's true size, a little over its length).
func windowFor(rcv int) int { return rcv * 3 / 4 }

// BufferSize returns the kernel receive buffer size in force, as read back.
func (e *Endpoint) BufferSize() int {
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	rcv, _, _ := e.tr.SetBuffers(0)
	return rcv
}
