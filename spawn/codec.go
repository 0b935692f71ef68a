package spawn

import (
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"slices"
)

// The bodies of control frames are binary: each type's fields in a fixed
// order, integers as varints (signed ones zig-zag), strings and lists as a
// uvarint length then their bytes or elements, maps as a list of key/value
// pairs sorted by key: one idiom, without reflection, for every frame (and
// the spawn tree's line, see TreeInfo).

// frameBody is the body of a control frame, to send.
type frameBody interface{ appendBody(b []byte) []byte }

// bodyReader is the body of a control frame, to receive.
type bodyReader interface{ readBody(d *decoder) }

// noBody is the body of frames that carry none (ping, pong, barrier).
type noBody struct{}

func (noBody) appendBody(b []byte) []byte { return b }

var errMalformed = errors.New("spawn: malformed control frame")

// decodeBody decodes a frame's body into v: it fails on a truncated body,
// on bytes left over, on an integer outside int32, on a list longer than
// the bytes left and on a bool other than 0 or 1.
func decodeBody(b []byte, v bodyReader) error {
	d := decoder{b: b}
	v.readBody(&d)
	if d.bad || len(d.b) != 0 {
		return errMalformed
	}
	return nil
}

func appendInt(b []byte, v int) []byte { return binary.AppendVarint(b, int64(v)) }

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendStrings(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = appendString(b, s)
	}
	return b
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// decoder reads a body; after the first error it reads zeros and bad stays
// set.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) fail() { d.bad, d.b = true, nil }

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int {
	v, n := binary.Varint(d.b)
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return int(v)
}

func (d *decoder) string() string {
	l := d.uvarint()
	if l > uint64(len(d.b)) {
		d.fail()
		return ""
	}
	s := string(d.b[:l])
	d.b = d.b[l:]
	return s
}

// count reads the length of a list whose elements take at least one byte
// each, so that a forged length cannot make the reader allocate more than
// the body's size.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) strings() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.string()
	}
	return l
}

func (d *decoder) bool() bool {
	if len(d.b) == 0 || d.b[0] > 1 {
		d.fail()
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (h Hello) appendBody(b []byte) []byte { return appendString(b, h.Secret) }
func (h *Hello) readBody(d *decoder)       { h.Secret = d.string() }

func (j Join) appendBody(b []byte) []byte {
	b = appendInt(appendInt(b, j.Rank), j.Index)
	b = appendString(appendString(b, j.Host), j.Name)
	return appendString(appendInt(appendString(appendInt(b, j.PID), j.UDP), j.CPUs), j.Mask)
}

func (j *Join) readBody(d *decoder) {
	j.Rank, j.Index = d.int(), d.int()
	j.Host, j.Name = d.string(), d.string()
	j.PID, j.UDP, j.CPUs, j.Mask = d.int(), d.string(), d.int(), d.string()
}

func (w Welcome) appendBody(b []byte) []byte {
	b = appendInt(appendInt(b, w.Rank), w.Size)
	b = appendStrings(appendStrings(b, w.Addrs), w.Hosts)
	b = binary.AppendUvarint(b, uint64(len(w.Peers)))
	for _, r := range slices.Sorted(maps.Keys(w.Peers)) {
		b = appendString(appendInt(b, r), w.Peers[r])
	}
	b = binary.AppendUvarint(b, uint64(len(w.Env)))
	for _, k := range slices.Sorted(maps.Keys(w.Env)) {
		b = appendString(appendString(b, k), w.Env[k])
	}
	return appendBool(appendInt(appendInt(b, w.HostCount), w.HostCPUs), w.Crowded)
}

func (w *Welcome) readBody(d *decoder) {
	w.Rank, w.Size = d.int(), d.int()
	w.Addrs, w.Hosts = d.strings(), d.strings()
	w.Peers = nil
	if n := d.count(); n > 0 {
		w.Peers = make(map[int]string, n)
		for range n {
			r := d.int()
			w.Peers[r] = d.string()
		}
	}
	n := d.count()
	w.Env = make(map[string]string, n)
	for range n {
		k := d.string()
		w.Env[k] = d.string()
	}
	w.HostCount, w.HostCPUs, w.Crowded = d.int(), d.int(), d.bool()
}

func (c Coll) appendBody(b []byte) []byte {
	b = appendBool(binary.AppendUvarint(appendString(b, c.Kind), c.Seq), c.In)
	return binary.AppendUvarint(appendInt(binary.AppendUvarint(b, c.Tree), c.Root), c.Index)
}

func (c *Coll) readBody(d *decoder) {
	c.Kind, c.Seq, c.In, c.Tree, c.Root, c.Index = d.string(), d.uvarint(), d.bool(), d.uvarint(), d.int(), d.uvarint()
}

func (c Code) appendBody(b []byte) []byte { return appendString(appendInt(b, c.Code), c.Why) }
func (c *Code) readBody(d *decoder)       { c.Code, c.Why = d.int(), d.string() }

func (o Output) appendBody(b []byte) []byte {
	return appendInt(appendInt(appendInt(appendString(b, o.Secret), o.Stream), o.Index), o.PID)
}

func (o *Output) readBody(d *decoder) {
	o.Secret, o.Stream, o.Index, o.PID = d.string(), d.int(), d.int(), d.int()
}
