package worker

import (
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// TestMaskText: a CPU mask's text form reads back as written, drops
// trailing zero words, and refuses what is not one.
func TestMaskText(t *testing.T) {
	words := []uint64{0x3, 0, 1 << 63, 0, 0}
	s := ctl.FormatMask(words)
	if s != "3.0.8000000000000000" {
		t.Errorf("FormatMask = %q", s)
	}
	if got, ok := ctl.ParseMask(s); !ok || !cmp.Equal(got, words[:3]) {
		t.Errorf("ParseMask(%q) = %x, %v", s, got, ok)
	}
	for _, bad := range []string{"g", "1..2", "10000000000000000", strings.Repeat("1.", 64) + "1"} {
		if _, ok := ctl.ParseMask(bad); ok {
			t.Errorf("ParseMask(%q) accepted", bad)
		}
	}
	if m := cpuMask(); runtime.GOOS == "linux" && m == "" {
		t.Error("cpuMask read no affinity mask on Linux")
	}
}
