// Package varenc is udpconduit's one idiom for binary encodings without
// reflection: append-style encoders, and a Decoder that reads the same
// fields in the same order, with a sticky error. Integers are varints
// (signed ones zig-zag), strings and byte strings a uvarint length then
// their bytes, lists a uvarint count then their elements, booleans one
// byte. The control frames and the spawn tree's line (spawn/internal/ctl, spawn/internal/launch), the
// relayed address table and the all-gather's parts (package conduit) use
// it.
package varenc

import (
	"encoding/binary"
	"math"
)

// AppendUint appends v as a uvarint.
func AppendUint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// AppendInt appends v as a zig-zag varint.
func AppendInt(b []byte, v int) []byte { return binary.AppendVarint(b, int64(v)) }

// AppendInt64 appends v as a zig-zag varint, for values that need more
// than an int32 (Int64 reads them).
func AppendInt64(b []byte, v int64) []byte { return binary.AppendVarint(b, v) }

// AppendString appends s: its length, then its bytes.
func AppendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// AppendBytes appends p: its length, then its bytes.
func AppendBytes(b, p []byte) []byte { return append(binary.AppendUvarint(b, uint64(len(p))), p...) }

// AppendStrings appends l: its count, then each string.
func AppendStrings(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = AppendString(b, s)
	}
	return b
}

// AppendBool appends v as one byte, 0 or 1.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// Decoder reads fields from the front of B. After the first malformed
// field it reads zeros and Bad stays set; a caller checks Bad (and that B
// is empty, if nothing may follow) once, at the end.
type Decoder struct {
	B   []byte
	Bad bool
	// shared, when set (Shared), is B as one string whose substrings
	// String returns: one copy for all the strings read.
	shared string
}

// Shared returns a Decoder of b whose strings share one copy of b (a table
// of thousands of short strings costs one allocation).
func Shared(b []byte) Decoder { return Decoder{B: b, shared: string(b)} }

func (d *Decoder) fail() { d.Bad, d.B = true, nil }

// Uint reads a uvarint.
func (d *Decoder) Uint() uint64 {
	v, n := binary.Uvarint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Int reads a zig-zag varint, which must fit an int32 (the range every
// encoding here uses, whatever the platform's int).
func (d *Decoder) Int() int {
	v, n := binary.Varint(d.B)
	if n <= 0 || v < math.MinInt32 || v > math.MaxInt32 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return int(v)
}

// Int64 reads a zig-zag varint of any int64 (AppendInt64).
func (d *Decoder) Int64() int64 {
	v, n := binary.Varint(d.B)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.B = d.B[n:]
	return v
}

// Bytes reads a byte string. The result aliases B, and its capacity ends
// where it does, so that appending to it never writes over what follows.
func (d *Decoder) Bytes() []byte {
	l := d.Uint()
	if l > uint64(len(d.B)) {
		d.fail()
		return nil
	}
	p := d.B[:l:l]
	d.B = d.B[l:]
	return p
}

// String reads a string: a copy, or a substring of the shared copy.
func (d *Decoder) String() string {
	if d.shared == "" {
		return string(d.Bytes())
	}
	p := d.Bytes()
	if d.Bad {
		return ""
	}
	end := len(d.shared) - len(d.B) // the string's bytes end where B begins
	return d.shared[end-len(p) : end]
}

// Count reads the count of a list whose elements take at least one byte
// each, so that a forged count cannot make the reader allocate more than
// the input's size.
func (d *Decoder) Count() int {
	n := d.Uint()
	if n > uint64(len(d.B)) {
		d.fail()
		return 0
	}
	return int(n)
}

// Strings reads a list of strings; an empty list is nil.
func (d *Decoder) Strings() []string {
	n := d.Count()
	if n == 0 {
		return nil
	}
	l := make([]string, n)
	for i := range l {
		l[i] = d.String()
	}
	return l
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	if len(d.B) == 0 || d.B[0] > 1 {
		d.fail()
		return false
	}
	v := d.B[0] == 1
	d.B = d.B[1:]
	return v
}
