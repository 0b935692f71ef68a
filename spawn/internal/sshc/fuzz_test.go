package sshc

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseServers: any server list parses or is refused without a panic;
// what parses has a host, a port in 1..65535 or none, and writes back
// (Server.String) to an entry that parses to the same server.
func FuzzParseServers(f *testing.F) {
	for _, s := range []string{"h1 h2", "root@h1:2222", "[::1]:22,[fe80::1]", "h1:h2:33", "u@[::1]", "a@b@c", "h:0", "h:65536", "[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		got, err := ParseServers("GASNET_SSH_SERVERS", list)
		if err != nil {
			return
		}
		for _, s := range got {
			if s.Host == "" || s.Port < 0 || s.Port > 65535 {
				t.Fatalf("ParseServers(%q) gave %+v", list, s)
			}
			back, err := ParseServers("again", s.String())
			if err != nil {
				t.Fatalf("%+v from %q writes back as %q, which does not parse: %v", s, list, s.String(), err)
			}
			if d := cmp.Diff([]Server{s}, back); d != "" {
				t.Fatalf("%q (from %q) parses to another server (-want +got):\n%s", s.String(), list, d)
			}
		}
	})
}

// FuzzParseOptions: any option string is parsed or refused without a
// panic, for the built-in client and an external one.
func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{"-p 2222 -l root", "-o StrictHostKeyChecking=accept-new -i ~/k", `-o "User x"`, "-qT", "-J a@b:22", "-p", "'unclosed", `-o ProxyCommand="nc %h %p"`} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, external bool) {
		ParseOptions("GASNET_SSH_OPTIONS", s, external)
		SplitWords(s)
	})
}
