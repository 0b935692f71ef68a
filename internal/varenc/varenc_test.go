package varenc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRoundTrip: what the encoders append, the decoder reads back in
// order, to the last byte.
func TestRoundTrip(t *testing.T) {
	b := AppendUint(nil, 1<<40)
	b = AppendInt(b, -7)
	b = AppendString(b, "ñ")
	b = AppendBytes(b, []byte{0, 1})
	b = AppendStrings(b, []string{"a", "", "bc"})
	b = AppendBool(AppendBool(b, true), false)
	d := Decoder{B: b}
	got := []any{d.Uint(), d.Int(), d.String(), d.Bytes(), d.Strings(), d.Bool(), d.Bool()}
	want := []any{uint64(1 << 40), -7, "ñ", []byte{0, 1}, []string{"a", "", "bc"}, true, false}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d.Bad || len(d.B) != 0 {
		t.Errorf("bad %v, %d bytes left", d.Bad, len(d.B))
	}
}

// TestMalformed: a truncated field, an int beyond int32, a count beyond
// the input and a bool of 2 set Bad, which stays set, and nothing reads
// past the input.
func TestMalformed(t *testing.T) {
	for name, b := range map[string][]byte{
		"truncated string": AppendUint(nil, 5),
		"int beyond int32": AppendInt(nil, 1<<31),
		"forged count":     {0xff, 0xff, 0xff, 0x0f},
		"bool of 2":        {2},
		"overlong varint":  {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01},
	} {
		d := Decoder{B: b}
		switch name {
		case "truncated string":
			_ = d.String()
		case "int beyond int32":
			d.Int()
		case "forged count":
			d.Strings()
		case "bool of 2":
			d.Bool()
		default:
			d.Uint()
		}
		if !d.Bad || d.Uint() != 0 || !d.Bad {
			t.Errorf("%s: not refused", name)
		}
	}
	// A byte string's capacity ends with it.
	d := Decoder{B: AppendBytes(AppendBytes(nil, []byte("ab")), []byte("cd"))}
	p := d.Bytes()
	_ = append(p, 'X')
	if q := d.Bytes(); string(q) != "cd" {
		t.Errorf("appending to the first part wrote over the second: %q", q)
	}
}

// TestShared: a shared decoder reads the same strings as a copying one.
func TestShared(t *testing.T) {
	b := AppendStrings(AppendString(nil, "first"), []string{"x", "", "yz"})
	d := Shared(b)
	if got := []any{d.String(), d.Strings()}; !cmp.Equal(got, []any{"first", []string{"x", "", "yz"}}) || d.Bad || len(d.B) != 0 {
		t.Errorf("got %q, bad %v, %d left", got, d.Bad, len(d.B))
	}
	d = Shared(AppendUint(nil, 9))
	if d.String() != "" || !d.Bad {
		t.Error("a truncated string was read")
	}
}
