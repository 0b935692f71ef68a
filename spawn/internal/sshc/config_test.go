package sshc

import (
	"cmp"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestConfigSyntax: keywords in any case, with a blank, = or " = " before
// the value; full-line and trailing comments; quoted values; CRLF line
// ends; lines before the first Host apply to every host.
func TestConfigSyntax(t *testing.T) {
	c, err := ParseConfig("# a comment\r\n" +
		"ConnectTimeout 9\r\n" +
		"HOST=web*   # the web hosts\r\n" +
		"  port=2200\r\n" +
		"  User = \"deploy\"\r\n" +
		"  IdentityFile \"/k/my key\"\r\n" +
		"  HostName\tweb-%h.example # trailing\r\n" +
		"  ProxyJump jump#1\r\n")
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"Port": "2200", "user": "deploy", "IDENTITYFILE": "/k/my key",
		"HostName": "web-%h.example", "ConnectTimeout": "9", "ProxyJump": "jump#1", "Ciphers": ""} {
		if got := c.Get("web1", key); got != want {
			t.Errorf("web1 %s = %q, want %q", key, got, want)
		}
	}
	if got := c.Get("db1", "Port"); got != "" {
		t.Errorf("db1 Port = %q: a web* line applied", got)
	}
	if got := c.Get("db1", "ConnectTimeout"); got != "9" {
		t.Errorf("db1 ConnectTimeout = %q: a line before any Host did not apply", got)
	}
}

// TestConfigMatching: the first value for a host wins and GetAll gathers
// every one, in file order; Host takes several patterns, * and ?, and a
// negated pattern that matches excludes the block; Match all, host and
// originalhost (comma-separated lists) apply as Host does.
func TestConfigMatching(t *testing.T) {
	c, err := ParseConfig(`
Host a?c !abc x*
  User first
  IdentityFile /k/1
Host *
  User second
  IdentityFile /k/2
Match host m1,m2
  Port 1
Match originalhost q*
  Port 2
Match all
  Port 3
  IdentityFile /k/3
`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		alias, user, port string
		ids               []string
	}{
		{"aXc", "first", "3", []string{"/k/1", "/k/2", "/k/3"}},
		{"abc", "second", "3", []string{"/k/2", "/k/3"}}, // negated
		{"xylophone", "first", "3", []string{"/k/1", "/k/2", "/k/3"}},
		{"ac", "second", "3", []string{"/k/2", "/k/3"}}, // ? is one character
		{"m2", "second", "1", []string{"/k/2", "/k/3"}},
		{"qq", "second", "2", []string{"/k/2", "/k/3"}},
	} {
		if got := c.Get(tc.alias, "user"); got != tc.user {
			t.Errorf("%s: User %q, want %q", tc.alias, got, tc.user)
		}
		if got := c.Get(tc.alias, "port"); got != tc.port {
			t.Errorf("%s: Port %q, want %q", tc.alias, got, tc.port)
		}
		if d := gocmp.Diff(tc.ids, c.GetAll(tc.alias, "identityfile")); d != "" {
			t.Errorf("%s: IdentityFile (-want +got):\n%s", tc.alias, d)
		}
	}
	// A comma in a Host line is part of the pattern, as in OpenSSH.
	c, _ = ParseConfig("Host m1,m2\n  Port 9\n")
	if got := c.Get("m1", "Port"); got != "" {
		t.Errorf("Host m1,m2 matched m1: Port %q", got)
	}
}

// matchHostConfig is a configuration of every kind of Match line the
// reader takes.
const matchHostConfig = `
Host foo
  HostName bar.Example.com
Match host *.example.COM
  User matched
Match originalhost FOO !host foo
  Port 1
Match !host nothing,other
  IdentityFile /k/not-nothing
Host UPPER
  Port 2
Match final all
  Port 3
  User final
  IdentityFile /k/final
Match canonical all
  Port 4
`

// TestConfigMatchHost: as in OpenSSH 9 (`ssh -G`), Match host sees the
// name that a HostName line met before it gives, without case, and
// originalhost the name as listed; Host patterns meet the name with its
// case; criteria combine and negate; Match final applies in a final pass,
// after every other line (first value still wins); Match canonical never
// holds. TestConfigAgainstOpenSSH checks the same text against ssh -G.
func TestConfigMatchHost(t *testing.T) {
	c, err := ParseConfig(matchHostConfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ alias, key, want string }{
		{"foo", "User", "matched"},
		{"foo", "Port", "1"},
		{"other", "User", "final"}, // only the final pass gives one
		{"other", "Port", "3"},
		{"upper", "Port", "3"}, // Host UPPER: with its case
		{"UPPER", "Port", "2"},
	} {
		if got := c.Get(tc.alias, tc.key); got != tc.want {
			t.Errorf("%s %s = %q, want %q", tc.alias, tc.key, got, tc.want)
		}
	}
	if d := gocmp.Diff([]string{"/k/not-nothing", "/k/final"}, c.GetAll("foo", "IdentityFile")); d != "" {
		t.Errorf("foo IdentityFile (-want +got):\n%s", d)
	}
	if d := gocmp.Diff([]string{"/k/not-nothing", "/k/final"}, c.GetAll("upper", "IdentityFile")); d != "" {
		t.Errorf("upper IdentityFile (-want +got):\n%s", d)
	}
	if d := gocmp.Diff([]string{"/k/final"}, c.GetAll("nothing", "IdentityFile")); d != "" {
		t.Errorf("nothing IdentityFile (-want +got):\n%s", d)
	}
}

// TestConfigInclude: Include reads files relative to ~/.ssh (the user's
// files) or /etc/ssh (the system's), absolute or ~/ paths, and globs; the
// included lines apply where the Include does, and files that include
// each other are an error, not a loop.
func TestConfigInclude(t *testing.T) {
	home := t.TempDir()
	must := func(path, text string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	must(filepath.Join(home, ".ssh", "conf.d", "a.conf"), "Host a\n  Port 11\n")
	must(filepath.Join(home, ".ssh", "conf.d", "b.conf"), "Host b\n  Port 12\n")
	must(filepath.Join(home, "abs.conf"), "User fromabs\n")
	must(filepath.Join(home, "only-c.conf"), "Port 13\n")
	must(filepath.Join(home, ".ssh", "config"), "Include conf.d/*.conf ~/abs.conf\n"+
		"Host c\n  Include "+filepath.Join(home, "only-c.conf")+"\nHost *\n  Port 22\n")
	files, err := LoadConfigFiles("", Local{Home: home, User: "me"})
	if err != nil {
		t.Fatal(err)
	}
	for alias, want := range map[string]string{"a": "11", "b": "12", "c": "13", "d": "22"} {
		if got := files.get(alias, "Port"); got != want {
			t.Errorf("%s: Port %q, want %q", alias, got, want)
		}
	}
	if got := files.get("d", "User"); got != "fromabs" {
		t.Errorf("User %q from an absolute Include", got)
	}
	must(filepath.Join(home, "loop.conf"), "Include "+filepath.Join(home, "loop.conf")+"\n")
	if _, err := LoadConfigFiles(filepath.Join(home, "loop.conf"), Local{Home: home}); err == nil || !strings.Contains(err.Error(), "nested more than") {
		t.Errorf("a file that includes itself: %v", err)
	}
	if d := (includeDir{home: "/h", system: true}).resolve("x.conf"); d != "/etc/ssh/x.conf" {
		t.Errorf("a system file's relative Include is %s", d)
	}
}

// TestConfigErrors: a keyword without a value, unbalanced quotes, a Host
// without a pattern and a Match the built-in client cannot evaluate are
// errors naming the line; LoadConfigFiles names the file, and a file
// named by -F that does not exist is an error, missing default files not.
func TestConfigErrors(t *testing.T) {
	for text, want := range map[string]string{
		"Host x\n  User\n":              "line 2: User has no value",
		"Host x\n  User =\n":            "line 2: User has no value",
		"IdentityFile \"/a b\n":         "line 1: IdentityFile: unbalanced quotes",
		"Host !\n":                      "line 1: Host \"!\" has no pattern",
		"Match exec \"true\"\n  Port 1": "line 1: Match exec \"true\": the built-in ssh client takes Match with all, final, canonical, host and originalhost",
		"Match host\n":                  "line 1: Match host: the built-in",
		"Match\n":                       "line 1: Match has no value",
		"Match user root\n":             "GASNET_SSH_CMD=ssh",
	} {
		if _, err := ParseConfig(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", text, err, want)
		}
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("Port\n"), 0o600)
	if _, err := LoadConfigFiles(bad, Local{Home: dir}); err == nil || !strings.Contains(err.Error(), bad+": line 1") {
		t.Errorf("-F bad file: %v", err)
	}
	if _, err := LoadConfigFiles(filepath.Join(dir, "missing"), Local{Home: dir}); err == nil {
		t.Error("-F of a missing file was accepted")
	}
	if files, err := LoadConfigFiles("", Local{Home: dir}); err != nil {
		t.Errorf("no ~/.ssh/config: %v (%d files)", err, len(files))
	}
}

// TestGlob checks glob against a regular expression over random patterns
// of a, b, * and ? and random strings of a and b.
func TestGlob(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(alphabet string, max int) string {
		b := make([]byte, r.IntN(max+1))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		return string(b)
	}
	for range 20000 {
		p, s := word("ab*?", 6), word("ab", 8)
		re := "^" + strings.NewReplacer("*", ".*", "?", ".").Replace(p) + "$"
		if want := regexp.MustCompile(re).MatchString(s); glob(p, s) != want {
			t.Fatalf("glob(%q, %q) = %v, want %v", p, s, !want, want)
		}
	}
}

// FuzzParseConfig: whatever a file holds, ParseConfig returns a config or
// an error, never panics, and a config's Get is the first of its GetAll.
func FuzzParseConfig(f *testing.F) {
	f.Add("Host a*\n  User x # c\nMatch host b,c\n  User=\"y z\"\n", "ab")
	f.Add("User u\nHost !n *\n  Port 2\n", "m")
	f.Fuzz(func(t *testing.T, text, alias string) {
		if strings.Contains(text, "nclude") {
			return // no files from the fuzzer's text
		}
		c, err := ParseConfig(text)
		if err != nil {
			return
		}
		for _, key := range []string{"user", "port", "hostname"} {
			all := c.GetAll(alias, key)
			if got := c.Get(alias, key); (len(all) == 0) != (got == "") || len(all) > 0 && got != all[0] {
				t.Fatalf("%s: Get %q, GetAll %q", key, got, all)
			}
		}
	})
}

// TestConfigAgainstOpenSSH reads configurations with OpenSSH's own client
// (`ssh -G`, which prints what it resolved for a host without connecting)
// and checks that Get and GetAll resolve User, Port, HostName and
// IdentityFile as it does, for every host named.
func TestConfigAgainstOpenSSH(t *testing.T) {
	ssh, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatalf("OpenSSH's client (make deps installs openssh-client): %v", err)
	}
	local, _ := user.Current()
	configs := []string{`
Port 2000
Host a* !abc
  User first
  IdentityFile /k/1
Host *
  User second
  IdentityFile /k/2
`, matchHostConfig, `
Host = web?  db
  HostName=%h.internal
  port = 2222
Match host *.internal
  User "ops"
Host *
  IdentityFile /k/default # a comment
`}
	hosts := []string{"abc", "axe", "foo", "FOO", "other", "upper", "UPPER", "web1", "webby", "db", "nothing"}
	dir := t.TempDir()
	for n, text := range configs {
		path := filepath.Join(dir, strconv.Itoa(n))
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig(text)
		if err != nil {
			t.Fatalf("config %d: %v", n, err)
		}
		for _, h := range hosts {
			out, err := exec.Command(ssh, "-G", "-F", path, h).Output()
			if err != nil {
				t.Fatalf("ssh -G -F %s %s: %v", path, h, err)
			}
			want := map[string][]string{}
			for _, l := range strings.Split(string(out), "\n") {
				if k, v, ok := strings.Cut(l, " "); ok && (k == "user" || k == "port" || k == "hostname" || k == "identityfile") {
					want[k] = append(want[k], v)
				}
			}
			got := map[string][]string{
				"user":     {cmp.Or(c.Get(h, "User"), local.Username)},
				"port":     {cmp.Or(c.Get(h, "Port"), "22")},
				"hostname": {strings.ToLower(strings.ReplaceAll(cmp.Or(c.Get(h, "HostName"), h), "%h", h))},
			}
			if ids := c.GetAll(h, "IdentityFile"); len(ids) > 0 {
				got["identityfile"] = ids
			} else {
				got["identityfile"] = want["identityfile"] // OpenSSH's defaults
			}
			if d := gocmp.Diff(want, got); d != "" {
				t.Errorf("config %d, host %s (-ssh -G +ours):\n%s", n, h, d)
			}
		}
	}
}
