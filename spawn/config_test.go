package spawn

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	want := EnvTable()
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

func TestResolveAliases(t *testing.T) {
	env := []string{
		"GASNET_NETWORKDEPTH=64", "AMUDP_NETWORKDEPTH=32", // GASNET_ wins
		"AMUDP_LINEBUFFERSZ=80",            // AMUDP_ alias
		"SSH_SERVERS=h1 h2",                // documented bare name
		"NETWORKDEPTH=1", "ROUTE_OUTPUT=0", // undocumented bare names are ignored
		"CSPAWN_CMD=srun -n %N %C", "AMUDP_CSPAWN_CMD=x", // AMUDP_ beats bare
	}
	got := ResolveAliases(env)
	want := map[string]Source{
		"GASNET_NETWORKDEPTH": {"GASNET_NETWORKDEPTH", "64"},
		"GASNET_LINEBUFFERSZ": {"AMUDP_LINEBUFFERSZ", "80"},
		"GASNET_SSH_SERVERS":  {"SSH_SERVERS", "h1 h2"},
		"GASNET_CSPAWN_CMD":   {"AMUDP_CSPAWN_CMD", "x"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	c, _, err := loadConfig(env)
	if err != nil {
		t.Fatal(err)
	}
	if c.NetworkDepth != 64 || c.LineBufSize != 80 || !c.RouteOutput || c.ChooseSpawner() != "S" {
		t.Errorf("loaded %+v", c)
	}
}

func TestChooseSpawner(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{nil, "L"},
		{[]string{"GASNET_CSPAWN_CMD=srun -n %N %C"}, "C"},
		{[]string{"GASNET_SSH_SERVERS=a"}, "S"},
		{[]string{"GASNET_SSH_SERVERS=a", "GASNET_SPAWNFN=l"}, "L"},
	} {
		c, _, err := loadConfig(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ChooseSpawner(); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.env, got, tc.want)
		}
	}
}

func TestAssignRanks(t *testing.T) {
	j := func(host string, idx, rank int) Join { return Join{Host: host, Index: idx, Rank: rank, Name: host} }
	tests := []struct {
		name  string
		joins []Join
		want  []int
		err   string
	}{
		{"contiguous per host", []Join{j("b", -1, -1), j("a", -1, -1), j("b", -1, -1), j("a", -1, -1)}, []int{0, 2, 1, 3}, ""},
		{"spawn index order within host", []Join{j("a", 2, -1), j("a", 0, -1), j("a", 1, -1)}, []int{2, 0, 1}, ""},
		{"requested", []Join{j("a", -1, 1), j("a", -1, 0)}, []int{1, 0}, ""},
		{"all or none", []Join{j("a", -1, 1), j("a", -1, -1)}, nil, "set for 1 of 2 workers"},
		{"disjoint", []Join{j("a", -1, 1), j("b", -1, 1)}, nil, "claimed by two workers"},
		{"in range", []Join{j("a", -1, 0), j("b", -1, 2)}, nil, "accepted 0..1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AssignRanks(tc.joins, len(tc.joins))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestLineWriter(t *testing.T) {
	var out strings.Builder
	c := &console{}
	c.out[1] = &out
	w := newLineWriter(c, 1, 8)
	w.Write([]byte("ab\ncd"))
	w.Write([]byte("ef\n0123456789\nlast"))
	w.Close()
	if got, want := out.String(), "ab\ncdef\n0123456789\nlast"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}
