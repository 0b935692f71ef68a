package sshc

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseServers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Server
		err  string
	}{
		{in: "h1 h2 h3", want: []Server{{Host: "h1"}, {Host: "h2"}, {Host: "h3"}}},
		{in: "h1,h2/h3;h4:h5", want: []Server{{Host: "h1"}, {Host: "h2"}, {Host: "h3"}, {Host: "h4"}, {Host: "h5"}}},
		{in: "  h1\t h1 ", want: []Server{{Host: "h1"}, {Host: "h1"}}},
		{in: "bob@h1:2222", want: []Server{{User: "bob", Host: "h1", Port: 2222}}},
		{in: "h1:2222:h2:h3:22", want: []Server{{Host: "h1", Port: 2222}, {Host: "h2"}, {Host: "h3", Port: 22}}},
		{in: "10.77.0.1:10.77.0.2", want: []Server{{Host: "10.77.0.1"}, {Host: "10.77.0.2"}}},
		{in: "[::1]:2222 al@[fe80::1]", want: []Server{{Host: "::1", Port: 2222}, {User: "al", Host: "fe80::1"}}},
		{in: "", want: nil},
		{in: "h1:70000", err: `"h1:70000": port 70000; accepted: 1..65535`},
		{in: "@h1", err: `"@h1": accepted: host, user@host`},
		{in: "bob@", err: `"bob@": accepted`},
		{in: "[::1", err: `"[::1": not an address in brackets`},
		{in: "[nothost]", err: `not an address in brackets`},
		{in: "[@:", err: `"[@:": accepted: host, user@host`}, // found by FuzzParseServers
		{in: "u@[h]x", err: `not an address in brackets`},
	} {
		got, err := ParseServers("GASNET_SSH_SERVERS", c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "GASNET_SSH_SERVERS: ") {
				t.Errorf("ParseServers(%q): error %v, want one with %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseServers(%q): %v", c.in, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("ParseServers(%q) (-want +got):\n%s", c.in, d)
		}
		// An entry prints back as a list that parses to itself.
		var back []string
		for _, s := range got {
			back = append(back, s.String())
		}
		if again, err := ParseServers("x", strings.Join(back, " ")); err != nil || !cmp.Equal(again, got) {
			t.Errorf("ParseServers(%q): printed back as %q, which reads as %v, %v", c.in, back, again, err)
		}
	}
}

func TestParseNodeFile(t *testing.T) {
	got, err := ParseNodeFile("nodes", strings.NewReader("# a PBS node file\nh1\nh1\n\n  h2  # the second\nroot@h3:2222\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{{Host: "h1"}, {Host: "h1"}, {Host: "h2"}, {User: "root", Host: "h3", Port: 2222}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if _, err := ParseNodeFile("nodes", strings.NewReader("h1\nh2 h3\n")); err == nil || !strings.Contains(err.Error(), "nodes:2: ") {
		t.Errorf("two hosts on a line: %v, want an error naming nodes:2", err)
	}
	if _, err := ParseNodeFile("nodes", strings.NewReader("h1:h2\n")); err == nil {
		t.Errorf("two hosts on a line through a colon: no error")
	}
	if got, err := ForRanks(want, 3, "GASNET_SSH_NODEFILE=nodes"); err != nil || len(got) != 3 {
		t.Errorf("ForRanks(4 hosts, 3) = %v, %v", got, err)
	}
	if _, err := ForRanks(want, 5, "GASNET_SSH_NODEFILE=nodes"); err == nil || err.Error() != "GASNET_SSH_NODEFILE=nodes lists 4 host(s); N=5 needs 5, one per rank (repeat a name to run several ranks on one host)" {
		t.Errorf("ForRanks(4 hosts, 5): %v", err)
	}
}

func TestSplitWords(t *testing.T) {
	for in, want := range map[string][]string{
		`-o "User bob" -i '/a b/key'`: {"-o", "User bob", "-i", "/a b/key"},
		`a\ b "x\"y" '' c`:            {"a b", `x"y`, "", "c"},
		"  ":                          nil,
		`"a"'b'c`:                     {"abc"},
	} {
		got, err := SplitWords(in)
		if err != nil || !cmp.Equal(want, got) {
			t.Errorf("SplitWords(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{`"a`, `'a`, `a\`} {
		if _, err := SplitWords(in); err == nil {
			t.Errorf("SplitWords(%q): no error", in)
		}
	}
}

func TestParseOptions(t *testing.T) {
	o, err := ParseOptions("GASNET_SSH_OPTIONS", `-p 2222 -l bob -i ~/k1 -ik2 -F /tmp/cfg -qT -o StrictHostKeyChecking=no -oUser=carol -o "Port 9" -o IdentityFile=k3 -J j1`, false)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{ConfigFile: "/tmp/cfg", Port: 2222, User: "bob", Identities: []string{"~/k1", "k2", "k3"}, Quiet: true, ProxyJump: "j1",
		Set: map[string]string{"stricthostkeychecking": "no", "user": "carol", "port": "9", "identityfile": "k3"}}
	if d := cmp.Diff(want, o, cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".Words" }, cmp.Ignore())); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, c := range []struct{ in, err string }{
		{"-X", "-X: the built-in ssh client does not support it; set GASNET_SSH_CMD=ssh"},
		{"-o Ciphers=aes128-ctr", "-o Ciphers: the built-in ssh client does not support it"},
		{"-L 8080:localhost:80", "-L: the built-in ssh client does not support it"},
		{"-p", "-p needs an argument"},
		{"-p 0", "-p 0: accepted: a port 1..65535"},
		{"-o Port", "-o Port: accepted: -o Key=Value"},
		{"host", `"host" is not an option`},
		{"-Z", "-Z is not an ssh option"},
		{`-o "User`, "an unclosed double quote"},
	} {
		_, err := ParseOptions("GASNET_SSH_OPTIONS", c.in, false)
		if err == nil || !strings.Contains(err.Error(), c.err) || !strings.HasPrefix(err.Error(), "GASNET_SSH_OPTIONS") {
			t.Errorf("ParseOptions(%q): %v, want an error with %q", c.in, err, c.err)
		}
	}
	// The external client gets every option; only the syntax is checked.
	if o, err := ParseOptions("GASNET_SSH_OPTIONS", "-X -o Ciphers=aes128-ctr -L 1:h:2", true); err != nil || len(o.Words) != 5 {
		t.Errorf("external: %+v, %v", o, err)
	}
}

func TestResolve(t *testing.T) {
	cfg, err := ParseConfig(`
Host h*
  User root
  Port 2200
  IdentityFile %d/.ssh/hkey
  UserKnownHostsFile /k/known_hosts /k/more
Host h2
  HostName 10.77.0.2
  StrictHostKeyChecking accept-new
Host alias
  HostName real-%h.example
  ConnectTimeout 7
  ProxyJump none
Host *
  Port 22
  User nobody
`)
	if err != nil {
		t.Fatal(err)
	}
	loc := Local{Home: "/home/me", User: "me"}
	defIDs := []string{"/home/me/.ssh/id_ed25519", "/home/me/.ssh/id_ecdsa", "/home/me/.ssh/id_rsa"}
	defKH := []string{"/home/me/.ssh/known_hosts", "/home/me/.ssh/known_hosts2", "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}
	for _, c := range []struct {
		name string
		s    Server
		opts string
		want Target
	}{
		{"config for h1", Server{Host: "h1"}, "", Target{Alias: "h1", HostName: "h1", Port: 2200, User: "root",
			Identities: []string{"/home/me/.ssh/hkey"}, KnownHosts: []string{"/k/known_hosts", "/k/more", "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
			UserKnownHosts: "/k/known_hosts", StrictHostKeyChecking: "yes"}},
		{"HostName and accept-new", Server{Host: "h2"}, "", Target{Alias: "h2", HostName: "10.77.0.2", Port: 2200, User: "root",
			Identities: []string{"/home/me/.ssh/hkey"}, KnownHosts: []string{"/k/known_hosts", "/k/more", "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
			UserKnownHosts: "/k/known_hosts", StrictHostKeyChecking: "accept-new"}},
		{"entry beats options beat config", Server{User: "al", Host: "h1", Port: 2222}, "-l bob -p 9 -o User=carol -i ~/mine -o UserKnownHostsFile=none", Target{Alias: "h1", HostName: "h1", Port: 2222, User: "al",
			Identities: []string{"/home/me/mine"}, KnownHosts: []string{"/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"}, StrictHostKeyChecking: "yes"}},
		{"options beat config", Server{Host: "h1"}, "-o User=carol -o Port=9 -o StrictHostKeyChecking=no", Target{Alias: "h1", HostName: "h1", Port: 9, User: "carol",
			Identities: []string{"/home/me/.ssh/hkey"}, KnownHosts: []string{"/k/known_hosts", "/k/more", "/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"},
			UserKnownHosts: "/k/known_hosts", StrictHostKeyChecking: "no"}},
		{"tokens and defaults", Server{Host: "alias"}, "", Target{Alias: "alias", HostName: "real-alias.example", Port: 22, User: "nobody",
			Identities: defIDs, DefaultIdentities: true, KnownHosts: defKH, UserKnownHosts: "/home/me/.ssh/known_hosts",
			StrictHostKeyChecking: "yes", ConnectTimeout: 7 * time.Second}},
	} {
		o, err := ParseOptions("GASNET_SSH_OPTIONS", c.opts, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Resolve(c.s, o, ConfigFiles{cfg}, loc)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, d)
		}
	}
	// Without any file, the local user and OpenSSH's defaults.
	got, err := Resolve(Server{Host: "x"}, Options{}, nil, loc)
	if err != nil || got.User != "me" || got.Port != 22 || got.KeyName() != "x" || got.Addr() != "x:22" {
		t.Errorf("no config: %+v, %v", got, err)
	}
	got.Port = 2222
	if got.KeyName() != "[x]:2222" {
		t.Errorf("KeyName off port 22 = %q", got.KeyName())
	}
	bad, _ := ParseConfig("Host *\n  StrictHostKeyChecking maybe\n")
	if _, err := Resolve(Server{Host: "x"}, Options{}, ConfigFiles{bad}, loc); err == nil || !strings.Contains(err.Error(), "StrictHostKeyChecking=maybe; accepted: yes, accept-new, no") {
		t.Errorf("bad StrictHostKeyChecking: %v", err)
	}
}
