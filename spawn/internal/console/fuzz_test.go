package console

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// FuzzControlFrame: the console's reading of a connection's frames never
// panics on any bytes, never returns a body longer than its limit, and
// never reads an exit code outside 0..255; a body that decodes encodes back
// to what decodes the same.
func FuzzControlFrame(f *testing.F) {
	for _, fr := range []struct {
		typ byte
		v   ctl.Body
	}{
		{ctl.FrameHello, ctl.Hello{Secret: "00ff"}},
		{ctl.FrameJoin, ctl.Join{Rank: -1, Index: 3, Host: "h", Name: "n", PID: 9, UDP: "127.0.0.1:9"}},
		{ctl.FrameExit, ctl.Code{Code: 300, Why: "x"}},
		{ctl.FrameColl, ctl.Coll{Kind: "barrier", Seq: 2, In: true}},
		{ctl.FrameOutput, ctl.NewOutput([]byte("ab"), 2, -1, 7)},
		{ctl.FrameHello, ctl.NewHello([]byte("ab"))},
		{ctl.FrameWelcome, ctl.Welcome{Rank: 1, Size: 3, Peers: map[int]string{0: "a", 2: "b"}, Env: map[string]string{"K": "V"}, HostCount: 3}},
	} {
		f.Add(ctl.EncodeFrame(fr.typ, fr.v))
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			typ, body, err := ctl.ReadFrameMax(r, ctl.MaxJoinFrame)
			if err != nil {
				return
			}
			if len(body) > ctl.MaxJoinFrame {
				t.Fatalf("a body of %d bytes passed a limit of %d", len(body), ctl.MaxJoinFrame)
			}
			switch typ {
			case ctl.FrameHello:
				roundTrip[ctl.Hello](t, body)
			case ctl.FrameJoin:
				roundTrip[ctl.Join](t, body)
			case ctl.FrameColl:
				roundTrip[ctl.Coll](t, body)
			case ctl.FrameOutput:
				roundTrip[ctl.Output](t, body)
			case ctl.FrameWelcome:
				roundTrip[ctl.Welcome](t, body)
			case ctl.FrameExit:
				if c := ctl.DecodeExit(body); c.Code < 0 || c.Code > 255 {
					t.Fatalf("exit code %d read from %q", c.Code, body)
				}
				roundTrip[ctl.Code](t, body)
			}
		}
	})
}

// roundTrip decodes body as a T and, if that succeeds, checks that its
// encoding decodes to the same T.
func roundTrip[T any, P interface {
	*T
	ctl.Body
	ctl.BodyReader
}](t *testing.T, body []byte) {
	t.Helper()
	var v, again T
	if ctl.DecodeBody(body, P(&v)) != nil {
		return
	}
	if err := ctl.DecodeBody(P(&v).AppendBody(nil), P(&again)); err != nil {
		t.Fatalf("%T %+v from %q: its encoding does not decode: %v", v, v, body, err)
	}
	if diff := cmp.Diff(v, again, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("%T from %q: decode(encode) differs (-first +again):\n%s", v, body, diff)
	}
}
