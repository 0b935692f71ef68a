package envconf

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestResolveAliases: GASNET_X wins over AMUDP_X, which wins over the bare
// X where the reference documents it; undocumented bare names are ignored.
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
	c, _, err := LoadEnv(env)
	if err != nil {
		t.Fatal(err)
	}
	if c.NetworkDepth != 64 || c.LineBufSize != 80 || !c.RouteOutput || c.ChooseSpawner() != "S" {
		t.Errorf("loaded %+v", c)
	}
}

// TestDescriptions: every setting has one description, in Config's order,
// and nothing else has one.
func TestDescriptions(t *testing.T) {
	var got []string
	for _, d := range descriptions {
		if d.text == "" {
			t.Errorf("%s: empty description", d.name)
		}
		got = append(got, d.name)
	}
	var want []string
	for _, v := range variables() {
		want = append(want, v.name)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("descriptions do not name Config's variables in order (-want +got):\n%s", d)
	}
	if Description("GASNET_NO_SUCH") != "" || Description("GASNET_SPAWNFN") == "" {
		t.Errorf("Description looks up the wrong entries")
	}
}

// BenchmarkLoad is what every process pays to read its configuration at
// start (a job of 1024 workers pays it 1025 times).
func BenchmarkLoad(b *testing.B) {
	env := []string{"GASNET_SPAWNFN=L", "HOME=/root", "PATH=/usr/bin:/bin"}
	for b.Loop() {
		if _, _, err := LoadEnv(env); err != nil {
			b.Fatal(err)
		}
	}
}
