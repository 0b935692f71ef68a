package worker

import (
	"strings"
	"testing"

	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

// TestRequestedRank: GASNET_WORKER_RANK and the variable it names are read
// as the settings' integers are, in decimal (010 is ten); a sign other
// than -, a base prefix or a separator is not a rank.
func TestRequestedRank(t *testing.T) {
	t.Setenv("TEST_RANK_OCTAL", "010")
	t.Setenv("TEST_RANK_PLUS", "+2")
	t.Setenv("TEST_RANK_HEX", "0x2")
	for _, tc := range []struct {
		spec string
		want int
		err  string
	}{
		{"", -1, ""},
		{"3", 3, ""},
		{"010", 10, ""},
		{"TEST_RANK_OCTAL", 10, ""},
		{"-1", 0, "GASNET_WORKER_RANK=-1: accepted: a rank >= 0"},
		{"TEST_RANK_PLUS", 0, `GASNET_WORKER_RANK=TEST_RANK_PLUS: TEST_RANK_PLUS="+2" is not a rank; accepted: a decimal integer >= 0`},
		{"TEST_RANK_HEX", 0, `GASNET_WORKER_RANK=TEST_RANK_HEX: TEST_RANK_HEX="0x2" is not a rank`},
		{"+2", 0, "GASNET_WORKER_RANK=+2: no variable +2"},
	} {
		got, err := requestedRank(&envconf.Config{WorkerRank: tc.spec})
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q: %d, %v; want %d", tc.spec, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%q: %d, %v; want %q", tc.spec, got, err, tc.err)
		}
	}
}
