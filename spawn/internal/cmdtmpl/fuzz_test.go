package cmdtmpl

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/sshc"
)

// FuzzExpandTemplate: expanding any template never panics, and the worker
// command %C stands for reaches the launcher as the same words whatever
// bytes its arguments hold: "x %C" expanded and split as a POSIX shell
// splits words gives back x and every word (Quote's promise).
func FuzzExpandTemplate(f *testing.F) {
	f.Add("srun -n %N %C", "a b", `it's "q"`, uint16(4))
	f.Add("mpirun -np %N %C", "$HOME", `back\slash`, uint16(2))
	f.Add("%M %D %P %% %C", "*", "", uint16(1))
	f.Add("%", "\n", "'", uint16(0))
	f.Add("%C%x", "é", "\x00", uint16(3))
	f.Fuzz(func(t *testing.T, tmpl, a, b string, n uint16) {
		v := Vars{N: int(n), Command: []string{"/bin/prog", a, b}, Dir: a, Program: b, Servers: []string{a, b}}
		Expand(tmpl, v) // errors are fine; panics are not
		out, err := Expand("x %C", v)
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
