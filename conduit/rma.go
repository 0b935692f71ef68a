package conduit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/shmem"
)

// Handler indexes of the extended API (64–127, DESIGN.md §3).
const (
	hPut      = 64 // Long request: data written; replies hDone
	hGetReq   = 65 // Short request: args offset lo/hi, length, handle, chunk offset
	hGetReply = 66 // Medium reply: handle, chunk offset
	hDone     = 67 // Short reply: handle
)

// Handle is a non-blocking Put, Get or atomic (ApplyNB) in progress.
// Done and Wait may be called from any goroutine, by several at once; a
// Get's buffer is filled once Done reports true, and must not be read
// before.
type rmaOp struct {
	id      uint32
	pending atomic.Int64
	dst     []byte // Get destination
	refused atomic.Bool
	peer    int
	job     *Job
	// what names the operation, for the error of one refused ("a get
	// from its segment" when empty); bits is an atomic's fetched value.
	what string
	bits atomic.Uint64
	// vis is a vector get's messages, whose replies fill their pieces.
	vis []visMsg
}

// owner is the Job of the operation.
func (h *rmaOp) owner() *Job { return h.job }

// done reports whether the operation completed.
func (h *rmaOp) done() bool { return h.pending.Load() == 0 }

// waitContext is wait bounded by ctx: when ctx ends first it returns
// ctx's error, and the operation goes on; a later Wait or Test sees it
// complete.
func (h *rmaOp) waitContext(ctx context.Context) error {
	j := h.job
	j.enter()
	if err := j.waitContext(ctx, h.done); err != nil {
		return err
	}
	return h.wait()
}

// Wait services the network until the operation completes (see
// Job.WaitUntil for where handlers run meanwhile). Not from a handler.
func (h *rmaOp) wait() error {
	h.job.enter()
	err := h.job.wait(h.done)
	h.job.rma.forget(h)
	if err == nil && h.refused.Load() {
		err = fmt.Errorf("%w: rank %d refused %s", ErrOutOfSegment, h.peer, cmp.Or(h.what, "a get from its segment"))
	}
	return err
}

type rma struct {
	mu      sync.Mutex
	next    uint32
	handles map[uint32]*rmaOp
}

func (r *rma) add(h *rmaOp) {
	r.mu.Lock()
	if r.handles == nil {
		r.handles = map[uint32]*rmaOp{}
	}
	// Id 0 is that of the handles of operations done on a mapping, which
	// never enter the map; after 2^32 handles the ids wrap, past those
	// still waited for.
	for r.next++; r.next == 0 || r.handles[r.next] != nil; r.next++ {
	}
	h.id = r.next
	r.handles[h.id] = h
	r.mu.Unlock()
}

func (r *rma) get(id uint32) *rmaOp {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.handles[id]
}

func (r *rma) forget(h *rmaOp) {
	if h.id == 0 {
		return
	}
	r.mu.Lock()
	if r.handles[h.id] == h {
		delete(r.handles, h.id)
	}
	r.mu.Unlock()
}

// complete counts one part of h's operation done, and forgets h once all
// are, so that a handle only looked at with Done leaves nothing behind.
func (r *rma) complete(h *rmaOp) {
	if h.pending.Add(-1) == 0 {
		r.forget(h)
	}
}

// registerCore installs the library's handlers. Each checks what it
// receives (argument count, handle, ranges) and ignores a message that does
// not fit: only the library sends to these indexes (Config.Reserved keeps
// client replies out), so a misfit is a forged or corrupt message, never a
// reason to crash.
func (j *Job) registerCore() {
	ep := j.ep
	hs := map[int]amudp.Handler{}
	hs[hTable] = j.table.chunk
	hs[hPut] = func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) == 1 && t.IsRequest() {
			t.ReplyShort(hDone, args[0])
		}
	}
	hs[hDone] = func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) != 1 || t.IsRequest() {
			return
		}
		if h := j.rma.get(args[0]); h != nil && h.pending.Load() > 0 {
			j.rma.complete(h)
		}
	}
	hs[hGetReq] = func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) != 5 || !t.IsRequest() {
			return
		}
		off := uint64(args[0]) | uint64(args[1])<<32
		n := uint64(args[2])
		seg := ep.Segment()
		if n > MaxMedium || off > uint64(len(seg)) || n > uint64(len(seg))-off {
			t.ReplyMedium(hGetReply, nil, args[3], args[4], 1)
			return
		}
		t.ReplyMedium(hGetReply, seg[off:off+n], args[3], args[4], 0)
	}
	j.registerAtomics(hs)
	hs[hTeam] = j.teams.message
	j.registerVIS(hs)
	hs[hGetReply] = func(t *amudp.Token, args []uint32, p []byte) {
		if len(args) != 3 || t.IsRequest() {
			return
		}
		h := j.rma.get(args[0])
		if h == nil || h.pending.Load() <= 0 || uint64(args[1]) > uint64(len(h.dst)) || len(p) > len(h.dst)-int(args[1]) {
			return
		}
		if args[2] != 0 {
			h.refused.Store(true)
		}
		copy(h.dst[args[1]:], p)
		j.rma.complete(h)
	}
	ep.RegisterAll(hs)
}

// PutNB starts writing data at offset of dest's segment; data may be reused
// on return.
func (j *Job) PutNB(dest int, offset uint64, data []byte) (*Handle[struct{}], error) {
	if copied, err := j.putCopy(dest, offset, data); err != nil || copied {
		return handleOf(&rmaOp{job: j}, err)
	}
	return handleOf(j.putSend(dest, offset, data))
}

// putSend sends a put that putCopy checked and did not do by a copy.
func (j *Job) putSend(dest int, offset uint64, data []byte) (*rmaOp, error) {
	h := &rmaOp{job: j}
	j.rma.add(h)
	chunks := (len(data) + MaxLong - 1) / MaxLong
	h.pending.Store(int64(chunks))
	for i := 0; i < chunks; i++ {
		c := data[i*MaxLong : min((i+1)*MaxLong, len(data))]
		if err := j.ep.RequestLong(dest, hPut, c, offset+uint64(i*MaxLong), h.id); err != nil {
			j.rma.forget(h)
			return nil, j.done(fmt.Errorf("conduit: put to rank %d: %w", dest, err))
		}
	}
	return h, nil
}

// putCopy checks a put and, to a rank whose segment this process maps,
// does it by a copy: then it reports true.
func (j *Job) putCopy(dest int, offset uint64, data []byte) (bool, error) {
	j.enter()
	if err := j.checkRemote(dest, offset, len(data)); err != nil {
		return false, err
	}
	v := j.localView(dest)
	if v == nil {
		return false, nil
	}
	shmem.Copy(v[offset:], data)
	if j.nb.counted {
		j.nb.puts.Add(1)
	}
	return true, nil
}

// Put writes data at offset of dest's segment and waits until it is there.
func (j *Job) Put(dest int, offset uint64, data []byte) error {
	if v := j.mapped(dest); offset <= uint64(len(v)) && uint64(len(data)) <= uint64(len(v))-offset && v != nil {
		if !shmem.CopySmall(v[offset:], data) {
			shmem.Copy(v[offset:], data)
		}
		return nil
	}
	return j.put(dest, offset, data)
}

// mapped is the fast path of Put and Get: dest's segment when this
// process has mapped it (LocalView, once looked at) and the job goes on
// here (nbrhd.direct, Job.term); nil otherwise.
func (j *Job) mapped(rank int) []byte {
	if vs := j.nb.direct.Load(); vs != nil && uint(rank) < uint(len(*vs)) && !j.term.Load() {
		if v := (*vs)[rank].Load(); v != nil {
			return *v
		}
	}
	return nil
}

// put is Put where mapped found no mapping.
func (j *Job) put(dest int, offset uint64, data []byte) error {
	if copied, err := j.putCopy(dest, offset, data); err != nil || copied {
		return err
	}
	h, err := j.putSend(dest, offset, data)
	if err != nil {
		return err
	}
	return h.wait()
}

// abandon forgets h, whose operation has not completed, so that no reply
// of it writes into the caller's memory from now on: once forgotten, the
// handlers drop its replies (each looks h up under rma.mu), and the poll
// pass in progress (whose handlers may have looked h up) ends before
// abandon returns. Not from a handler, whose own pass would never end.
func (h *rmaOp) abandon() {
	h.job.rma.forget(h)
	h.job.ep.Fence()
}

// giveUp forgets h after sent of its requests went out and the next
// failed: abandoned when some did, forgotten only when none did (the
// failure may be a request refused inside a handler, where abandon
// would wait for its own pass).
func (h *rmaOp) giveUp(sent int) {
	if sent == 0 {
		h.job.rma.forget(h)
		return
	}
	h.abandon()
}

// GetNB starts reading len(buf) bytes at offset of src's segment into buf.
func (j *Job) GetNB(src int, offset uint64, buf []byte) (*Handle[struct{}], error) {
	if copied, err := j.getCopy(src, offset, buf); err != nil || copied {
		return handleOf(&rmaOp{job: j}, err)
	}
	return handleOf(j.getSend(src, offset, buf))
}

// getSend sends a get that getCopy checked and did not do by a copy; when
// a request fails, nothing writes into buf after getSend returns.
func (j *Job) getSend(src int, offset uint64, buf []byte) (*rmaOp, error) {
	h := &rmaOp{dst: buf, peer: src, job: j}
	j.rma.add(h)
	chunks := (len(buf) + MaxMedium - 1) / MaxMedium
	h.pending.Store(int64(chunks))
	for i := 0; i < chunks; i++ {
		n := min(MaxMedium, len(buf)-i*MaxMedium)
		off := offset + uint64(i*MaxMedium)
		if err := j.ep.RequestShort(src, hGetReq, uint32(off), uint32(off>>32), uint32(n), h.id, uint32(i*MaxMedium)); err != nil {
			h.giveUp(i) // replies of the requests sent must not write buf
			return nil, j.done(fmt.Errorf("conduit: get from rank %d: %w", src, err))
		}
	}
	return h, nil
}

// getCopy checks a get and, from a rank whose segment this process maps,
// does it by a copy: then it reports true.
func (j *Job) getCopy(src int, offset uint64, buf []byte) (bool, error) {
	j.enter()
	if err := j.checkRemote(src, offset, len(buf)); err != nil {
		return false, err
	}
	v := j.localView(src)
	if v == nil {
		return false, nil
	}
	shmem.Copy(buf, v[offset:])
	if j.nb.counted {
		j.nb.gets.Add(1)
	}
	return true, nil
}

// Get reads len(buf) bytes at offset of src's segment into buf.
func (j *Job) Get(src int, offset uint64, buf []byte) error {
	if v := j.mapped(src); offset <= uint64(len(v)) && uint64(len(buf)) <= uint64(len(v))-offset && v != nil {
		if !shmem.CopySmall(buf, v[offset:offset+uint64(len(buf))]) {
			shmem.Copy(buf, v[offset:])
		}
		return nil
	}
	return j.get(src, offset, buf)
}

// get is Get where mapped found no mapping.
func (j *Job) get(src int, offset uint64, buf []byte) error {
	if copied, err := j.getCopy(src, offset, buf); err != nil || copied {
		return err
	}
	h, err := j.getSend(src, offset, buf)
	if err != nil {
		return err
	}
	return h.wait()
}

// LocalView returns rank's segment as this process maps it, to load from and
// store into directly (GASNet-EX's gex_EP_QueryBoundSegmentNB): this rank's
// own, and those of its Neighbors in shared memory; nil otherwise. Stores
// through a view are ordered as Puts are: visible to other ranks after a
// barrier both pass, or to the handler of a message sent after them; use
// sync/atomic for words that ranks update concurrently.
func (j *Job) LocalView(rank int) []byte {
	j.enter()
	if !j.attached.Load() {
		return nil
	}
	return j.localView(rank)
}

// localView is LocalView after Attach.
func (j *Job) localView(rank int) []byte {
	if rank == j.rank {
		return j.ep.Segment()
	}
	if rank < 0 || rank >= len(j.segs) {
		return nil
	}
	return j.nb.view(rank, j.segs[rank])
}

// peerView is amudp's view of the segments of the other ranks of the
// group (Endpoint.SetPeerSegments): Long messages to them go straight
// into their segments.
func (j *Job) peerView(rank int) []byte {
	if rank == j.rank || !j.attached.Load() {
		return nil
	}
	return j.localView(rank)
}

// Neighbors returns the ranks of this rank's shared-memory group, this rank
// included (GASNet's supernode), in order.
func (j *Job) Neighbors() []int { return slices.Clone(j.nb.group) }
