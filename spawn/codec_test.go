package spawn

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTreeLine: a spawn tree worker's treeInfo survives its session line,
// and a line that is not one is refused.
func TestTreeLine(t *testing.T) {
	in := &treeInfo{Servers: []string{"a", "b:2222", "user@c"}, Degree: 2, Program: "/p q", Args: []string{"x y", ""}, Dir: "/d"}
	line := treeLine(in)
	if strings.ContainsAny(line, "\n ") {
		t.Fatalf("line %q holds a newline or a space", line)
	}
	out, err := parseTreeLine(line + "\n")
	if err != nil || !cmp.Equal(in, out) {
		t.Errorf("parseTreeLine: %+v, %v; want %+v", out, err, in)
	}
	for _, bad := range []string{"zz", line[:len(line)-2], line + "00"} {
		if _, err := parseTreeLine(bad); err == nil {
			t.Errorf("parseTreeLine(%q) accepted", bad)
		}
	}
}
