package sshc

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// testServer is an in-process ssh server on loopback (x/crypto/ssh
// NewServerConn): it accepts the client key it is given, or only passwords,
// and serves sftp rooted at home.
type testServer struct {
	addr     *net.TCPAddr
	hostKey  ssh.Signer
	home     string
	accepted ssh.PublicKey // nil: only passwords
}

func newKey(t *testing.T) (ed25519.PrivateKey, ssh.Signer) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return priv, s
}

func startServer(t *testing.T, accepted ssh.PublicKey) *testServer {
	t.Helper()
	_, hk := newKey(t)
	s := &testServer{hostKey: hk, home: t.TempDir(), accepted: accepted}
	cfg := &ssh.ServerConfig{}
	if accepted != nil {
		cfg.PublicKeyCallback = func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) == string(accepted.Marshal()) {
				return nil, nil
			}
			return nil, fmt.Errorf("not this key")
		}
	} else {
		cfg.PasswordCallback = func(ssh.ConnMetadata, []byte) (*ssh.Permissions, error) { return nil, fmt.Errorf("no") }
	}
	cfg.AddHostKey(hk)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s.addr = ln.Addr().(*net.TCPAddr)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c, cfg)
		}
	}()
	return s
}

func (s *testServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			for r := range creqs {
				if r.Type == "subsystem" && string(r.Payload[4:]) == "sftp" {
					r.Reply(true, nil)
					srv, err := sftp.NewServer(ch, sftp.WithServerWorkingDirectory(s.home))
					if err == nil {
						srv.Serve()
					}
					ch.Close()
					return
				}
				r.Reply(false, nil)
			}
		}()
	}
}

// target is a Target for the server with a known_hosts file of the given
// lines.
func (s *testServer) target(t *testing.T, known string, strict string) Target {
	t.Helper()
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if known != "" {
		os.WriteFile(kh, []byte(known), 0o600)
	}
	return Target{Alias: "127.0.0.1", HostName: "127.0.0.1", Port: s.addr.Port, User: "me",
		KnownHosts: []string{kh}, UserKnownHosts: kh, StrictHostKeyChecking: strict}
}

func (s *testServer) knownLine() string {
	return knownhosts.Line([]string{"[127.0.0.1]:" + strconv.Itoa(s.addr.Port)}, s.hostKey.PublicKey()) + "\n"
}

// keyFile writes priv as an OpenSSH key file, with a passphrase if set.
func keyFile(t *testing.T, priv ed25519.PrivateKey, passphrase string) string {
	t.Helper()
	var b *pem.Block
	var err error
	if passphrase != "" {
		b, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte(passphrase))
	} else {
		b, err = ssh.MarshalPrivateKey(priv, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "id_test")
	if err := os.WriteFile(p, pem.EncodeToMemory(b), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func dial(t *testing.T, d *Dialer, tg Target) error {
	t.Helper()
	c, err := d.Dial(&tg)
	if err == nil {
		c.Close()
	}
	return err
}

func wantError(t *testing.T, what string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want one saying %q", what, parts)
		return
	}
	rest := err.Error()
	for _, p := range parts {
		i := strings.Index(rest, p)
		if i < 0 {
			t.Errorf("%s: %v\ndoes not say %q (in order)", what, err, p)
			return
		}
		rest = rest[i+len(p):]
	}
}

func TestDialHostKeys(t *testing.T) {
	priv, signer := newKey(t)
	s := startServer(t, signer.PublicKey())
	key := keyFile(t, priv, "")
	var said []string
	d := &Dialer{Timeout: 5 * time.Second, Say: func(f string, a ...any) { said = append(said, fmt.Sprintf(f, a...)) }}
	fp := "ssh-ed25519 " + ssh.FingerprintSHA256(s.hostKey.PublicKey())
	withKey := func(tg Target) Target { tg.Identities = []string{key}; return tg }

	if err := dial(t, d, withKey(s.target(t, s.knownLine(), "yes"))); err != nil {
		t.Fatalf("known host: %v", err)
	}
	err := dial(t, d, withKey(s.target(t, "", "yes")))
	wantError(t, "unknown host", err, fmt.Sprintf("ssh 127.0.0.1 (127.0.0.1:%d): its host key %s is not known", s.addr.Port, fp),
		fmt.Sprintf("ssh-keyscan -p %d 127.0.0.1 >> ", s.addr.Port), "StrictHostKeyChecking=accept-new")
	if !IsHostKeyError(err) {
		t.Errorf("unknown host: %v is not a host key error", err)
	}
	_, other := newKey(t)
	wrong := knownhosts.Line([]string{"[127.0.0.1]:" + strconv.Itoa(s.addr.Port)}, other.PublicKey()) + "\n"
	tg := withKey(s.target(t, "# a comment\n"+wrong, "yes"))
	wantError(t, "changed key", dial(t, d, tg), "its host key has CHANGED: it offers "+fp, tg.KnownHosts[0]+":2 holds ssh-ed25519 "+ssh.FingerprintSHA256(other.PublicKey()), "ssh-keygen -R")
	wantError(t, "changed key with accept-new", dial(t, d, withKey(s.target(t, wrong, "accept-new"))), "has CHANGED")

	said = nil
	if err := dial(t, d, withKey(s.target(t, wrong, "no"))); err != nil || len(said) != 1 || !strings.Contains(said[0], "StrictHostKeyChecking=no") {
		t.Errorf("StrictHostKeyChecking=no on a changed key: %v, said %q", err, said)
	}
	tg = withKey(s.target(t, "", "accept-new"))
	if err := dial(t, d, tg); err != nil {
		t.Fatalf("accept-new: %v", err)
	}
	if b, _ := os.ReadFile(tg.UserKnownHosts); string(b) != s.knownLine() {
		t.Errorf("accept-new wrote %q, want %q", b, s.knownLine())
	}
	tg.StrictHostKeyChecking = "yes"
	if err := dial(t, d, tg); err != nil {
		t.Errorf("strict after accept-new: %v", err)
	}
}

func TestDialAuth(t *testing.T) {
	priv, signer := newKey(t)
	s := startServer(t, signer.PublicKey())
	key := keyFile(t, priv, "")
	d := &Dialer{Timeout: 5 * time.Second}
	base := s.target(t, s.knownLine(), "yes")
	with := func(ids ...string) Target { tg := base; tg.Identities = ids; return tg }

	if err := dial(t, d, with(key)); err != nil {
		t.Errorf("the accepted key: %v", err)
	}
	otherPriv, _ := newKey(t)
	wantError(t, "another key", dial(t, d, with(keyFile(t, otherPriv, ""))), "login as me refused: no key was accepted")
	locked := keyFile(t, priv, "secret words")
	wantError(t, "a key with a passphrase", dial(t, d, with(locked)), "no key was accepted", "the key "+locked+" has a passphrase", "ssh-add "+locked)
	wantError(t, "a missing key file", dial(t, d, with("/nonexistent/id")), "the key file /nonexistent/id does not exist")
	tg := with(filepath.Join(t.TempDir(), ".ssh", "id_ed25519"))
	tg.DefaultIdentities = true
	err := dial(t, d, tg)
	wantError(t, "no key at all", err, "no key to offer")
	if err != nil && strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a missing default key file is named: %v", err)
	}

	// The agent's key logs in, with no key file; the locked file's key is
	// the same key, so the agent is what a passphrase needs.
	sock := filepath.Join(t.TempDir(), "agent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ring := agent.NewKeyring()
	if err := ring.Add(agent.AddedKey{PrivateKey: priv}); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go agent.ServeAgent(ring, c)
		}
	}()
	da := &Dialer{Timeout: 5 * time.Second, AgentSocket: sock}
	if err := dial(t, da, with(locked)); err != nil {
		t.Errorf("through the agent: %v", err)
	}
	only := with(keyFile(t, otherPriv, ""))
	only.IdentitiesOnly = true
	wantError(t, "IdentitiesOnly leaves the agent's other keys out", dial(t, da, only), "no key was accepted")

	// A client that prompted would wait for an answer until the dial's
	// timeout and fail with another error.
	pw := startServer(t, nil)
	tg = pw.target(t, pw.knownLine(), "yes")
	tg.Identities = []string{key}
	wantError(t, "a host that wants a password", dial(t, d, tg), "login as me refused: the host asks for a password, and udpconduit never prompts", "ssh-copy-id -p")
}

func TestPlace(t *testing.T) {
	priv, signer := newKey(t)
	s := startServer(t, signer.PublicKey())
	tg := s.target(t, s.knownLine(), "yes")
	tg.Identities = []string{keyFile(t, priv, "")}
	c, err := (&Dialer{Timeout: 5 * time.Second}).Dial(&tg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/sh\necho the program\n"), 0o755)
	p, err := LocalProgram(prog)
	if err != nil {
		t.Fatal(err)
	}
	// Present: the server shares this filesystem.
	if got, how, err := p.Place(c, "h", ""); err != nil || got != prog || how != "present" {
		t.Errorf("present: %q, %q, %v", got, how, err)
	}
	// Absent (another path), then cached, under the remote home.
	p.Path = filepath.Join(dir, "elsewhere", "prog")
	want := filepath.Join(s.home, DefaultCache, p.Hash[:32], "prog")
	if got, how, err := p.Place(c, "h", ""); err != nil || got != want || how != "staged" {
		t.Fatalf("absent: %q, %q, %v; want %q staged", got, how, err, want)
	}
	if b, err := os.ReadFile(want); err != nil || string(b) != "#!/bin/sh\necho the program\n" {
		t.Errorf("the staged copy: %q, %v", b, err)
	}
	if fi, err := os.Stat(want); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the staged copy's mode: %v, %v", fi, err)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(want), ".*")); len(leftovers) != 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	if got, how, err := p.Place(c, "h", ""); err != nil || got != want || how != "cached" {
		t.Errorf("again: %q, %q, %v; want %q cached", got, how, err, want)
	}
	// Another file at the path: not run, not touched.
	os.MkdirAll(filepath.Dir(p.Path), 0o755)
	os.WriteFile(p.Path, []byte("#!/bin/sh\necho theirs, same size\n")[:len("#!/bin/sh\necho the program\n")], 0o755)
	abs := filepath.Join(t.TempDir(), "cache")
	if got, how, err := p.Place(c, "h", abs); err != nil || got != filepath.Join(abs, p.Hash[:32], "prog") || how != "staged" {
		t.Errorf("another file at the path: %q, %q, %v", got, how, err)
	}
	if b, _ := os.ReadFile(p.Path); !strings.HasPrefix(string(b), "#!/bin/sh\necho theirs") {
		t.Errorf("the host's own file changed: %q", b)
	}
	// An unwritable cache names the way out.
	os.WriteFile(filepath.Join(dir, "file"), nil, 0o644)
	_, _, err = p.Place(c, "h2", filepath.Join(dir, "file", "cache"))
	wantError(t, "unwritable cache", err, "staging "+p.Path+" to ")
}
