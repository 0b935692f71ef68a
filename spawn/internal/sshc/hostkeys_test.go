package sshc

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// TestRevokedAndAliasedHostKeys: a key that known_hosts marks @revoked is
// refused even when another line lists it as the host's, under any
// StrictHostKeyChecking; with HostKeyAlias, the key is looked up under the
// alias, not the host's address (OpenSSH's rules).
func TestRevokedAndAliasedHostKeys(t *testing.T) {
	priv, signer := newKey(t)
	s := startServer(t, signer.PublicKey())
	key := keyFile(t, priv, "")
	d := &Dialer{Timeout: 5 * time.Second, Say: func(string, ...any) {}}
	port := strconv.Itoa(s.addr.Port)
	fp := "ssh-ed25519 " + ssh.FingerprintSHA256(s.hostKey.PublicKey())
	withKey := func(tg Target) Target { tg.Identities = []string{key}; return tg }

	revoked := "@revoked " + knownhosts.Line([]string{"[127.0.0.1]:" + port}, s.hostKey.PublicKey()) + "\n"
	for _, strict := range []string{"yes", "accept-new", "no"} {
		tg := withKey(s.target(t, s.knownLine()+revoked, strict))
		err := dial(t, d, tg)
		wantError(t, "revoked key, StrictHostKeyChecking="+strict, err, "its host key "+fp+" is revoked", tg.KnownHosts[0]+":2", "refusing it")
		if !IsHostKeyError(err) {
			t.Errorf("revoked key: %v is not a host key error", err)
		}
	}

	aliased := knownhosts.Line([]string{"[otherhost]:" + port}, s.hostKey.PublicKey()) + "\n"
	tg := withKey(s.target(t, aliased, "yes"))
	tg.HostKeyAlias = "otherhost"
	if err := dial(t, d, tg); err != nil {
		t.Errorf("the key on file under HostKeyAlias: %v", err)
	}
	tg = withKey(s.target(t, s.knownLine(), "yes"))
	tg.HostKeyAlias = "otherhost"
	wantError(t, "the key on file under the address, not the alias", dial(t, d, tg),
		fmt.Sprintf("its host key %s is not known", fp), "ssh-keyscan -p "+port+" otherhost")
}
