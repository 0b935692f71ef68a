package tests

import (
	"debug/buildinfo"
	"path/filepath"
	"strings"
	"testing"
)

// sshModules are the modules only the S spawner uses.
var sshModules = []string{"golang.org/x/crypto", "github.com/pkg/sftp"}

// linked returns which of sshModules the program links.
func linked(t *testing.T, prog string) []string {
	t.Helper()
	info, err := buildinfo.ReadFile(filepath.Join(bin, prog))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range info.Deps {
		for _, m := range sshModules {
			if d.Path == m {
				got = append(got, m)
			}
		}
	}
	return got
}

// TestBuiltWithoutSSH: hello built with -tags udpconduit_nossh links none
// of the S spawner's modules, runs its jobs under L and through each
// launcher (C), and refuses S, however chosen, with one line naming the
// variable that chose it, before starting any worker.
func TestBuiltWithoutSSH(t *testing.T) {
	if got := linked(t, "hello"); len(got) != len(sshModules) {
		t.Fatalf("the default build of hello links %v of %v: the check below would prove nothing", got, sshModules)
	}
	if got := linked(t, "nossh/hello"); len(got) != 0 {
		t.Errorf("hello built with -tags udpconduit_nossh links %v", got)
	}
	hellos := func(t *testing.T, r result, n int) {
		t.Helper()
		if r.code != 0 || strings.Count(r.stdout, "hello from rank") != n {
			t.Fatalf("exit %d, want 0 and %d hellos\nstdout:\n%s\nstderr:\n%s", r.code, n, r.stdout, r.stderr)
		}
	}
	t.Run("L", func(t *testing.T) {
		hellos(t, run(t, t.Name(), []string{"GASNET_SPAWNFN=L"}, "nossh/hello", "3"), 3)
		checkNoSurvivors(t, t.Name(), 2e9)
	})
	forEachLauncher(t, func(t *testing.T, l launcher) {
		hellos(t, l.run(t, t.Name(), nil, "nossh/hello", "3"), 3)
	})
	for _, c := range []struct{ env, names string }{
		{"GASNET_SPAWNFN=S", "GASNET_SPAWNFN=S: "},
		{"AMUDP_SPAWNFN=S", "AMUDP_SPAWNFN=S: "},
		{"GASNET_SSH_SERVERS=localhost", "GASNET_SSH_SERVERS (which chooses S): "},
	} {
		t.Run(c.env, func(t *testing.T) {
			r := run(t, t.Name(), []string{c.env}, "nossh/hello", "2")
			want := "hello: " + c.names + "this program was built with -tags udpconduit_nossh, without the ssh spawner; accepted here: GASNET_SPAWNFN=L or C\n"
			if r.code != 1 || r.stderr != want || r.stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want exit 1, stderr %q", r.code, r.stderr, r.stdout, want)
			}
			checkNoSurvivors(t, t.Name(), 2e9)
		})
	}
}
