package ctl

import (
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/varenc"
)

// TestFrameBodiesRoundTrip: every control frame's body decodes to what was
// encoded.
func TestFrameBodiesRoundTrip(t *testing.T) {
	check := func(in Body, out BodyReader) {
		t.Helper()
		if err := DecodeBody(in.AppendBody(nil), out); err != nil {
			t.Fatalf("%T: %v", in, err)
		}
	}
	hello, join := Hello{Secret: "00ff", Nonce: "n", Proof: "p"}, Join{Rank: -1, Index: 1 << 20, Host: "h", Name: "ñ", PID: 1<<31 - 1, UDP: "[::1]:9", CPUs: 64, Mask: "3.0.1", Inbox: "/proc/9/fd/5"}
	var h Hello
	var j Join
	check(hello, &h)
	check(join, &j)
	w := Welcome{Rank: 0, Size: 3, Table: []byte{tableVersion, 1, 2, 3},
		Peers: map[int]string{2: "b:2", 0: "a:1"}, Env: map[string]string{"GASNET_B": "", "GASNET_A": "1 2"}, HostCount: 2, HostCPUs: 7, Crowded: true}
	var gw Welcome
	check(w, &gw)
	coll, code, out := Coll{Kind: "reduce", Seq: 1 << 40, In: true, Tree: 7, Root: 3, Index: 9, Team: 1<<63 + 5}, Code{Code: -3, Why: "why\n"}, Output{Nonce: "0123456789abcdef", Proof: "p", Stream: 2, Index: -1, PID: 5}
	var gc Coll
	var gcode Code
	var gout Output
	check(coll, &gc)
	check(code, &gcode)
	check(out, &gout)
	for _, d := range []struct{ got, want any }{{h, hello}, {j, join}, {gw, w}, {gc, coll}, {gcode, code}, {gout, out}} {
		if diff := cmp.Diff(d.want, d.got); diff != "" {
			t.Errorf("%T (-sent +decoded):\n%s", d.want, diff)
		}
	}
	// The same welcome encodes to the same bytes, whatever order its maps
	// are walked in.
	first := string(w.AppendBody(nil))
	for range 20 {
		if string(w.AppendBody(nil)) != first {
			t.Fatal("a welcome encodes to different bytes")
		}
	}
}

// TestFrameBodiesRejectMalformed: a truncated body, bytes left over, an
// integer beyond int32, a list longer than the body, or a bool other than
// 0 or 1 is an error, never a panic or a large allocation.
func TestFrameBodiesRejectMalformed(t *testing.T) {
	join := Join{Rank: 2, Host: "host", UDP: "1.2.3.4:5"}.AppendBody(nil)
	for name, tc := range map[string]struct {
		b []byte
		v BodyReader
	}{
		"empty join":          {nil, &Join{}},
		"truncated join":      {join[:len(join)-1], &Join{}},
		"join and a byte":     {append(join, 0), &Join{}},
		"string past the end": {[]byte{5, 'a', 'b'}, &Hello{}},
		"int beyond int32":    {varenc.AppendString(varenc.AppendInt(nil, 1<<31), ""), &Code{}},
		"forged list length":  {[]byte{0, 2, 0xff, 0xff, 0xff, 0xff, 0x0f}, &Welcome{}},
		"bool of 2":           {append(varenc.AppendString(nil, "barrier"), 1, 2), &Coll{}},
		"overlong varint":     {[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, &Hello{}},
	} {
		if err := DecodeBody(tc.b, tc.v); err == nil {
			t.Errorf("%s (% x): decoded as %+v", name, tc.b, tc.v)
		}
		// Bytes allocated per decode, over 100 of them: a forged length
		// would allocate megabytes each time, while a stray allocation of
		// another goroutine between the two readings counts for little.
		const runs = 100
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			DecodeBody(tc.b, tc.v)
		}
		runtime.ReadMemStats(&after)
		if n := (after.TotalAlloc - before.TotalAlloc) / runs; n > 4096 {
			t.Errorf("%s (% x): decoding allocated %d bytes", name, tc.b, n)
		}
	}
}
