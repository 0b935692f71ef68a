package launch

import (
	"encoding/hex"
	"strings"
	"time"

	"github.com/udpconduit/udpconduit/internal/varenc"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// TreeInfo is what a worker of a spawn tree needs to start its children
// (GASNET_SSH_OUT_DEGREE, DESIGN.md §9): every host of the job, in spawn
// index order, and how the console starts a worker.
type TreeInfo struct {
	Servers []string // entries as listed, one per worker
	Degree  int
	Program string // its path on the hosts
	Args    []string
	Dir     string // the workers' directory
}

// The TreeInfo's line on a worker's ssh session: its body in the control
// frames' encoding, in hexadecimal.

func (t TreeInfo) AppendBody(b []byte) []byte {
	b = varenc.AppendInt(varenc.AppendStrings(b, t.Servers), t.Degree)
	return varenc.AppendString(varenc.AppendStrings(varenc.AppendString(b, t.Program), t.Args), t.Dir)
}

func (t *TreeInfo) ReadBody(d *varenc.Decoder) {
	t.Servers, t.Degree = d.Strings(), d.Int()
	t.Program, t.Args, t.Dir = d.String(), d.Strings(), d.String()
}

// treeLine encodes t as the line a tree worker reads from its session.
func treeLine(t *TreeInfo) string { return hex.EncodeToString(t.AppendBody(nil)) }

// ParseTreeLine decodes a treeLine.
func ParseTreeLine(line string) (*TreeInfo, error) {
	b, err := hex.DecodeString(strings.TrimSpace(line))
	if err != nil {
		return nil, err
	}
	t := new(TreeInfo)
	if err := ctl.DecodeBody(b, t); err != nil {
		return nil, err
	}
	return t, nil
}

// spawnChildren returns the spawn indexes worker i of an n-worker tree of
// out-degree d starts: first, first+1, ... count of them. The console
// (i = -1) starts 0..d-1.
func spawnChildren(i, d, n int) (first, count int) {
	first = d * (i + 1)
	return first, max(0, min(d, n-first))
}

// treeDepth is the number of levels of an n-worker tree of out-degree d
// (1 when the console starts every worker).
func treeDepth(d, n int) int {
	if d <= 0 || n <= d {
		return 1
	}
	depth := 1
	for i := n - 1; i >= d; i = i/d - 1 {
		depth++
	}
	return depth
}

// Subtree is a tree worker's children.
type Subtree struct {
	done    chan struct{} // closed when all have ended
	welcome chan struct{} // closed when this worker is welcomed
	wait    time.Duration // how long an exit waits for them
}

// Welcomed tells the subtree that this worker has its welcome: from then
// on a child's end is the job's business, not a failed start.
func (st *Subtree) Welcomed() {
	if st != nil {
		close(st.welcome)
	}
}

// WaitEnd waits, before this worker exits, for its children to end (for at
// most the exit timeout): its exit closes their ssh sessions, which would
// end them at once.
func (st *Subtree) WaitEnd() {
	if st == nil {
		return
	}
	select {
	case <-st.done:
	case <-time.After(st.wait):
	}
}
