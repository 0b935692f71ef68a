package tests

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// sshEnv is the environment of a job on the S spawner with the given
// servers and ssh_config; the test marker is forwarded to the workers, so
// that checkNoSurvivors finds them.
func sshEnv(servers, config string, more ...string) []string {
	return append([]string{"GASNET_SPAWNFN=S", "GASNET_SSH_SERVERS=" + servers, "GASNET_SSH_OPTIONS=-F " + config,
		"GASNET_FORWARD_ENV=UDPCONDUIT_TEST_MARKER"}, more...)
}

// helloLines is what hello prints on n ranks of the given hosts.
func helloLines(hosts []string, args string) []string {
	var want []string
	for i, h := range hosts {
		want = append(want, fmt.Sprintf("hello from rank %d of %d on %s args=%s", i, len(hosts), h, args))
	}
	sort.Strings(want)
	return want
}

func sortedLines(s string) []string {
	got := strings.Split(strings.TrimSpace(s), "\n")
	sort.Strings(got)
	return got
}

// TestSSHLoopback runs hello and testcore over a real sshd on loopback,
// naming it three ways (user@host:port, an ssh_config alias, an address
// with -p in GASNET_SSH_OPTIONS), three ranks on the one host.
func TestSSHLoopback(t *testing.T) {
	d := startSSHD(t, sshdOptions{})
	config, _ := sshClientFiles(t, []string{d.knownHostsLine("127.0.0.1")},
		fmt.Sprintf("Host lo1 lo2\n  HostName 127.0.0.1\n  Port %d\n", d.port))
	host, _ := os.Hostname()
	hosts := []string{host, host, host}
	for _, c := range []struct {
		name, servers string
		env           []string
	}{
		{"user@host:port", fmt.Sprintf("root@127.0.0.1:%d root@127.0.0.1:%d,root@127.0.0.1:%d", d.port, d.port, d.port), nil},
		{"aliases", "lo1:lo2/lo1", nil},
		{"options", "127.0.0.1 127.0.0.1 127.0.0.1", []string{fmt.Sprintf("GASNET_SSH_OPTIONS=-F %s -p %d -l root", config, d.port)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := t.Name()
			start := time.Now()
			r := run(t, marker, sshEnv(c.servers, config, c.env...), "hello", "3", "a", "b c")
			if r.code != 0 {
				t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
			}
			t.Logf("hello on 3 ranks over ssh: %v", time.Since(start).Round(time.Millisecond))
			if d := cmp.Diff(helloLines(hosts, `["a" "b c"]`), sortedLines(r.stdout)); d != "" {
				t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
	t.Run("testcore", func(t *testing.T) {
		marker := t.Name()
		r := run(t, marker, sshEnv("lo1 lo2 lo1", config), "testcore", "3", "200")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		checkNoSurvivors(t, marker, 2*time.Second)
	})
}
