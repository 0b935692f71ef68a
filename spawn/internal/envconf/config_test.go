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
