package spawn

import (
	"bufio"
	"net"
	"net/netip"
	"os"
	"testing"
)

// TestJoinSaysWhetherTheEnvironmentChanged: Join puts the console's
// settings into the environment and says whether any differed from what the
// worker started with, which decides whether the worker reads its
// configuration again.
func TestJoinSaysWhetherTheEnvironmentChanged(t *testing.T) {
	t.Setenv("GASNET_JOINTEST_SAME", "1")
	t.Setenv("GASNET_JOINTEST_OTHER", "1")
	os.Unsetenv("GASNET_JOINTEST_NEW")
	t.Cleanup(func() { os.Unsetenv("GASNET_JOINTEST_NEW") })
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"same", map[string]string{"GASNET_JOINTEST_SAME": "1"}, false},
		{"none", nil, false},
		{"other value", map[string]string{"GASNET_JOINTEST_SAME": "1", "GASNET_JOINTEST_OTHER": "2"}, true},
		{"unset here", map[string]string{"GASNET_JOINTEST_NEW": ""}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Left open: Join's reader ends the process when the
			// console's connection closes.
			wc, cc := net.Pipe()
			go func() {
				r := bufio.NewReader(cc)
				if _, _, err := readFrame(r); err != nil {
					return
				}
				writeFrame(cc, frameWelcome, Welcome{Rank: 1, Size: 2, Env: tc.env})
			}()
			w := &Worker{conn: wc, r: bufio.NewReader(wc)}
			if err := w.Join(&Config{}, netip.MustParseAddrPort("127.0.0.1:9")); err != nil {
				t.Fatal(err)
			}
			if w.EnvChanged != tc.want {
				t.Errorf("EnvChanged = %v, want %v", w.EnvChanged, tc.want)
			}
			for k, v := range tc.env {
				if got, ok := os.LookupEnv(k); !ok || got != v {
					t.Errorf("%s = %q (set %v), want %q", k, got, ok, v)
				}
			}
		})
	}
}
