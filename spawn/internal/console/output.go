package console

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// console serialises writes of routed output so that lines of different
// workers never mix within a line (DESIGN.md §8). It counts what it passed
// on, so that the console can tell a stream still delivering (however
// slowly its reader takes it) from one that stays silent (see
// outputs.drain), and what it could not write (a reader that went away).
type console struct {
	mu  sync.Mutex
	out [3]io.Writer // indexed by stream: 1 stdout, 2 stderr
	// lost counts the bytes of each stream that could not be written,
	// and err is the first write error of each; under lossMu, which is
	// never held across a write, so that losses never waits for one.
	lossMu sync.Mutex
	lost   [3]int64
	err    [3]error

	busy    atomic.Int32  // writes under way or waiting for mu
	written atomic.Uint64 // bytes handed to write so far
}

func (c *console) write(stream int, b []byte) {
	if len(b) == 0 {
		return
	}
	c.busy.Add(1)
	c.mu.Lock()
	c.lossMu.Lock()
	failed := c.err[stream] != nil
	c.lossMu.Unlock()
	n, err := 0, error(nil)
	if !failed {
		n, err = c.out[stream].Write(b)
	}
	c.mu.Unlock()
	if failed || err != nil {
		c.lossMu.Lock()
		if c.err[stream] == nil {
			c.err[stream] = err
		}
		c.lost[stream] += int64(len(b) - n)
		c.lossMu.Unlock()
	}
	c.written.Add(uint64(len(b)))
	c.busy.Add(-1)
}

// losses says what could not be written, per stream ("" when nothing was
// lost).
func (c *console) losses() string {
	c.lossMu.Lock()
	defer c.lossMu.Unlock()
	var says []string
	for s := 1; s <= 2; s++ {
		if c.lost[s] > 0 {
			says = append(says, fmt.Sprintf("%d bytes of the workers' %s (%v)", c.lost[s], streamNames[s], c.err[s]))
		}
	}
	return strings.Join(says, " and ")
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
	path    string   // the file's name, named by the rank once it is known (ranked)
	ranked  bool
}

func newLineWriter(c *console, stream, size int) *lineWriter {
	return &lineWriter{c: c, stream: stream, size: size, buf: make([]byte, 0, max(size, 1)), index: -1, o: &outputs{}}
}

// streamNames are the streams' names in labels and file names.
var streamNames = [3]string{"", "stdout", "stderr"}

// who names the worker of this stream: "rank R", or before ranks are
// assigned (or for a worker the console does not know) "worker I" by its
// spawn index, or "pid P" for one that its launcher started unnamed.
func (w *lineWriter) who() (string, int) {
	if r, ok := w.o.rankOf(w.index); ok {
		return "rank", r
	}
	if w.index < -1 {
		return "pid", -1 - w.index
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
		if kind != "rank" {
			label = "[" + kind + " " + strconv.Itoa(n)
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
		name := w.fileName(kind, n)
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			w.c.write(2, []byte(fmt.Sprintf("udpconduit: GASNET_OUTPUT_DIR: %v; this stream goes to the console\n", err)))
			w.o = &outputs{label: w.o.label, ranks: w.o.ranks}
			w.emit(b)
			return
		}
		w.file, w.path, w.ranked = f, name, kind == "rank"
	}
	w.nameByRank()
	w.file.Write(b)
}

// fileName is the file of this stream of the worker who names (kind, n).
func (w *lineWriter) fileName(kind string, n int) string {
	return filepath.Join(w.o.dir, fmt.Sprintf("%s.%d.%s", kind, n, streamNames[w.stream]))
}

// nameByRank gives the stream's file, opened before the worker's rank was
// known (named by its spawn index), the rank's name once it is known.
func (w *lineWriter) nameByRank() {
	if w.file == nil || w.ranked {
		return
	}
	kind, n := w.who()
	if kind != "rank" {
		return
	}
	w.ranked = true
	name := w.fileName(kind, n)
	if err := os.Rename(w.path, name); err != nil {
		w.c.write(2, []byte(fmt.Sprintf("udpconduit: GASNET_OUTPUT_DIR: %v; the stream stays in %s\n", err, w.path)))
		return
	}
	w.path = name
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
		w.nameByRank()
		return w.file.Close()
	}
	return nil
}
