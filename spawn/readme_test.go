package spawn

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

var update = flag.Bool("update", false, "rewrite the README's variable table")

const envBegin, envEnd = "<!-- env:begin -->\n", "<!-- env:end -->"

// TestREADMEEnvTable fails when the README's table and Config disagree; run
// `go test ./spawn -run README -update` to regenerate it.
func TestREADMEEnvTable(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, envBegin), strings.Index(s, envEnd)
	if i < 0 || j < i {
		t.Fatal("README.md has no env:begin/env:end markers")
	}
	want := envconf.Table()
	got := s[i+len(envBegin) : j]
	if got == want {
		return
	}
	if *update {
		os.WriteFile("../README.md", []byte(s[:i+len(envBegin)]+want+s[j:]), 0o644)
		return
	}
	t.Errorf("README variable table is stale (-want +got):\n%s", cmp.Diff(want, got))
}
