package spawn

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// console serialises writes of routed output so that lines of different
// workers never mix within a line (DESIGN.md §8).
type console struct {
	mu  sync.Mutex
	out [3]io.Writer // indexed by stream: 1 stdout, 2 stderr
}

func (c *console) write(stream int, b []byte) {
	if len(b) == 0 {
		return
	}
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

	// Labels and files (GASNET_OUTPUT_LABEL, GASNET_OUTPUT_DIR): o knows
	// the rank of the worker of spawn index index once ranks are assigned.
	o       *outputs
	index   int
	midLine bool     // the last byte written was not a newline
	out     []byte   // labelled bytes, reused
	file    *os.File // GASNET_OUTPUT_DIR: this stream's file, once opened
}

func newLineWriter(c *console, stream, size int) *lineWriter {
	return &lineWriter{c: c, stream: stream, size: size, buf: make([]byte, 0, max(size, 1)), index: -1, o: &outputs{}}
}

// streamNames are the streams' names in labels and file names.
var streamNames = [3]string{"", "stdout", "stderr"}

// who names the worker of this stream: "rank R", or before ranks are
// assigned (or for a worker the console does not know) "worker I".
func (w *lineWriter) who() (string, int) {
	if r, ok := w.o.rankOf(w.index); ok {
		return "rank", r
	}
	return "worker", w.index
}

// emit passes b on: to this stream's file, or to the console with a label
// at the start of each line when labels are on.
func (w *lineWriter) emit(b []byte) {
	switch {
	case w.o.dir != "":
		w.toFile(b)
	case !w.o.label:
		w.c.write(w.stream, b)
	default:
		kind, n := w.who()
		label := "[" + strconv.Itoa(n)
		if kind == "worker" {
			label = "[worker " + strconv.Itoa(n)
		}
		if w.stream == 2 {
			label += " stderr"
		}
		label += "] "
		w.out = w.out[:0]
		for len(b) > 0 {
			if !w.midLine {
				w.out = append(w.out, label...)
			}
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				w.out, w.midLine = append(w.out, b...), true
				break
			}
			w.out, b, w.midLine = append(w.out, b[:i+1]...), b[i+1:], false
		}
		w.c.write(w.stream, w.out)
	}
}

// toFile writes b to DIR/rank.R.STREAM, opened at the first write (when
// ranks are normally known); a file that cannot be opened is said once on
// the console, and the output goes there instead.
func (w *lineWriter) toFile(b []byte) {
	if w.file == nil {
		kind, n := w.who()
		name := filepath.Join(w.o.dir, fmt.Sprintf("%s.%d.%s", kind, n, streamNames[w.stream]))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			w.c.write(2, []byte(fmt.Sprintf("udpconduit: GASNET_OUTPUT_DIR: %v; this stream goes to the console\n", err)))
			w.o = &outputs{label: w.o.label, ranks: w.o.ranks}
			w.emit(b)
			return
		}
		w.file = f
	}
	w.file.Write(b)
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	if w.size == 0 {
		w.emit(p)
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
		w.emit(w.buf)
		w.buf = w.buf[:0]
	}
}

// Close flushes the rest, and closes this stream's file.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.flush()
	if w.file != nil {
		return w.file.Close()
	}
	return nil
}
