package spawn

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/spawn/sshc"
)

// FuzzExpandTemplate: expanding any template never panics, and the worker
// command %C stands for reaches the launcher as the same words whatever
// bytes its arguments hold: "x %C" expanded and split as a POSIX shell
// splits words gives back x and every word (ShellQuote's promise).
func FuzzExpandTemplate(f *testing.F) {
	f.Add("srun -n %N %C", "a b", `it's "q"`, uint16(4))
	f.Add("mpirun -np %N %C", "$HOME", `back\slash`, uint16(2))
	f.Add("%M %D %P %% %C", "*", "", uint16(1))
	f.Add("%", "\n", "'", uint16(0))
	f.Add("%C%x", "é", "\x00", uint16(3))
	f.Fuzz(func(t *testing.T, tmpl, a, b string, n uint16) {
		v := TemplateVars{N: int(n), Command: []string{"/bin/prog", a, b}, Dir: a, Program: b, Servers: []string{a, b}}
		ExpandTemplate(tmpl, v) // errors are fine; panics are not
		out, err := ExpandTemplate("x %C", v)
		if err != nil {
			t.Fatalf("x %%C: %v", err)
		}
		words, err := sshc.SplitWords(out)
		if err != nil {
			t.Fatalf("%q does not split: %v", out, err)
		}
		if d := cmp.Diff([]string{"x", "/bin/prog", a, b}, words); d != "" {
			t.Fatalf("%q splits into other words (-want +got):\n%s", out, d)
		}
	})
}

// FuzzControlFrame: the console's reading of a connection's frames never
// panics on any bytes, never returns a body longer than its limit, and
// never reads an exit code outside 0..255.
func FuzzControlFrame(f *testing.F) {
	for _, fr := range []struct {
		typ byte
		v   any
	}{
		{frameHello, Hello{Secret: "00ff"}},
		{frameJoin, Join{Rank: -1, Index: 3, Host: "h", Name: "n", PID: 9, UDP: "127.0.0.1:9"}},
		{frameExit, Code{Code: 300, Why: "x"}},
		{frameColl, Coll{Kind: "barrier", Seq: 2, In: true}},
	} {
		b, err := encodeFrame(fr.typ, fr.v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			typ, body, err := readFrameMax(r, maxJoinFrame)
			if err != nil {
				return
			}
			if len(body) > maxJoinFrame {
				t.Fatalf("a body of %d bytes passed a limit of %d", len(body), maxJoinFrame)
			}
			switch typ {
			case frameHello:
				var h Hello
				json.Unmarshal(body, &h)
			case frameJoin:
				var j Join
				json.Unmarshal(body, &j)
			case frameColl:
				var c Coll
				json.Unmarshal(body, &c)
			case frameExit:
				if c := exitCode(body); c.Code < 0 || c.Code > 255 {
					t.Fatalf("exit code %d read from %q", c.Code, body)
				}
			}
		}
	})
}

// FuzzSplitServers: the C spawner's server list never yields an empty or
// separator-holding name.
func FuzzSplitServers(f *testing.F) {
	f.Add("h1 h2,h3/h4;h5:h6")
	f.Add(" \t\n,,")
	f.Fuzz(func(t *testing.T, s string) {
		for _, h := range SplitServers(s) {
			if h == "" || strings.ContainsAny(h, " \t\n,/;:") {
				t.Fatalf("SplitServers(%q) gave %q", s, h)
			}
		}
	})
}
