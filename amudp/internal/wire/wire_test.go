package wire

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func sampleMessages() []Message {
	return []Message{
		{Header: Header{Kind: KindShortRequest, Handler: 130, NArgs: 2, Dst: 0x0a0b0c0d, Nonce: 0x0102030405060708, Src: 7, Slot: 3, Seq: 9}, Args: [MaxArgs]uint32{1, 0xffffffff}},
		{Header: Header{Kind: KindMediumRequest, Handler: 200, NArgs: 16, Dst: 2, Nonce: 1, Src: 1 << 19, Slot: 1023, Seq: 65535}, Args: [MaxArgs]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, Payload: []byte("hello")},
		{Header: Header{Kind: KindLongRequest, Handler: 129, Nonce: 1 << 63, Src: 0, Offset: 1 << 40}, Payload: bytes.Repeat([]byte{0xab}, MaxLong)},
		{Header: Header{Kind: KindShortReply, Handler: 131, NArgs: 1}, Args: [MaxArgs]uint32{42}},
		{Header: Header{Kind: KindMediumReply, Handler: 132}, Payload: []byte{}},
		{Header: Header{Kind: KindLongReply, Handler: 133, Offset: 17}, Payload: []byte{1, 2, 3}},
		{Header: Header{Kind: KindAutoReply, Slot: 5, Seq: 6}},
		{Header: Header{Kind: KindShortRequest, Flags: FlagAckNow, Handler: 130, Slot: 1, Seq: 2}},
		{Header: Header{Kind: KindAutoReply, Slot: 5, Seq: 6}, Payload: []byte{7, 0, 9, 0, 1, 1, 2, 2}},
		{Header: Header{Kind: KindReturned, NArgs: 1, Handler: 140}, Args: [MaxArgs]uint32{uint32(ReasonBadHandler)}},
		{Header: Header{Kind: KindLongRequest, Flags: FlagInPlace | FlagAckNow, Handler: 129, NArgs: 1, Offset: 64, Len: MaxLong}, Args: [MaxArgs]uint32{5}},
		{Header: Header{Kind: KindLongReply, Flags: FlagInPlace, Handler: 133, Offset: 8, Len: 3}},
		{Header: Header{Kind: KindMediumRequest, Flags: FlagDirect, Handler: 134, NArgs: 1, Src: 3}, Args: [MaxArgs]uint32{9}, Payload: []byte("direct")},
		{Header: Header{Kind: KindLongReply, Flags: FlagDirect | FlagInPlace, Handler: 135, Offset: 8, Len: 3}},
		{Header: Header{Kind: KindAutoReply, Flags: FlagDirect, Src: 2}},
		{Header: Header{Kind: KindReturned, Flags: FlagDirect, NArgs: 2, Handler: 140, Slot: 1, Seq: 7}, Args: [MaxArgs]uint32{uint32(ReasonBadOffset), uint32(KindLongRequest)}},
	}
}

// TestAppendHead: the head AppendHead encodes, followed by the payload, is
// what Append encodes.
func TestAppendHead(t *testing.T) {
	for _, m := range sampleMessages() {
		whole, err := m.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		head, err := m.AppendHead([]byte("prefix"))
		if err != nil {
			t.Fatal(err)
		}
		if got := append(head[len("prefix"):], m.Payload...); !bytes.Equal(got, whole) {
			t.Errorf("%v: head and payload\n%x, want\n%x", m.Kind, got, whole)
		}
		// The header (its length set by AppendHead) with the arguments
		// in a slice of the caller's.
		h := m.Header
		to, err := h.AppendTo(nil, m.Args[:m.NArgs])
		if err != nil {
			t.Fatal(err)
		}
		if got := append(to, m.Payload...); !bytes.Equal(got, whole) {
			t.Errorf("%v: AppendTo and payload\n%x, want\n%x", m.Kind, got, whole)
		}
		if _, err := h.AppendTo(nil, append(m.Args[:m.NArgs:m.NArgs], 1)); !errors.Is(err, ErrNArgs) {
			t.Errorf("%v: AppendTo with one argument more than NArgs: %v, want %v", m.Kind, err, ErrNArgs)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range sampleMessages() {
		t.Run(m.Kind.String(), func(t *testing.T) {
			b, err := m.Append(nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) != m.Size() {
				t.Errorf("encoded %d bytes, Size says %d", len(b), m.Size())
			}
			var got Message
			if err := Decode(b, &got); err != nil {
				t.Fatal(err)
			}
			if got.Payload == nil {
				got.Payload = []byte{}
			}
			want := m
			if want.Payload == nil {
				want.Payload = []byte{}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestAppendReusesBuffer(t *testing.T) {
	m := sampleMessages()[0]
	buf := make([]byte, 0, MaxDatagram)
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if _, err = m.Append(buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Append into a large enough buffer allocates %v times", allocs)
	}
	var got Message
	b, _ := m.Append(nil)
	if a := testing.AllocsPerRun(100, func() { _ = Decode(b, &got) }); a != 0 {
		t.Errorf("Decode allocates %v times", a)
	}
}

func TestDecodeErrors(t *testing.T) {
	valid, _ := (&Message{Header: Header{Kind: KindMediumRequest, Handler: 130, NArgs: 1}, Payload: []byte("abc")}).Append(nil)
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), valid...)) }
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"short header", valid[:HeaderLen-1], ErrTruncated},
		{"version", mod(func(b []byte) []byte { b[0] = 9; return b }), ErrVersion},
		{"kind zero", mod(func(b []byte) []byte { b[1] = 0; return b }), ErrKind},
		{"kind high", mod(func(b []byte) []byte { b[1] = 9; return b }), ErrKind},
		{"ack-now on a reply", mod(func(b []byte) []byte { b[1] = byte(KindMediumReply) | FlagAckNow<<4; return b }), ErrFlags},
		{"routed on a request", mod(func(b []byte) []byte { b[1] |= FlagRouted << 4; return b }), nil},
		{"in place on medium", mod(func(b []byte) []byte { b[1] |= FlagInPlace << 4; return b }), ErrFlags},
		{"in place carrying bytes", inPlace(append(make([]byte, 0, HeaderLen+1), 0)), ErrLength},
		{"in place over max", inPlace(nil, func(b []byte) { b[26] = 1 }), ErrLength},
		{"nargs", mod(func(b []byte) []byte { b[3] = 17; return b }), ErrNArgs},
		{"args truncated", mod(func(b []byte) []byte { b[3] = 16; return b }), ErrTruncated},
		{"payload short", valid[:len(valid)-1], ErrLength},
		{"payload long", append(append([]byte(nil), valid...), 0), ErrLength},
		{"offset on medium", mod(func(b []byte) []byte { b[28] = 1; return b }), ErrFieldUnset},
		{"length over max", mod(func(b []byte) []byte { b[26] = 1; return b }), ErrLength},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var m Message
			if err := Decode(tc.b, &m); !errors.Is(err, tc.want) {
				t.Errorf("Decode = %v, want %v", err, tc.want)
			}
		})
	}
}

// inPlace returns a valid in-place Long request datagram with extra
// appended and then each of edits applied.
func inPlace(extra []byte, edits ...func([]byte)) []byte {
	b, err := (&Message{Header: Header{Kind: KindLongRequest, Flags: FlagInPlace, Handler: 130, Len: 10}}).Append(nil)
	if err != nil {
		panic(err)
	}
	b = append(b, extra...)
	for _, e := range edits {
		e(b)
	}
	return b
}

func TestAppendRejectsInvalid(t *testing.T) {
	bad := []Message{
		{Header: Header{Kind: 0}},
		{Header: Header{Kind: KindShortRequest, NArgs: 17}},
		{Header: Header{Kind: KindShortRequest}, Payload: []byte{1}},
		{Header: Header{Kind: KindMediumRequest}, Payload: make([]byte, MaxMedium+1)},
		{Header: Header{Kind: KindAutoReply, Handler: 3}},
		{Header: Header{Kind: KindAutoReply}, Payload: []byte{1, 2, 3}}, // not whole pairs
		{Header: Header{Kind: KindShortReply, Flags: FlagAckNow, Handler: 131}},
		{Header: Header{Kind: KindShortRequest, Flags: 2, Handler: 130}},
		{Header: Header{Kind: KindMediumReply, Flags: FlagInPlace, Len: 3}},
		{Header: Header{Kind: KindLongRequest, Flags: FlagInPlace, Len: 3}, Payload: []byte{1, 2, 3}},
	}
	for _, m := range bad {
		if _, err := m.Append(nil); err == nil {
			t.Errorf("Append(%v) accepted", m.Header)
		}
	}
}

// FuzzDecode proves the decoder never panics and that whatever it accepts
// re-encodes to the same bytes (DESIGN.md §4).
func FuzzDecode(f *testing.F) {
	for _, m := range sampleMessages() {
		b, err := m.Append(nil)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) > 4096 {
			b = b[:4096]
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Message
		if err := Decode(b, &m); err != nil {
			return
		}
		out, err := m.Append(nil)
		if err != nil {
			t.Fatalf("accepted datagram does not re-encode: %v", err)
		}
		if !bytes.Equal(out, b) {
			t.Fatalf("re-encoding differs:\n in %x\nout %x", b, out)
		}
	})
}
