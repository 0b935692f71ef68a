package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
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

// TestSSHLoopback runs hello and testcore over a real sshd on loopback,
// naming it three ways (user@host:port, an ssh_config alias, an address
// with -p in GASNET_SSH_OPTIONS), three ranks on the one host.
func TestSSHLoopback(t *testing.T) {
	const banner = "AUTHORIZED USE ONLY: this banner must not reach the job's output"
	d := startSSHD(t, sshdOptions{banner: banner})
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
			if strings.Contains(r.stdout+r.stderr, "AUTHORIZED") {
				t.Errorf("the login banner reached the job's output:\n%s%s", r.stdout, r.stderr)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
	t.Run("remote path", func(t *testing.T) {
		dir := t.TempDir()
		env := append(sshEnv("lo1 lo2", config, "GASNET_SSH_REMOTE_PATH="+dir, "PRINT_ENV=PWD", "LINES=0"), "GASNET_FORWARD_ENV=UDPCONDUIT_TEST_MARKER PRINT_ENV")
		r := run(t, t.Name(), env, "printer", "2")
		want := []string{fmt.Sprintf("rank 0: PWD=%q", dir), fmt.Sprintf("rank 1: PWD=%q", dir)}
		if d := cmp.Diff(want, sortedLines(r.stdout)); r.code != 0 || d != "" {
			t.Errorf("exit %d, output (-want +got):\n%s\nstderr:\n%s", r.code, d, r.stderr)
		}
		r = run(t, t.Name(), sshEnv("lo1", config, "GASNET_SSH_REMOTE_PATH=/nonexistent/dir"), "hello", "1")
		if r.code == 0 || !strings.Contains(r.stderr, "/nonexistent/dir") || !strings.Contains(r.stderr, "worker 0 on lo1 ended before joining") {
			t.Errorf("a remote path that does not exist: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("proxyjump", func(t *testing.T) {
		env := sshEnv("lo2", config, "GASNET_SSH_OPTIONS=-F "+config+" -J lo1", "GASNET_MASTERIP=127.0.0.1")
		logins := func() int { return strings.Count(d.log.String(), "Accepted publickey") }
		before := logins()
		r := run(t, t.Name(), env, "hello", "1")
		if r.code != 0 || len(sortedLines(r.stdout)) != 1 {
			t.Errorf("through ProxyJump: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		if n := logins() - before; n != 2 {
			t.Errorf("%d logins for one worker through a jump host, want 2 (the jump, then the host)", n)
		}
		r = run(t, t.Name(), sshEnv("lo2", config, "GASNET_SSH_OPTIONS=-F "+config+" -J lo1"), "hello", "1")
		if r.code != 1 || !strings.Contains(r.stderr, "GASNET_MASTERIP is needed: lo2 is reached through ProxyJump lo1") {
			t.Errorf("ProxyJump without GASNET_MASTERIP: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("external client, banner", func(t *testing.T) {
		r := run(t, t.Name(), sshEnv("lo1 lo2", config, "GASNET_SSH_CMD=ssh"), "hello", "2")
		if r.code != 0 || strings.Contains(r.stdout+r.stderr, "AUTHORIZED") {
			t.Errorf("exit %d; want 0 and no banner:\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("amudprun -x", func(t *testing.T) {
		// Remote workers get only what is forwarded: -x NAME and -x NAME=VALUE.
		env := []string{"GASNET_SSH_SERVERS=lo1 lo2", "GASNET_SSH_OPTIONS=-F " + config, "GASNET_FORWARD_ENV=UDPCONDUIT_TEST_MARKER",
			"PRINT_ENV=MY_X MY_Y NOT_FORWARDED", "MY_Y=from the console", "NOT_FORWARDED=1", "LINES=0"}
		r := run(t, t.Name(), env, "amudprun", "-np", "2", "-spawn", "S", "-x", "PRINT_ENV", "-x", "MY_X=a b,c", "-x", "MY_Y", filepath.Join(bin, "printer"))
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		want := []string{`rank 0: MY_X="a b,c" MY_Y="from the console" NOT_FORWARDED=""`, `rank 1: MY_X="a b,c" MY_Y="from the console" NOT_FORWARDED=""`}
		if d := cmp.Diff(want, sortedLines(r.stdout)); d != "" {
			t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
		}
		r = run(t, t.Name(), env, "amudprun", "-np", "2", "-x", "UNSET_HERE", filepath.Join(bin, "printer"))
		if r.code != 1 || !strings.Contains(r.stderr, "-x UNSET_HERE: UNSET_HERE is not set in this environment") {
			t.Errorf("-x of an unset variable: exit %d\nstderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("testcore", func(t *testing.T) {
		marker := t.Name()
		r := run(t, marker, sshEnv("lo1 lo2 lo1", config), "testcore", "3", "200")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		checkNoSurvivors(t, marker, 2*time.Second)
	})
}

// TestSSHKillConsole: kill -9 of the console ends every remote worker
// within 2 s, whether they all wait in the job or one is still busy before
// conduit.Init (never joined).
func TestSSHKillConsole(t *testing.T) {
	d := startSSHD(t, sshdOptions{})
	config, _ := sshClientFiles(t, []string{d.knownHostsLine("127.0.0.1")}, "")
	servers := fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d", d.port, d.port, d.port)
	for _, c := range []struct{ mode, ready string }{{"wait", "waiting"}, {"slowjoin", "worker 2 sleeps before Init"}} {
		t.Run(c.mode, func(t *testing.T) {
			marker := t.Name()
			cmd := exec.Command(filepath.Join(bin, "printer"), "3", c.mode)
			cmd.Env = append(append(os.Environ(), markerVar(marker), "LINES=1"), sshEnv(servers, config)...)
			out := &syncBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			bound := testbound.For(t, 20*time.Second)
			for deadline := time.Now().Add(bound); !strings.Contains(out.String(), c.ready) || len(survivors(marker)) != 4; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the console and 3 workers are not all running after %v:\n%s\noutput:\n%s", bound, strings.Join(survivors(marker), "\n"), out.String())
				}
			}
			// The secret went down stdin: no environment or command line
			// of the job's processes (console, sshd sessions, workers) has it.
			for _, p := range ownProcs(marker) {
				for _, f := range []string{"/environ", "/cmdline"} {
					if b, _ := os.ReadFile(p + f); strings.Contains(string(b), "GASNET_SPAWN_SECRET=") {
						t.Errorf("pid %s has GASNET_SPAWN_SECRET= in its %s", filepath.Base(p), f[1:])
					}
				}
			}
			cmd.Process.Signal(syscall.SIGKILL)
			cmd.Wait()
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
}

// TestSSHSignals: SIGUSR1 at the console reaches every remote worker (an
// ssh signal request), and SIGTERM ends the job with 143 and no worker left.
func TestSSHSignals(t *testing.T) {
	d := startSSHD(t, sshdOptions{})
	config, _ := sshClientFiles(t, []string{d.knownHostsLine("127.0.0.1")}, "")
	servers := fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d 127.0.0.1:%d", d.port, d.port, d.port)
	marker := t.Name()
	cmd, out := startPrinter(t, marker, 3, "wait", "waiting", append(sshEnv(servers, config), "LINES=1")...)
	cmd.Process.Signal(syscall.SIGUSR1)
	defer func() {
		if t.Failed() {
			t.Logf("sshd log:\n%s\noutput:\n%s", d.log.String(), out.String())
		}
	}()
	waitFor(t, func() bool { return strings.Count(out.String(), "got SIGUSR1") == 3 })
	cmd.Process.Signal(syscall.SIGTERM)
	waitEnd(t, cmd, out, 10*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("exit %d after SIGTERM, want 143\n%s", code, out.String())
	}
	checkNoSurvivors(t, marker, 2*time.Second)
}

// TestSSHErrors: what stops an ssh job before it runs is one line on
// stderr naming the host and what to do, exit 1, quickly, and nothing left
// running.
func TestSSHErrors(t *testing.T) {
	d := startSSHD(t, sshdOptions{})
	pw := startSSHD(t, sshdOptions{password: true})
	other := startSSHD(t, sshdOptions{}) // its key stands for a changed one
	good, _ := sshClientFiles(t, []string{d.knownHostsLine("127.0.0.1"), pw.knownHostsLine("127.0.0.1")}, "")
	unknown, _ := sshClientFiles(t, nil, "")
	changed, changedFile := sshClientFiles(t, []string{strings.Replace(other.knownHostsLine("127.0.0.1"), fmt.Sprint(other.port), fmt.Sprint(d.port), 1)}, "")
	at := func(s *sshd) string { return fmt.Sprintf("127.0.0.1:%d", s.port) }
	down := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
	for _, c := range []struct {
		name string
		env  []string
		want []string // in the one line, in order
	}{
		{"unknown host key", sshEnv(at(d), unknown), []string{"ssh 127.0.0.1 (" + at(d) + "): its host key ssh-ed25519 SHA256:", "is not known",
			fmt.Sprintf("ssh-keyscan -p %d 127.0.0.1 >> ", d.port), "StrictHostKeyChecking=accept-new"}},
		{"changed host key", sshEnv(at(d), changed), []string{"ssh 127.0.0.1 (" + at(d) + "): its host key has CHANGED: it offers ssh-ed25519 SHA256:",
			"but " + changedFile + ":1 holds ssh-ed25519 SHA256:", "ssh-keygen -R"}},
		{"password", sshEnv(at(pw), good), []string{"ssh 127.0.0.1 (" + at(pw) + "): login as root refused: the host asks for a password, and udpconduit never prompts", "ssh-copy-id"}},
		{"host down", sshEnv(at(d)+" "+down, good), []string{"ssh 127.0.0.1 (" + down + "): cannot connect: ", "connection refused"}},
		{"too few hosts", sshEnv(at(d)+" "+at(d), good), []string{"GASNET_SSH_SERVERS lists 2 host(s); N=3 needs 3"}},
		{"unsupported option", sshEnv(at(d), good, "GASNET_SSH_OPTIONS=-F "+good+" -o Ciphers=aes128-ctr"), []string{"GASNET_SSH_OPTIONS: -o Ciphers: the built-in ssh client does not support it; set GASNET_SSH_CMD=ssh"}},
		{"bad server list", sshEnv("h1:99999", good), []string{`GASNET_SSH_SERVERS: "h1:99999": port 99999; accepted: 1..65535`}},
		{"name that does not resolve", sshEnv("no-such-host.invalid", good), []string{"no-such-host.invalid", "does not resolve"}},
		{"no hosts", []string{"GASNET_SPAWNFN=S"}, []string{"the S spawner needs its hosts: GASNET_SSH_SERVERS"}},
		{"forwarding an unset variable", sshEnv(at(d), good, "GASNET_FORWARD_ENV=UDPCONDUIT_TEST_MARKER NOT_SET_ANYWHERE"), []string{"GASNET_FORWARD_ENV: NOT_SET_ANYWHERE is not set in the console's environment"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			marker := t.Name()
			n := "1"
			switch c.name {
			case "host down":
				n = "2"
			case "too few hosts":
				n = "3"
			}
			start := time.Now()
			r := run(t, marker, c.env, "hello", n)
			took := time.Since(start)
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			if r.code != 1 || len(lines) != 1 || r.stdout != "" {
				t.Fatalf("exit %d, stdout %q, stderr:\n%s\nwant exit 1 and one line", r.code, r.stdout, r.stderr)
			}
			rest := lines[0]
			for _, w := range c.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("the line\n%s\ndoes not say %q (in that order)", lines[0], w)
				}
				rest = rest[i+len(w):]
			}
			if took > 30*time.Second { // a hang: GASNET_CONNECT_TIMEOUT is 60 s
				t.Errorf("took %v", took)
			}
			checkNoSurvivors(t, marker, 2*time.Second)
		})
	}
}

// TestSSHHostKeyOptOuts: StrictHostKeyChecking=accept-new records an
// unknown host's key (then a strict run passes), and =no accepts any key,
// saying so in verbose mode.
func TestSSHHostKeyOptOuts(t *testing.T) {
	d := startSSHD(t, sshdOptions{})
	config, known := sshClientFiles(t, nil, "")
	at := fmt.Sprintf("127.0.0.1:%d", d.port)
	r := run(t, t.Name(), sshEnv(at, config, "GASNET_SSH_OPTIONS=-F "+config+" -o StrictHostKeyChecking=accept-new"), "hello", "1")
	if r.code != 0 {
		t.Fatalf("accept-new: exit %d\n%s", r.code, r.stderr)
	}
	if b, _ := os.ReadFile(known); string(b) != d.knownHostsLine("127.0.0.1") {
		t.Errorf("accept-new: known_hosts holds %q, want %q", b, d.knownHostsLine("127.0.0.1"))
	}
	if r := run(t, t.Name(), sshEnv(at, config), "hello", "1"); r.code != 0 {
		t.Fatalf("strict after accept-new: exit %d\n%s", r.code, r.stderr)
	}
	empty, _ := sshClientFiles(t, nil, "")
	r = run(t, t.Name(), sshEnv(at, empty, "GASNET_SSH_OPTIONS=-F "+empty+" -o StrictHostKeyChecking=no", "GASNET_VERBOSEENV=1"), "hello", "1")
	if r.code != 0 || !strings.Contains(r.stderr, "accepting its unverified host key ssh-ed25519 SHA256:") {
		t.Fatalf("StrictHostKeyChecking=no: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestSSHStaging: a host that lacks the program, or has another file at its
// path, runs a copy staged over sftp into GASNET_SSH_CACHE under the
// program's hash, reused by the next job; the host's own file is never
// touched.
func TestSSHStaging(t *testing.T) {
	progDir := filepath.Join(t.TempDir(), "prog")
	os.MkdirAll(progDir, 0o755)
	prog := filepath.Join(progDir, "hello")
	copyFile(t, filepath.Join(bin, "hello"), prog)
	d := startSSHD(t, sshdOptions{hide: progDir})
	config, _ := sshClientFiles(t, []string{d.knownHostsLine("127.0.0.1")}, "")
	cache := filepath.Join(t.TempDir(), "cache")
	servers := fmt.Sprintf("127.0.0.1:%d 127.0.0.1:%d", d.port, d.port)
	env := append(sshEnv(servers, config), "GASNET_SSH_CACHE="+cache, "GASNET_VERBOSEENV=1")
	host, _ := os.Hostname()
	runProg := func(t *testing.T, say string) {
		t.Helper()
		cmd := exec.Command(prog, "2", "x")
		cmd.Env = append(append(os.Environ(), markerVar(t.Name())), env...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v\nstderr:\n%s", err, errb.String())
		}
		if d := cmp.Diff(helloLines([]string{host, host}, `["x"]`), sortedLines(out.String())); d != "" {
			t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, errb.String())
		}
		if n := strings.Count(errb.String(), say); n != 1 {
			t.Errorf("stderr says %q %d times, want once (one host):\n%s", say, n, errb.String())
		}
		checkNoSurvivors(t, t.Name(), 2*time.Second)
	}
	t.Run("absent", func(t *testing.T) { runProg(t, "lacks "+prog+": staged it to "+cache+"/") })
	staged, _ := filepath.Glob(filepath.Join(cache, "*", "hello"))
	if len(staged) != 1 || !sameFile(t, staged[0], prog) {
		t.Fatalf("staged copies %v, want one, equal to the program", staged)
	}
	t.Run("reused", func(t *testing.T) {
		runProg(t, "lacks "+prog+": running the copy staged there by an earlier job, "+staged[0])
	})
	// Another file at the program's path on the host: it is not run, and
	// not overwritten.
	theirs := fmt.Sprintf("/proc/%d/root%s", d.cmd.Process.Pid, prog)
	copyFile(t, filepath.Join(bin, "testcore"), theirs)
	t.Run("different", func(t *testing.T) { runProg(t, "running the copy staged there by an earlier job") })
	if !sameFile(t, theirs, filepath.Join(bin, "testcore")) {
		t.Errorf("the host's own file at %s changed", prog)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	return string(x) == string(y)
}

// TestSSHHosts runs jobs across three hosts with their own addresses and
// host names (network namespaces, an sshd each): hello and testcore, a
// node file with a host listed twice, and a forwarded variable.
func TestSSHHosts(t *testing.T) {
	h := startHosts(t, 3)
	servers := strings.Join(h.names, " ")
	t.Run("hello", func(t *testing.T) {
		marker := t.Name()
		start := time.Now()
		r := run(t, marker, sshEnv(servers, h.config), "hello", "3", "a", "b c")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		t.Logf("hello on 3 hosts: %v", time.Since(start).Round(time.Millisecond))
		if d := cmp.Diff(helloLines(h.names, `["a" "b c"]`), sortedLines(r.stdout)); d != "" {
			t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
		}
		checkNoSurvivors(t, marker, 2*time.Second)
	})
	t.Run("testcore", func(t *testing.T) {
		r := run(t, t.Name(), sshEnv(servers, h.config), "testcore", "3", "500")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("testcore with 10% loss on uch2", func(t *testing.T) {
		// 10% of the datagrams uch2 receives, and of those it sends (as
		// uch1 and uch3 receive them), are dropped. Input hooks see a
		// datagram once reassembled: a drop on output would hit each IP
		// fragment of a long message (45 of 1500 bytes for 64 KB), and a
		// 64 KB datagram would then get through 1% of the time (see
		// README, Loss).
		needCommand("nft", "nftables")(t)
		nftRules(t, "uch2", lossRules(10, "in"))
		for _, other := range []string{"uch1", "uch3"} {
			nftRules(t, other, "table inet ucloss {\n chain in {\n  type filter hook input priority -10; policy accept;\n  ip saddr "+netPrefix+"2 meta l4proto udp numgen random mod 100 < 10 counter drop\n }\n}\n")
		}
		t.Cleanup(func() {
			for _, ns := range h.names {
				exec.Command("ip", "netns", "exec", ns, "nft", "flush", "ruleset").Run()
			}
		})
		r := run(t, t.Name(), sshEnv(servers, h.config, "GASNET_STATS=1"), "testcore", "3", "-msgs", "1000")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		st := jobStats(t, r.stderr, 3)
		dropped := nftCounted(t, "uch1") + nftCounted(t, "uch2") + nftCounted(t, "uch3")
		t.Logf("nftables dropped %d datagrams to and from uch2; retransmits %d, duplicates %d", dropped, total(st, "retransmits"), total(st, "dup-requests")+total(st, "dup-replies"))
		if dropped == 0 || total(st, "retransmits")+total(st, "reply-resends") == 0 {
			t.Errorf("dropped %d, retransmitted %d: the loss did not happen or was not recovered from", dropped, total(st, "retransmits"))
		}
	})
	t.Run("nodefile", func(t *testing.T) {
		nodes := t.TempDir() + "/nodes"
		os.WriteFile(nodes, []byte("# from scontrol show hostnames\nuch2\nuch2\nuch3\nuch1\nuch1\n"), 0o644)
		env := append(sshEnv("", h.config), "GASNET_SSH_SERVERS=", "GASNET_SSH_NODEFILE="+nodes)
		r := run(t, t.Name(), env, "hello", "4")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		if d := cmp.Diff(helloLines([]string{"uch2", "uch2", "uch3", "uch1"}, "[]"), sortedLines(r.stdout)); d != "" {
			t.Errorf("output (-want +got):\n%s", d)
		}
	})
	t.Run("two hosts of two ranks", func(t *testing.T) {
		// Ranks 0-1 on uch1 and 2-3 on uch3 share memory within their
		// host (2 ranks on 2 CPUs: not crowded) and UDP between hosts;
		// the barrier runs in two levels.
		nodes := t.TempDir() + "/nodes"
		os.WriteFile(nodes, []byte("uch1\nuch1\nuch3\nuch3\n"), 0o644)
		env := append(sshEnv("", h.config), "GASNET_SSH_SERVERS=", "GASNET_SSH_NODEFILE="+nodes, "GASNET_STATS=1", "GASNET_VERBOSEENV=1")
		r := run(t, t.Name(), env, "testcore", "4", "-msgs", "1000")
		if r.code != 0 || !strings.Contains(r.stdout, "every request and reply ran exactly once") {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
		for _, want := range []string{"rank 0: barrier in two levels, gathered and released", "testcore: rank 0 shares its segment with ranks [0 1]\n"} {
			if !strings.Contains(r.stdout+r.stderr, want) {
				t.Errorf("no %q in the output:\nstdout:\n%s\nstderr:\n%s", want, r.stdout, r.stderr)
			}
		}
		for rank, st := range jobStats(t, r.stderr, 4) {
			// Put and Get reach the rank's host neighbour and itself by
			// a copy, the other host's two ranks by messages; so do
			// testcore's strided Put and indexed Get to the next rank,
			// which for ranks 0 and 2 is on their host.
			copies := 2 + 1 - rank%2
			if st["shm-sent"] == 0 || st["shm-received"] == 0 || st["shm-put"] != copies || st["shm-get"] != copies || st["long-in-place"] == 0 {
				t.Errorf("rank %d: %v", rank, st)
			}
		}
	})
	t.Run("forwarded", func(t *testing.T) {
		env := append(sshEnv(servers, h.config), "GASNET_FORWARD_ENV=UDPCONDUIT_TEST_MARKER,MY_SETTING=two,MY_OTHER PRINT_ENV", "MY_OTHER=x'y \\$HOME", "PRINT_ENV=MY_SETTING MY_OTHER", "LINES=0")
		r := run(t, t.Name(), env, "printer", "3")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		var want []string
		for i := range 3 {
			want = append(want, fmt.Sprintf("rank %d: MY_SETTING=%q MY_OTHER=%q", i, "two", `x'y \$HOME`))
		}
		if d := cmp.Diff(want, sortedLines(r.stdout)); d != "" {
			t.Errorf("output (-want +got):\n%s", d)
		}
	})
}

// killConsole starts a 3-worker printer job with env that waits in the
// network, checks that procs processes carry the test's marker (the console
// and 3 workers, to which it is forwarded; and 3 ssh clients with
// GASNET_SSH_CMD), kills the console with SIGKILL, and wants every process
// of the job gone within 2 s.
func killConsole(t *testing.T, procs int, env []string) {
	t.Helper()
	marker := t.Name()
	cmd, _ := startPrinter(t, marker, 3, "wait", "waiting", append(env, "LINES=1")...)
	if n := len(survivors(marker)); n != procs {
		t.Fatalf("%d processes of the job, want %d:\n%s", n, procs, strings.Join(survivors(marker), "\n"))
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	checkNoSurvivors(t, marker, 2*time.Second)
}

// TestSSHHostsFaults: on namespace hosts, a host that is down (an address
// nobody answers) fails the job within GASNET_CONNECT_TIMEOUT naming it,
// and kill -9 of the console ends the workers on every host.
func TestSSHHostsFaults(t *testing.T) {
	h := startHosts(t, 3)
	t.Run("host down", func(t *testing.T) {
		start := time.Now()
		r := run(t, t.Name(), sshEnv("uch1 uch2 "+netPrefix+"9", h.config, "GASNET_CONNECT_TIMEOUT=2s"), "hello", "3")
		took := time.Since(start)
		if r.code != 1 || !strings.Contains(r.stderr, "ssh "+netPrefix+"9: cannot connect: no answer from "+netPrefix+"9:22 within 2s (GASNET_CONNECT_TIMEOUT") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and one line naming %s9", r.code, r.stderr, netPrefix)
		}
		if took > 30*time.Second { // the default GASNET_CONNECT_TIMEOUT (60 s) would be a hang
			t.Errorf("took %v with GASNET_CONNECT_TIMEOUT=2s", took)
		}
		t.Logf("%v: %s", took.Round(time.Millisecond), r.stderr)
		checkNoSurvivors(t, t.Name(), 2*time.Second)
	})
	t.Run("kill -9", func(t *testing.T) { killConsole(t, 4, sshEnv(strings.Join(h.names, " "), h.config)) })
}

// TestSSHExternal: GASNET_SSH_CMD=ssh runs the job through OpenSSH's own
// client with the same options, and a host that wants a password fails at
// once (BatchMode) instead of hanging on a prompt.
func TestSSHExternal(t *testing.T) {
	h := startHosts(t, 3)
	t.Run("hello", func(t *testing.T) {
		marker := t.Name()
		start := time.Now()
		r := run(t, marker, sshEnv(strings.Join(h.names, " "), h.config, "GASNET_SSH_CMD=ssh"), "hello", "3", "a", "b c")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		t.Logf("hello on 3 hosts with GASNET_SSH_CMD=ssh: %v", time.Since(start).Round(time.Millisecond))
		if d := cmp.Diff(helloLines(h.names, `["a" "b c"]`), sortedLines(r.stdout)); d != "" {
			t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
		}
		checkNoSurvivors(t, marker, 2*time.Second)
	})
	t.Run("kill -9", func(t *testing.T) {
		killConsole(t, 7, sshEnv(strings.Join(h.names, " "), h.config, "GASNET_SSH_CMD=ssh"))
	})
	t.Run("password", func(t *testing.T) {
		pw := startSSHD(t, sshdOptions{password: true})
		config, _ := sshClientFiles(t, []string{pw.knownHostsLine("127.0.0.1")}, "")
		start := time.Now()
		r := run(t, t.Name(), sshEnv(fmt.Sprintf("127.0.0.1:%d", pw.port), config, "GASNET_SSH_CMD=ssh"), "hello", "1")
		if r.code == 0 || !strings.Contains(r.stderr, "Permission denied") || time.Since(start) > 30*time.Second {
			t.Fatalf("exit %d after %v, stderr:\n%s\nwant a failure that says Permission denied", r.code, time.Since(start), r.stderr)
		}
		t.Logf("stderr:\n%s", r.stderr)
	})
}

// TestSSHTree: with GASNET_SSH_OUT_DEGREE=1 over three hosts the console
// logs in to the first host only, which starts the second, which starts the
// third (each sshd's log says who logged in); the job runs, kill -9 of the
// console ends the whole chain, and a host down deep in the tree fails the
// job naming it.
func TestSSHTree(t *testing.T) {
	h := startHosts(t, 3)
	servers := strings.Join(h.names, " ")
	tree := func(more ...string) []string {
		return sshEnv(servers, h.config, append([]string{"GASNET_SSH_OUT_DEGREE=1"}, more...)...)
	}
	t.Run("hello", func(t *testing.T) {
		marker := t.Name()
		start := time.Now()
		r := run(t, marker, tree(), "hello", "3", "a", "b c")
		if r.code != 0 {
			t.Fatalf("exit %d\nstderr:\n%s", r.code, r.stderr)
		}
		t.Logf("hello on 3 hosts through a spawn tree of out-degree 1: %v", time.Since(start).Round(time.Millisecond))
		if d := cmp.Diff(helloLines(h.names, `["a" "b c"]`), sortedLines(r.stdout)); d != "" {
			t.Errorf("output (-want +got):\n%s\nstderr:\n%s", d, r.stderr)
		}
		for i, d := range h.sshds {
			from := consoleIP
			if i > 0 {
				from = h.addrs[i-1]
			}
			logins := regexp.MustCompile(`Accepted publickey for root from (\S+)`).FindAllStringSubmatch(d.log.String(), -1)
			if len(logins) == 0 {
				t.Errorf("%s: nobody logged in", h.names[i])
			}
			for _, l := range logins {
				if l[1] != from {
					t.Errorf("%s: a login from %s, want only from %s", h.names[i], l[1], from)
				}
			}
		}
		checkNoSurvivors(t, marker, 2*time.Second)
	})
	t.Run("testcore", func(t *testing.T) {
		r := run(t, t.Name(), tree(), "testcore", "3", "300")
		if r.code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		r := run(t, t.Name(), tree(), "testexit", "3", "3")
		if r.code != 3 {
			t.Fatalf("exit %d, want 3\nstderr:\n%s", r.code, r.stderr)
		}
	})
	t.Run("kill -9", func(t *testing.T) { killConsole(t, 4, tree()) })
	t.Run("host down", func(t *testing.T) {
		marker := t.Name()
		start := time.Now()
		r := run(t, marker, sshEnv("uch1 uch2 "+netPrefix+"9", h.config, "GASNET_SSH_OUT_DEGREE=1", "GASNET_CONNECT_TIMEOUT=2s"), "hello", "3")
		if r.code != 1 || !strings.Contains(r.stderr, "ssh "+netPrefix+"9: cannot connect: no answer") || time.Since(start) > 30*time.Second {
			t.Fatalf("exit %d after %v, stderr:\n%s\nwant exit 1 naming %s9", r.code, time.Since(start), r.stderr, netPrefix)
		}
		t.Logf("%v:\n%s", time.Since(start).Round(time.Millisecond), r.stderr)
		checkNoSurvivors(t, marker, 2*time.Second)
	})
}
