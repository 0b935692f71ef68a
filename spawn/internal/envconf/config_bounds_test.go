package envconf

import "testing"

// TestConfigBoundsInclusive: a setting bounded by another may equal it
// (an initial request timeout equal to the maximum, an initial socket
// buffer equal to the maximum), and one past it is refused naming both.
func TestConfigBoundsInclusive(t *testing.T) {
	for _, env := range [][]string{
		{"GASNET_REQUESTTIMEOUT_INITIAL=2000000", "GASNET_REQUESTTIMEOUT_MAX=2000000"},
		{"GASNET_SOCKETBUFFER_INITIAL=65536", "GASNET_SOCKETBUFFER_MAX=65536"},
	} {
		if _, _, err := LoadEnv(env); err != nil {
			t.Errorf("%q: %v, want it accepted", env, err)
		}
	}
	for env, want := range map[[2]string]string{
		{"GASNET_REQUESTTIMEOUT_INITIAL=2000001", "GASNET_REQUESTTIMEOUT_MAX=2000000"}: "GASNET_REQUESTTIMEOUT_INITIAL=2000001: accepted: at most GASNET_REQUESTTIMEOUT_MAX=2000000",
		{"GASNET_SOCKETBUFFER_INITIAL=65537", "GASNET_SOCKETBUFFER_MAX=65536"}:         "GASNET_SOCKETBUFFER_INITIAL=65537: accepted: at most GASNET_SOCKETBUFFER_MAX=65536",
	} {
		if _, _, err := LoadEnv(env[:]); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %q", env, err, want)
		}
	}
}

// TestMaximumLowersDefault: GASNET_SOCKETBUFFER_MAX set below the default
// initial size lowers it, as GASNET_REQUESTTIMEOUT_MAX does the initial
// timeout's, instead of refusing a variable the user did not set.
func TestMaximumLowersDefault(t *testing.T) {
	c, _, err := LoadEnv([]string{"GASNET_SOCKETBUFFER_MAX=64K"})
	if err != nil {
		t.Fatalf("GASNET_SOCKETBUFFER_MAX=64K: %v", err)
	}
	if c.SockBufInit != 65536 || c.SockBufMax != 65536 {
		t.Errorf("GASNET_SOCKETBUFFER_MAX=64K: initial %d, max %d; want both 65536", c.SockBufInit, c.SockBufMax)
	}
}
