package spawn

import (
	"bytes"
	"io"
	"sync"
)

// console serialises writes of routed output so that lines of different
// workers never mix within a line (DESIGN.md §8).
type console struct {
	mu  sync.Mutex
	out [3]io.Writer // indexed by stream: 1 stdout, 2 stderr
}

func (c *console) write(stream int, b []byte) {
	c.mu.Lock()
	c.out[stream].Write(b)
	c.mu.Unlock()
}

// lineWriter buffers one worker stream and passes it on a line at a time; a
// line longer than the buffer goes out in buffer-sized pieces. Size 0 passes
// bytes as they come. Close flushes what remains (a crash's last words).
type lineWriter struct {
	c      *console
	stream int
	size   int
	mu     sync.Mutex
	buf    []byte
}

func newLineWriter(c *console, stream, size int) *lineWriter {
	return &lineWriter{c: c, stream: stream, size: size, buf: make([]byte, 0, max(size, 1))}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if w.size == 0 {
		w.c.write(w.stream, p)
		return n, nil
	}
	for len(p) > 0 {
		if i := bytes.IndexByte(p, '\n'); i >= 0 && len(w.buf)+i+1 <= w.size {
			w.buf = append(w.buf, p[:i+1]...)
			p = p[i+1:]
			w.flush()
			continue
		}
		room := w.size - len(w.buf)
		take := min(room, len(p))
		w.buf = append(w.buf, p[:take]...)
		p = p[take:]
		if len(w.buf) == w.size {
			w.flush()
		}
	}
	return n, nil
}

func (w *lineWriter) flush() {
	if len(w.buf) > 0 {
		w.c.write(w.stream, w.buf)
		w.buf = w.buf[:0]
	}
}

// Close flushes the rest.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	w.flush()
	w.mu.Unlock()
	return nil
}
