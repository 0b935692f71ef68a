package conduit

// This file is vector, indexed and strided Put and Get (GASNet-EX's
// gex_VIS_*): many pieces of one rank's segment in one operation, packed
// into as few messages as fit, completed by one handle.

import (
	"fmt"

	"github.com/udpconduit/udpconduit/amudp"
	"github.com/udpconduit/udpconduit/amudp/shmem"
	"github.com/udpconduit/udpconduit/internal/varenc"
)

const (
	hVisPut      = 71 // Medium request: handle, message index; payload: a piece list, then the pieces' bytes
	hVisGet      = 72 // Medium request: handle, message index; payload: a piece list
	hVisGetReply = 73 // Medium reply: handle, message index, refused; payload: the pieces' bytes
	hVisDone     = 74 // Short reply: handle, refused
)

// Piece is a run of bytes of a vector transfer: Data at Offset of the remote
// segment.
type Piece struct {
	Offset uint64
	Data   []byte
}

// visHeader bounds the bytes a piece adds to a message's piece list (two
// uvarints).
const visHeader = 2 * 10

// visMsg is one message of a vector transfer: its pieces, each at most
// what fits.
type visMsg struct {
	pieces []Piece
	data   int // bytes of the pieces
}

// packPieces splits pieces into messages whose piece list and bytes fit a
// Medium payload (a piece that does not fit goes on in the next message;
// empty pieces are left out);
// with listOnly, only the piece lists count against the payload, and the
// bytes against a reply's.
func packPieces(pieces []Piece, listOnly bool) []visMsg {
	var msgs []visMsg
	var cur visMsg
	room := func() int {
		used := 10 + visHeader*(len(cur.pieces)+1)
		if listOnly {
			return min(MaxMedium-used, MaxMedium-cur.data)
		}
		return MaxMedium - used - cur.data
	}
	for _, p := range pieces {
		off, d := p.Offset, p.Data
		for len(d) > 0 {
			n := min(len(d), room())
			if n <= 0 {
				msgs, cur = append(msgs, cur), visMsg{}
				continue
			}
			cur.pieces = append(cur.pieces, Piece{Offset: off, Data: d[:n]})
			cur.data += n
			off, d = off+uint64(n), d[n:]
		}
	}
	if len(cur.pieces) > 0 {
		msgs = append(msgs, cur)
	}
	return msgs
}

// checkPieces returns an error when rank is no rank of the job or a piece
// lies outside its segment.
func (j *Job) checkPieces(rank int, pieces []Piece) error {
	if !j.attached.Load() {
		return ErrNotAttached
	}
	if rank < 0 || rank >= len(j.segs) {
		return fmt.Errorf("%w: rank %d of %d", ErrBadRank, rank, len(j.segs))
	}
	for _, p := range pieces {
		if err := j.checkRemote(rank, p.Offset, len(p.Data)); err != nil {
			return err
		}
	}
	return nil
}

// PutVNB starts writing each piece's Data at its Offset of dest's segment:
// one handle for all; the pieces may be reused on return. A piece outside
// the segment is an error before anything is sent.
func (j *Job) PutVNB(dest int, pieces []Piece) (*Handle[struct{}], error) {
	return handleOf(j.putVNB(dest, pieces))
}

// putVNB is PutVNB, its handle not yet wrapped.
func (j *Job) putVNB(dest int, pieces []Piece) (*rmaOp, error) {
	j.enter()
	if err := j.checkPieces(dest, pieces); err != nil {
		return nil, err
	}
	if v := j.localView(dest); v != nil {
		for _, p := range pieces {
			shmem.Copy(v[p.Offset:], p.Data)
		}
		if j.nb.counted {
			j.nb.puts.Add(1)
		}
		return &rmaOp{job: j}, nil
	}
	h := &rmaOp{job: j, peer: dest, what: "a vector put into its segment"}
	return j.sendVis(h, packPieces(pieces, false), hVisPut, "vector put to")
}

// GetVNB starts reading each piece's Data from its Offset of src's segment:
// one handle for all.
func (j *Job) GetVNB(src int, pieces []Piece) (*Handle[struct{}], error) {
	return handleOf(j.getVNB(src, pieces))
}

// getVNB is GetVNB, its handle not yet wrapped.
func (j *Job) getVNB(src int, pieces []Piece) (*rmaOp, error) {
	j.enter()
	if err := j.checkPieces(src, pieces); err != nil {
		return nil, err
	}
	if v := j.localView(src); v != nil {
		for _, p := range pieces {
			shmem.Copy(p.Data, v[p.Offset:])
		}
		if j.nb.counted {
			j.nb.gets.Add(1)
		}
		return &rmaOp{job: j}, nil
	}
	h := &rmaOp{job: j, peer: src, what: "a vector get from its segment", vis: packPieces(pieces, true)}
	return j.sendVis(h, h.vis, hVisGet, "vector get from")
}

// sendVis sends each of msgs to h's peer as a Medium request to handler,
// with h's id and the message's index: its piece list and, for a put, its
// pieces' bytes.
func (j *Job) sendVis(h *rmaOp, msgs []visMsg, handler int, what string) (*rmaOp, error) {
	if len(msgs) == 0 {
		return h, nil
	}
	j.rma.add(h)
	h.pending.Store(int64(len(msgs)))
	var buf []byte
	for i, m := range msgs {
		buf = appendPieceList(buf[:0], m.pieces)
		if handler == hVisPut {
			for _, p := range m.pieces {
				buf = append(buf, p.Data...)
			}
		}
		if err := j.ep.RequestMedium(h.peer, handler, buf, h.id, uint32(i)); err != nil {
			h.giveUp(i) // a get's replies must not write its pieces
			return nil, j.done(fmt.Errorf("conduit: %s rank %d: %w", what, h.peer, err))
		}
	}
	return h, nil
}

// PutV is PutVNB and a wait.
func (j *Job) PutV(dest int, pieces []Piece) error { return waitNB(j.PutVNB(dest, pieces)) }

// GetV is GetVNB and a wait.
func (j *Job) GetV(src int, pieces []Piece) error { return waitNB(j.GetVNB(src, pieces)) }

// PutIndexedNB is PutVNB of pieces of size bytes, packed in data, piece i at
// offsets[i].
func (j *Job) PutIndexedNB(dest int, offsets []uint64, size int, data []byte) (*Handle[struct{}], error) {
	ps, err := indexed(offsets, size, data)
	if err != nil {
		return nil, err
	}
	return j.PutVNB(dest, ps)
}

// GetIndexedNB is GetVNB of pieces of size bytes from offsets, piece i into
// buf[i*size:].
func (j *Job) GetIndexedNB(src int, offsets []uint64, size int, buf []byte) (*Handle[struct{}], error) {
	ps, err := indexed(offsets, size, buf)
	if err != nil {
		return nil, err
	}
	return j.GetVNB(src, ps)
}

// PutIndexed is PutIndexedNB and a wait.
func (j *Job) PutIndexed(dest int, offsets []uint64, size int, data []byte) error {
	return waitNB(j.PutIndexedNB(dest, offsets, size, data))
}

// GetIndexed is GetIndexedNB and a wait.
func (j *Job) GetIndexed(src int, offsets []uint64, size int, buf []byte) error {
	return waitNB(j.GetIndexedNB(src, offsets, size, buf))
}

// Strided describes Count pieces of Size bytes, piece i at Offset+i·Stride.
type Strided struct {
	Offset, Stride uint64
	Count, Size    int
}

// PutStridedNB is PutVNB of the pieces r describes, piece i from
// data[i*dataStride:].
func (j *Job) PutStridedNB(dest int, r Strided, data []byte, dataStride int) (*Handle[struct{}], error) {
	ps, err := strided(r, data, dataStride)
	if err != nil {
		return nil, err
	}
	return j.PutVNB(dest, ps)
}

// GetStridedNB is GetVNB of the pieces r describes, piece i into
// buf[i*bufStride:].
func (j *Job) GetStridedNB(src int, r Strided, buf []byte, bufStride int) (*Handle[struct{}], error) {
	ps, err := strided(r, buf, bufStride)
	if err != nil {
		return nil, err
	}
	return j.GetVNB(src, ps)
}

// PutStrided is PutStridedNB and a wait.
func (j *Job) PutStrided(dest int, r Strided, data []byte, dataStride int) error {
	return waitNB(j.PutStridedNB(dest, r, data, dataStride))
}

// GetStrided is GetStridedNB and a wait.
func (j *Job) GetStrided(src int, r Strided, buf []byte, bufStride int) error {
	return waitNB(j.GetStridedNB(src, r, buf, bufStride))
}

// indexed makes the pieces of an indexed transfer over local.
func indexed(offsets []uint64, size int, local []byte) ([]Piece, error) {
	if size < 0 || size > 0 && len(offsets) > len(local)/size {
		return nil, fmt.Errorf("conduit: indexed transfer of %d pieces of %d bytes over %d local bytes", len(offsets), size, len(local))
	}
	ps := make([]Piece, len(offsets))
	for i, o := range offsets {
		ps[i] = Piece{Offset: o, Data: local[i*size : (i+1)*size]}
	}
	return ps, nil
}

// strided makes the pieces of a strided transfer over local.
func strided(r Strided, local []byte, stride int) ([]Piece, error) {
	if r.Count < 0 || r.Size < 0 || stride < r.Size || r.Count > 0 && (len(local) < r.Size || stride > 0 && r.Count-1 > (len(local)-r.Size)/stride) {
		return nil, fmt.Errorf("conduit: strided transfer of %d pieces of %d bytes every %d local bytes over %d", r.Count, r.Size, stride, len(local))
	}
	ps := make([]Piece, r.Count)
	for i := range ps {
		ps[i] = Piece{Offset: r.Offset + uint64(i)*r.Stride, Data: local[i*stride : i*stride+r.Size]}
	}
	return ps, nil
}

// appendPieceList appends the list of pieces' offsets and lengths.
func appendPieceList(b []byte, ps []Piece) []byte {
	b = varenc.AppendUint(b, uint64(len(ps)))
	for _, p := range ps {
		b = varenc.AppendUint(varenc.AppendUint(b, p.Offset), uint64(len(p.Data)))
	}
	return b
}

// readPieceList reads a piece list whose pieces lie in a segment of size
// seg bytes and whose lengths sum to at most limit: the pieces (Data
// unset, its length in Offset's companion) and the rest of b, or ok false.
func readPieceList(b []byte, seg uint64, limit int) (offs []uint64, lens []int, rest []byte, ok bool) {
	d := varenc.Decoder{B: b}
	n := d.Uint()
	if d.Bad || n > uint64(len(b)) {
		return nil, nil, nil, false
	}
	total := 0
	for range n {
		off, ln := d.Uint(), d.Uint()
		if d.Bad || off > seg || ln > seg-off || ln > uint64(limit-total) {
			return nil, nil, nil, false
		}
		offs, lens = append(offs, off), append(lens, int(ln))
		total += int(ln)
	}
	return offs, lens, d.B, true
}

// registerVIS installs the handlers of vector transfers.
func (j *Job) registerVIS(hs map[int]amudp.Handler) {
	ep := j.ep
	hs[hVisPut] = func(t *amudp.Token, args []uint32, p []byte) {
		if len(args) != 2 || !t.IsRequest() {
			return
		}
		seg := ep.Segment()
		offs, lens, data, ok := readPieceList(p, uint64(len(seg)), len(p))
		total := 0
		for _, n := range lens {
			total += n
		}
		if !ok || total != len(data) {
			t.ReplyShort(hVisDone, args[0], 1)
			return
		}
		for i, off := range offs {
			copy(seg[off:], data[:lens[i]])
			data = data[lens[i]:]
		}
		t.ReplyShort(hVisDone, args[0], 0)
	}
	hs[hVisDone] = func(t *amudp.Token, args []uint32, _ []byte) {
		if len(args) != 2 || t.IsRequest() {
			return
		}
		if h := j.rma.get(args[0]); h != nil && h.pending.Load() > 0 {
			if args[1] != 0 {
				h.refused.Store(true)
			}
			j.rma.complete(h)
		}
	}
	hs[hVisGet] = func(t *amudp.Token, args []uint32, p []byte) {
		if len(args) != 2 || !t.IsRequest() {
			return
		}
		seg := ep.Segment()
		offs, lens, rest, ok := readPieceList(p, uint64(len(seg)), MaxMedium)
		if !ok || len(rest) != 0 {
			t.ReplyMedium(hVisGetReply, nil, args[0], args[1], 1)
			return
		}
		total := 0
		for _, n := range lens {
			total += n
		}
		// The pieces are gathered into the reply's own buffer.
		pr, err := t.PrepareReply(amudp.Medium, total, 3, 0)
		if err != nil {
			t.ReplyMedium(hVisGetReply, nil, args[0], args[1], 1)
			return
		}
		out := pr.Payload()
		for i, off := range offs {
			out = out[copy(out, seg[off:off+uint64(lens[i])]):]
		}
		pr.Commit(hVisGetReply, total, args[0], args[1], 0)
	}
	hs[hVisGetReply] = func(t *amudp.Token, args []uint32, p []byte) {
		if len(args) != 3 || t.IsRequest() {
			return
		}
		h := j.rma.get(args[0])
		if h == nil || h.pending.Load() <= 0 || int(args[1]) >= len(h.vis) {
			return
		}
		m := h.vis[args[1]]
		if args[2] != 0 || len(p) != m.data {
			h.refused.Store(true)
		} else {
			for _, pc := range m.pieces {
				p = p[copy(pc.Data, p):]
			}
		}
		j.rma.complete(h)
	}
}
