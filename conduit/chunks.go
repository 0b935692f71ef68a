package conduit

import (
	"fmt"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/amudp"
)

// assembly collects a byte string that comes in medium messages of at most
// MaxMedium bytes each (the relayed table, an all-gather round). The
// caller serialises add and reset; done may be read at any time.
type assembly struct {
	buf    []byte
	got    int // chunks received
	chunks int
	bad    error
	done   atomic.Bool
}

// add records chunk idx of a string of size bytes sent in chunks chunks.
// A chunk that does not fit what came before marks the string bad (what
// names it in the error).
func (a *assembly) add(idx, chunks, size int, p []byte, what string) {
	if a.done.Load() {
		return
	}
	if a.buf == nil {
		// The count and the size must agree before the size is
		// allocated: a corrupt first chunk cannot ask for more than its
		// count of chunks can carry.
		if chunks < 1 || chunks > maxChunks || size < 0 || size > chunks*amudp.MaxMedium || chunks > 1 && size <= (chunks-1)*amudp.MaxMedium {
			a.bad = fmt.Errorf("malformed chunk %d/%d of %s (%d bytes)", idx, chunks, what, size)
			a.done.Store(true)
			return
		}
		a.buf, a.chunks = make([]byte, size), chunks
	}
	off := idx * amudp.MaxMedium
	if chunks != a.chunks || size != len(a.buf) || idx < 0 || idx >= chunks || off+len(p) > size {
		a.bad = fmt.Errorf("malformed chunk %d/%d of %s", idx, chunks, what)
		a.done.Store(true)
		return
	}
	copy(a.buf[off:], p)
	if a.got++; a.got == a.chunks {
		a.done.Store(true)
	}
}

// maxChunks bounds the chunks of one string: 1 GiB.
const maxChunks = 1 << 30 / amudp.MaxMedium

// take returns the string (or why it is bad) and makes a ready for the
// next one.
func (a *assembly) take() ([]byte, error) {
	b, err := a.buf, a.bad
	a.buf, a.got, a.chunks, a.bad = nil, 0, 0, nil
	a.done.Store(false)
	return b, err
}

// sendChunks sends blob in chunks of at most MaxMedium bytes (one chunk if
// it is empty) through send, with each chunk's index and the count.
func sendChunks(blob []byte, send func(idx, chunks int, part []byte) error) error {
	chunks := max(1, (len(blob)+amudp.MaxMedium-1)/amudp.MaxMedium)
	for i := range chunks {
		if err := send(i, chunks, blob[i*amudp.MaxMedium:min((i+1)*amudp.MaxMedium, len(blob))]); err != nil {
			return err
		}
	}
	return nil
}
