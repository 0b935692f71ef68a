package cmdtmpl

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExpandTemplate(t *testing.T) {
	v := Vars{N: 3, Command: []string{"/opt/my prog/hello", "a b", `it's`, "$HOME", `back\slash`, ""},
		Dir: "/home/u/run dir", Program: "/opt/my prog/hello", Servers: []string{"h1", "h2", "h3", "h4"}}
	for _, tc := range []struct {
		tmpl, want, err string
	}{
		{tmpl: "srun -n %N %C", want: `srun -n 3 '/opt/my prog/hello' 'a b' 'it'\''s' '$HOME' 'back\slash' ''`},
		{tmpl: "mpirun -np %N --wdir %D %C", want: `mpirun -np 3 --wdir '/home/u/run dir' '/opt/my prog/hello' 'a b' 'it'\''s' '$HOME' 'back\slash' ''`},
		{tmpl: "run --hosts %M -- %C # %P 100%%", want: `run --hosts h1 h2 h3 -- '/opt/my prog/hello' 'a b' 'it'\''s' '$HOME' 'back\slash' '' # '/opt/my prog/hello' 100%`},
		{tmpl: "srun -n %N", err: "has no %C"},
		{tmpl: "srun -n %N %C %x", err: "unknown %x"},
		{tmpl: "srun %C 50%", err: "a lone % at the end"},
	} {
		got, err := Expand(tc.tmpl, v)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "GASNET_CSPAWN_CMD") {
				t.Errorf("%q: err = %v, want one naming GASNET_CSPAWN_CMD and %q", tc.tmpl, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.tmpl, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q (-want +got):\n%s", tc.tmpl, d)
		}
	}
	v.Servers = v.Servers[:2]
	if _, err := Expand("x %M %C", v); err == nil || !strings.Contains(err.Error(), "lists 2 hosts") || !strings.Contains(err.Error(), "needs 3") {
		t.Errorf("too few servers: %v", err)
	}
}

// TestShellQuoteSurvivesTheShell hands quoted words to a real /bin/sh and
// checks that it gives back exactly the words.
func TestShellQuoteSurvivesTheShell(t *testing.T) {
	words := []string{"plain", "a b", `it's`, `"dq"`, "$HOME", "`id`", `back\slash`, "", "new\nline", "*", "~", "a;b|c&d", "tab\there", "ünï"}
	out, err := exec.Command("/bin/sh", "-c", `for w in `+Join(words)+`; do printf '%s\0' "$w"; done`).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if d := cmp.Diff(words, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func TestSplitServers(t *testing.T) {
	got := SplitServers(" h1,h2/h3;h4:h5\th6\n h7 ")
	if d := cmp.Diff([]string{"h1", "h2", "h3", "h4", "h5", "h6", "h7"}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
