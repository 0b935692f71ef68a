package conduit

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// Remote atomics, as GASNet-EX's atomic domains (gex_AD_OpNB) and MPI's
// MPI_Fetch_and_op and MPI_Compare_and_swap give them: an operation on an
// aligned word of a rank's segment that happens as one step with respect
// to every other atomic on that word, from any rank.
//
// To a rank whose segment this process maps (itself, and the ranks of its
// shared-memory group: LocalView) an operation is a processor atomic on
// the mapping, complete on return. To any other rank it is one Short
// request, which the owner's handler applies with the same processor
// atomic on its segment, and one Short reply that carries the word's old
// value: the active-message layer runs each request exactly once, under
// loss and duplication, so each operation happens exactly once.

// Handler indexes of the remote atomics (the extended API's range, 64–127).
const (
	hAtomicReq   = 68 // Short request: op | kind<<8, offset lo/hi, x lo/hi, y lo/hi, handle
	hAtomicReply = 69 // Short reply: handle, refused, old value lo/hi
)

// localPollEvery: one atomic on a mapping in this many polls the network,
// as a remote one does: a poll pass costs a few times a processor atomic,
// and more with a read of the UDP socket.
const localPollEvery = 32

// Word is the types of word that remote atomics operate on.
type Word interface {
	int32 | uint32 | int64 | uint64 | float32 | float64
}

// AtomicOp is an operation of remote atomics. Every operation can fetch
// the value the word held before it (Fetch); all but AtomicGet can also
// be applied without fetching (Apply). x and y are the operands.
type AtomicOp uint8

// The atomic operations and what each stores. Integers wrap; float Min and
// Max follow Go's; CompareSwap compares bits; bitwise ones are for integers.
const (
	AtomicSet         = AtomicOp(amo.Set)         // x
	AtomicGet         = AtomicOp(amo.Get)         // the word unchanged (Fetch only)
	AtomicSwap        = AtomicOp(amo.Swap)        // x
	AtomicCompareSwap = AtomicOp(amo.CompareSwap) // y when the word equals x, else unchanged
	AtomicAdd         = AtomicOp(amo.Add)         // word + x
	AtomicSub         = AtomicOp(amo.Sub)         // word − x
	AtomicInc         = AtomicOp(amo.Inc)         // word + 1
	AtomicDec         = AtomicOp(amo.Dec)         // word − 1
	AtomicMult        = AtomicOp(amo.Mult)        // word × x
	AtomicMin         = AtomicOp(amo.Min)         // the smaller of word and x
	AtomicMax         = AtomicOp(amo.Max)         // the larger of word and x
	AtomicAnd         = AtomicOp(amo.And)         // word & x
	AtomicOr          = AtomicOp(amo.Or)          // word | x
	AtomicXor         = AtomicOp(amo.Xor)         // word ^ x
)

func (o AtomicOp) String() string { return amo.Op(o).String() }

// Atomics is an atomic domain (gex_AD_Create) on words of type T in the
// job's segments. Its methods may be called from any goroutine, not from a
// handler. Plain stores to the same words race with it.
type Atomics[T Word] struct {
	j    *Job
	kind amo.Kind
}

// NewAtomics returns the atomics of job j (nil: Default).
func NewAtomics[T Word](j *Job) *Atomics[T] {
	return &Atomics[T]{j: j, kind: kindOf[T]()}
}

// Fetch applies op with operands x and y to the word at offset of rank's
// segment and returns the value it held before.
func (a *Atomics[T]) Fetch(rank int, offset uint64, op AtomicOp, x, y T) (T, error) {
	old, err := a.do(rank, offset, op, x, y, true)
	return fromBits[T](old), err
}

// Apply is Fetch without the value.
func (a *Atomics[T]) Apply(rank int, offset uint64, op AtomicOp, x, y T) error {
	_, err := a.do(rank, offset, op, x, y, false)
	return err
}

// do is Fetch and Apply: on a mapped word it returns at once, with no
// handle.
func (a *Atomics[T]) do(rank int, offset uint64, op AtomicOp, x, y T, fetch bool) (uint64, error) {
	j, view, err := a.check(rank, offset, op, fetch)
	if err != nil {
		return 0, err
	}
	if view != nil {
		return a.local(j, view, offset, op, x, y)
	}
	h, err := a.send(j, rank, offset, op, x, y)
	if err != nil {
		return 0, err
	}
	if err := h.wait(); err != nil {
		return 0, err
	}
	return h.bits.Load(), nil
}

// FetchNB starts Fetch. A bad operation, type, alignment or range is an
// error before anything is sent.
func (a *Atomics[T]) FetchNB(rank int, offset uint64, op AtomicOp, x, y T) (*Handle[T], error) {
	h, err := a.start(rank, offset, op, x, y, true)
	if err != nil {
		return nil, err
	}
	return &Handle[T]{op: h, res: fetched[T]{h}}, nil
}

// fetched is the result of a FetchNB's operation.
type fetched[T Word] struct{ op *rmaOp }

func (f fetched[T]) value() T { return fromBits[T](f.op.bits.Load()) }

// ApplyNB starts Apply.
func (a *Atomics[T]) ApplyNB(rank int, offset uint64, op AtomicOp, x, y T) (*Handle[struct{}], error) {
	return handleOf(a.start(rank, offset, op, x, y, false))
}

// start is FetchNB and ApplyNB.
func (a *Atomics[T]) start(rank int, offset uint64, op AtomicOp, x, y T, fetch bool) (*rmaOp, error) {
	j, view, err := a.check(rank, offset, op, fetch)
	if err != nil {
		return nil, err
	}
	if view != nil {
		h := &rmaOp{job: j}
		old, err := a.local(j, view, offset, op, x, y)
		h.bits.Store(old)
		return h, err
	}
	return a.send(j, rank, offset, op, x, y)
}

// check returns the job, and rank's segment as this process maps it (nil
// when it does not), or why the operation cannot be done.
func (a *Atomics[T]) check(rank int, offset uint64, op AtomicOp, fetch bool) (*Job, []byte, error) {
	j := a.j
	if j == nil {
		var err error
		if j, err = job("Atomics"); err != nil {
			return nil, nil, err
		}
	}
	j.enter()
	if err := amo.Check(a.kind, amo.Op(op)); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrAtomicOp, err)
	}
	if !fetch && op == AtomicGet {
		return nil, nil, fmt.Errorf("%w: atomic get only fetches: use Fetch or FetchNB", ErrAtomicOp)
	}
	if rank < 0 || rank >= j.size {
		return nil, nil, fmt.Errorf("conduit: atomic %v: %w: rank %d, job of %d", op, amudp.ErrBadRank, rank, j.size)
	}
	size := a.kind.Size()
	if offset%uint64(size) != 0 {
		return nil, nil, fmt.Errorf("conduit: atomic %v on a %v at offset %d of rank %d's segment: %w", op, a.kind, offset, rank, ErrMisaligned)
	}
	if err := j.checkRemote(rank, offset, size); err != nil {
		return nil, nil, fmt.Errorf("conduit: atomic %v: %w", op, err)
	}
	return j, j.localView(rank), nil
}

// local applies the operation to a word of view, the mapping of a
// segment, and returns its old bits.
func (a *Atomics[T]) local(j *Job, view []byte, offset uint64, op AtomicOp, x, y T) (uint64, error) {
	old := amo.Apply(unsafe.Pointer(&view[offset]), a.kind, amo.Op(op), toBits(x), toBits(y))
	if j.nb.atomics.Add(1)%localPollEvery == 0 {
		// A rank that spins on its own words (a lock) still serves the
		// others' requests.
		if err := j.ep.Poll(); err != nil {
			return old, j.done(fmt.Errorf("conduit: atomic %v: %w", op, err))
		}
	}
	return old, nil
}

// send starts the operation on a remote rank: one Short request.
func (a *Atomics[T]) send(j *Job, rank int, offset uint64, op AtomicOp, x, y T) (*rmaOp, error) {
	xb, yb := toBits(x), toBits(y)
	h := &rmaOp{peer: rank, job: j, what: "an atomic " + op.String()}
	j.rma.add(h)
	h.pending.Store(1)
	err := j.ep.RequestShort(rank, hAtomicReq, uint32(op)|uint32(a.kind)<<8, uint32(offset), uint32(offset>>32),
		uint32(xb), uint32(xb>>32), uint32(yb), uint32(yb>>32), h.id)
	if err != nil {
		j.rma.forget(h)
		return nil, j.done(fmt.Errorf("conduit: atomic %v on rank %d: %w", op, rank, err))
	}
	return h, nil
}

// registerAtomics installs the handlers of remote atomics. The owner
// checks what it receives as the sender did: a request that does not fit
// its segment (a forged or corrupt one) is refused, and the sender's
// handle reports it.
func (j *Job) registerAtomics(hs map[int]amudp.Handler) {
	ep := j.ep
	hs[hAtomicReq] = func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) != 8 || !t.IsRequest() {
			return
		}
		op, kind := amo.Op(args[0]&0xff), amo.Kind(args[0]>>8&0xff)
		off := uint64(args[1]) | uint64(args[2])<<32
		seg := ep.Segment()
		size := uint64(kind.Size())
		if amo.Check(kind, op) != nil || args[0]>>16 != 0 || off%size != 0 || off > uint64(len(seg)) || size > uint64(len(seg))-off {
			t.ReplyShort(hAtomicReply, args[7], 1, 0, 0)
			return
		}
		old := amo.Apply(unsafe.Pointer(&seg[off]), kind, op, uint64(args[3])|uint64(args[4])<<32, uint64(args[5])|uint64(args[6])<<32)
		t.ReplyShort(hAtomicReply, args[7], 0, uint32(old), uint32(old>>32))
	}
	hs[hAtomicReply] = func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) != 4 || t.IsRequest() {
			return
		}
		h := j.rma.get(args[0])
		if h == nil || h.pending.Load() <= 0 {
			return
		}
		if args[1] != 0 {
			h.refused.Store(true)
		}
		h.bits.Store(uint64(args[2]) | uint64(args[3])<<32)
		j.rma.complete(h)
	}
}

// toBits is the word's bits, in the low 32 for a 32-bit type.
func toBits[T Word](v T) uint64 {
	switch v := any(v).(type) {
	case int32:
		return uint64(uint32(v))
	case uint32:
		return uint64(v)
	case int64:
		return uint64(v)
	case uint64:
		return v
	case float32:
		return uint64(math.Float32bits(v))
	case float64:
		return math.Float64bits(v)
	}
	return 0
}

// fromBits is toBits' inverse.
func fromBits[T Word](b uint64) T {
	var v T
	switch p := any(&v).(type) {
	case *int32:
		*p = int32(uint32(b))
	case *uint32:
		*p = uint32(b)
	case *int64:
		*p = int64(b)
	case *uint64:
		*p = b
	case *float32:
		*p = math.Float32frombits(uint32(b))
	case *float64:
		*p = math.Float64frombits(b)
	}
	return v
}
