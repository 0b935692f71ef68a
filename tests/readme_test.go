package tests

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// readmeBlock is a ```sh block of README.md: its first line's number, its
// text, the exit status its "# exit: N" comment names (0 without one),
// and the lines its "#> " comments say its output holds, in order.
type readmeBlock struct {
	line   int
	text   string
	exit   int
	output []string
}

// readmeBlocks reads the ```sh blocks of the README.
func readmeBlocks(t *testing.T) []readmeBlock {
	t.Helper()
	f, err := os.Open("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []readmeBlock
	var cur *readmeBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		switch {
		case cur == nil && l == "```sh":
			cur = &readmeBlock{line: n + 1}
		case cur != nil && l == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += l + "\n"
			if s, ok := strings.CutPrefix(l, "#> "); ok {
				cur.output = append(cur.output, s)
			}
			if s, ok := strings.CutPrefix(l, "# exit: "); ok {
				if cur.exit, err = strconv.Atoi(s); err != nil {
					t.Fatalf("README.md:%d: %q: want # exit: N", n, l)
				}
			}
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: a ```sh block that does not end", cur.line)
	}
	return blocks
}

// TestREADMEShellBlocks runs every ```sh block of README.md as a user
// would, from the repository's root after make build, with bash -e: each
// exits 0 or with its "# exit: N", and its output holds its "#> " lines
// in order. A block that uses srun gets the tests' SLURM
// (scripts/slurm-local.sh up), and one that names a launcher needs it
// installed; one that uses the S spawner runs with a HOME whose
// ~/.ssh/config names the tests' sshd as host1 and host2.
func TestREADMEShellBlocks(t *testing.T) {
	build := exec.Command("make", "-s", "build")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	blocks := readmeBlocks(t)
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```sh block")
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			var env []string
			if strings.Contains(b.text, "srun") {
				needSlurm(t)
				slurmReady(t)
			}
			if strings.Contains(b.text, "mpirun") {
				needCommand("mpirun", "openmpi-bin")(t)
			}
			if strings.Contains(b.text, "mpiexec.hydra") {
				needCommand("mpiexec.hydra", "mpich")(t)
			}
			if strings.Contains(b.text, "GASNET_SPAWNFN=S") {
				env = append(env, "HOME="+sshHome(t))
			}
			marker := t.Name()
			ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 3*time.Minute))
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-e", "-o", "pipefail", "-c", b.text)
			cmd.Dir = ".."
			r := runCmd(t, ctx, cmd, marker, env, "README.md block", []string{"line", strconv.Itoa(b.line)})
			out := r.stdout + r.stderr
			if r.code != b.exit {
				t.Errorf("README.md:%d: exit %d, want %d\n%s\noutput:\n%s", b.line, r.code, b.exit, b.text, out)
			}
			rest := out
			for _, want := range b.output {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("README.md:%d: the output lacks %q (or has it out of order)\noutput:\n%s", b.line, want, out)
					break
				}
				rest = rest[i+len(want):]
			}
			checkNoSurvivors(t, marker, 5*time.Second)
		})
	}
}

// sshHome returns a HOME whose ~/.ssh/config names a test sshd on
// loopback as host1 and host2, logged into with the tests' key, its host
// key known.
func sshHome(t *testing.T) string {
	t.Helper()
	d := startSSHD(t, sshdOptions{})
	home := t.TempDir()
	dir := filepath.Join(home, ".ssh")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	known := d.knownHostsLine("127.0.0.1")
	if err := os.WriteFile(filepath.Join(dir, "known_hosts"), []byte(known), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	for _, h := range []string{"host1", "host2"} {
		fmt.Fprintf(&cfg, "Host %s\n  HostName 127.0.0.1\n  Port %d\n", h, d.port)
	}
	fmt.Fprintf(&cfg, "Host *\n  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n", sshClientKey(t), filepath.Join(dir, "known_hosts"))
	if err := os.WriteFile(filepath.Join(dir, "config"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}
