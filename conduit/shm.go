package conduit

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/amudp/shmem"
)

// shmLeaders returns, for every rank, the leader (lowest rank) of its
// shared-memory group: the ranks of one host (the same host identity) that
// have an inbox form groups of at most max consecutive ranks of the host
// (0: one group per host), GASNet's supernodes; a rank without an inbox is
// a group of its own, as is every rank with max 1. Every rank computes the
// same from the relayed table.
func shmLeaders(hosts, inboxes []string, max int) []int {
	leaders := make([]int, len(hosts))
	type host struct {
		count int // ranks with an inbox seen so far
		first int // the leader of the current group
	}
	seen := map[string]*host{}
	var last string
	var at *host // hosts[r-1]'s, where a host's ranks come in a row
	for r, h := range hosts {
		leaders[r] = r
		if r >= len(inboxes) || inboxes[r] == "" || max == 1 {
			continue
		}
		if at == nil || h != last {
			if at = seen[h]; at == nil {
				at = &host{}
				seen[h] = at
			}
			last = h
		}
		if at.count == 0 || (max > 0 && at.count%max == 0) {
			at.first = r
		}
		at.count++
		leaders[r] = at.first
	}
	return leaders
}

// shmGroup returns the ranks of rank's group (shmLeaders), in order: those
// that exchange messages with it through shared memory. rank is in it.
func shmGroup(leaders []int, rank int) []int {
	g := make([]int, 0, count(leaders, leaders[rank]))
	for r, l := range leaders {
		if l == leaders[rank] {
			g = append(g, r)
		}
	}
	return g
}

// count returns how many of s are v.
func count[T comparable](s []T, v T) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// groupSize says the size of the shared-memory groups, for verbose mode.
func groupSize(max int) string {
	if max <= 0 {
		return "all of them"
	}
	return "at most " + strconv.Itoa(max)
}

// nbrhd holds what a rank shares with the ranks of its shared-memory group
// (shmGroup), its neighbourhood: their segments, mapped into this process
// on first use, so that Put, Get and LocalView reach them with a copy or a
// load. Attach fills it; it is empty (group of one) when the rank shares
// no memory.
type nbrhd struct {
	group []int         // the group's ranks, in order, this one included
	own   *shmem.Region // this rank's segment, when shared

	// Set by Attach before j.attached, read-only after: every rank's
	// segment path ("" for none or outside the group).
	paths []string

	mu    sync.Mutex               // serialises mapping
	views []atomic.Pointer[[]byte] // by rank, once looked at (this rank's own: Attach); a nil slice: cannot be mapped
	// direct is what Put's and Get's fast path (Job.mapped) reads: views,
	// from Attach on, unless the calls are counted; nil before, and once
	// the job aborts here (Job.setAborting).
	direct atomic.Pointer[[]atomic.Pointer[[]byte]]

	puts, gets atomic.Uint64 // Put and Get calls done by a copy, when counted
	counted    bool          // GASNET_STATS: count them (set before Attach)
	atomics    atomic.Uint64 // atomics done on a mapping (Atomics)
}

// in reports whether rank is in the group.
func (n *nbrhd) in(rank int) bool {
	_, ok := slices.BinarySearch(n.group, rank)
	return ok
}

// alloc returns a segment of size bytes: shared memory when the rank is
// in a group of two or more, anonymous memory otherwise or when shared
// memory cannot be had.
func (n *nbrhd) alloc(size int) ([]byte, error) {
	if len(n.group) > 1 && size > 0 && size <= MaxSegment {
		// A memfd reserves no memory: ask the kernel first, as for an
		// anonymous segment, whether size bytes can be had, so that a
		// segment too large fails here, not with SIGBUS when touched.
		probe, err := allocSegment(size)
		if err != nil {
			return nil, err
		}
		freeSegment(probe)
		if r, err := shmem.Create("udpconduit-segment", size); err == nil {
			n.own = r
			return r.Bytes(), nil
		}
	}
	return allocSegment(size)
}

// path is this rank's segment path for Attach's exchange; "" when not shared.
func (n *nbrhd) path() string {
	if n.own == nil {
		return ""
	}
	return n.own.Path()
}

// release frees an own segment that Attach could not complete.
func (n *nbrhd) release() {
	if n.own != nil {
		n.own.Release()
		n.own = nil
	}
}

// setPaths records the segment paths that Attach's exchange gave, keeping
// those of the group.
func (n *nbrhd) setPaths(paths []string) {
	n.views = make([]atomic.Pointer[[]byte], len(paths))
	n.paths = make([]string, len(paths))
	for r, p := range paths {
		if n.in(r) {
			n.paths[r] = p
		}
	}
}

// view returns rank's segment, of size bytes, as mapped into this process;
// nil when it is not in the group, has no shared segment or cannot be
// mapped (Put and Get then send messages).
func (n *nbrhd) view(rank int, size uint64) []byte {
	if rank < 0 || rank >= len(n.views) || n.paths[rank] == "" {
		return nil
	}
	if v := n.views[rank].Load(); v != nil {
		return *v
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if v := n.views[rank].Load(); v != nil {
		return *v
	}
	// nil when it cannot be mapped, which is remembered: the next look
	// does not try again.
	mem, _ := shmem.Map(n.paths[rank], int(size), int(size))
	n.views[rank].Store(&mem)
	return mem
}

// fatal ends the job for an error after which this rank's endpoint cannot
// keep its promises (amudp.Endpoint.SetFatalHandler): a corrupted
// shared-memory inbox, this rank's own or that of a rank it shares memory
// with (an *amudp.InboxError, "rank 2: corrupted shared-memory inbox
// (found by rank 1: ...)"), found in the queue or in the collectives'
// words (words.corrupt). Unlike abortJob it prints nothing: each rank
// that finds the inbox corrupted aborts the job, and the console says the
// first abort's reason in its one line, "rank 1 on host aborted the job
// (code 1): rank 2: corrupted shared-memory inbox (...)". In a worker it
// does not return.
func (j *Job) fatal(err error) {
	if j.setAborting() {
		return
	}
	j.ctl.Abort(1, err.Error(), j.exitTimeout)
}
