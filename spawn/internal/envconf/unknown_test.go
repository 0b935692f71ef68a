package envconf

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUnknownVars: a GASNET_* or AMUDP_* variable that udpconduit does not
// read gets one warning naming the nearest setting, in the prefix the user
// wrote; settings, their AMUDP_ forms and the worker markers get none, nor
// do other variables.
func TestUnknownVars(t *testing.T) {
	env := []string{"GASNET_NETWORK_DEPTH=5", "AMUDP_SPAWNFM=L", "GASNET_NETWORKDEPTH=4", "AMUDP_LINEBUFFERSZ=0",
		"GASNET_SPAWN_MASTER=x", "GASNET_FROBNICATE_EVERYTHING=1", "PATH=/bin", "GASNETX=1"}
	want := []string{
		"warning: AMUDP_SPAWNFM is not a setting of udpconduit and has no effect; did you mean AMUDP_SPAWNFN?",
		"warning: GASNET_FROBNICATE_EVERYTHING is not a setting of udpconduit and has no effect (GASNET_VERBOSEENV=1 lists every setting)",
		"warning: GASNET_NETWORK_DEPTH is not a setting of udpconduit and has no effect; did you mean GASNET_NETWORKDEPTH?",
	}
	if d := cmp.Diff(want, UnknownVars(env, []string{"GASNET_SPAWN_MASTER"})); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance(kitten, sitting) = %d, want 3", d)
	}
}
