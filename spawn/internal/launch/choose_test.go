package launch

import (
	"strings"
	"testing"

	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/sshc"
)

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
		c, _, err := envconf.LoadEnv(tc.env)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ChooseSpawner(); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.env, got, tc.want)
		}
	}
}

// TestSSHOptionsDocumented: GASNET_SSH_OPTIONS' description (and so the
// README's table) names every -o key the built-in ssh client honours.
func TestSSHOptionsDocumented(t *testing.T) {
	desc := envconf.Description("GASNET_SSH_OPTIONS")
	for _, k := range sshc.BuiltinKeys() {
		if !strings.Contains(desc, k) {
			t.Errorf("GASNET_SSH_OPTIONS' description does not name %s", k)
		}
	}
}
