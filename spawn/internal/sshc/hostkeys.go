package sshc

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// hostKeyError is a host key that was refused: unknown, changed or
// revoked. Its text names the host, the key's fingerprint and the fix.
type hostKeyError struct{ msg string }

func (e *hostKeyError) Error() string { return e.msg }

// IsHostKeyError reports whether err is a refused host key.
func IsHostKeyError(err error) bool {
	var hk *hostKeyError
	return errors.As(err, &hk)
}

// hostKeyCheck returns the host key callback for t, and the host key
// algorithms to ask for: those of the keys known_hosts holds for t (as
// OpenSSH does), so that a host with several keys shows the one on file.
func (d *Dialer) hostKeyCheck(t *Target) (ssh.HostKeyCallback, []string, error) {
	var files []string
	for _, f := range t.KnownHosts {
		if _, err := os.Stat(f); err == nil {
			files = append(files, f)
		}
	}
	db, err := knownhosts.New(files...)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh %s: reading known_hosts: %w", t.Dest(), err)
	}
	keyHost, keyPort := t.HostName, strconv.Itoa(t.Port)
	if t.HostKeyAlias != "" {
		keyHost = t.HostKeyAlias
	}
	keyAddr := net.JoinHostPort(keyHost, keyPort)
	known := knownKeys(db, keyAddr)
	var algos []string
	for _, k := range known {
		algos = appendAlgos(algos, k.Key.Type())
	}
	where := strings.Join(files, ", ")
	if where == "" {
		where = "no known_hosts file exists: " + strings.Join(t.KnownHosts, ", ")
	}
	check := func(_ string, remote net.Addr, key ssh.PublicKey) error {
		err := db(keyAddr, remote, key)
		if err == nil {
			return nil
		}
		fp := key.Type() + " " + ssh.FingerprintSHA256(key)
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case errors.As(err, &re):
			return &hostKeyError{fmt.Sprintf("ssh %s: its host key %s is revoked (%s:%d); refusing it", t.Dest(), fp, re.Revoked.Filename, re.Revoked.Line)}
		case errors.As(err, &ke) && len(ke.Want) == 0:
			switch t.StrictHostKeyChecking {
			case "no":
				d.say("ssh %s: accepting its unverified host key %s (StrictHostKeyChecking=no)", t.Dest(), fp)
				return nil
			case "accept-new":
				if err := d.addKnown(t.UserKnownHosts, t.KeyName(), key); err != nil {
					return &hostKeyError{fmt.Sprintf("ssh %s: StrictHostKeyChecking=accept-new: cannot record its host key %s: %v", t.Dest(), fp, err)}
				}
				d.say("ssh %s: its new host key %s is now in %s (StrictHostKeyChecking=accept-new)", t.Dest(), fp, t.UserKnownHosts)
				return nil
			}
			return &hostKeyError{fmt.Sprintf("ssh %s: its host key %s is not known (%s); if this is the right host, add it: ssh-keyscan%s %s >> %s (or ssh once to %s and answer yes), or opt out with GASNET_SSH_OPTIONS='-o StrictHostKeyChecking=accept-new'",
				t.Dest(), fp, where, portFlag(t.Port, "-p"), keyHost, first(t.UserKnownHosts, "~/.ssh/known_hosts"), t.Alias)}
		case errors.As(err, &ke):
			if t.StrictHostKeyChecking == "no" {
				d.say("ssh %s: accepting its host key %s although %s:%d has another (StrictHostKeyChecking=no)", t.Dest(), fp, ke.Want[0].Filename, ke.Want[0].Line)
				return nil
			}
			w := ke.Want[0]
			return &hostKeyError{fmt.Sprintf("ssh %s: its host key has CHANGED: it offers %s, but %s:%d holds %s %s for %s; someone may be intercepting the connection; if the host was reinstalled, remove the old key (ssh-keygen -R '%s' -f %s) and add the new one",
				t.Dest(), fp, w.Filename, w.Line, w.Key.Type(), ssh.FingerprintSHA256(w.Key), t.KeyName(), t.KeyName(), w.Filename)}
		}
		return &hostKeyError{fmt.Sprintf("ssh %s: checking its host key: %v", t.Dest(), err)}
	}
	return check, algos, nil
}

func portFlag(port int, flag string) string {
	if port == 22 {
		return ""
	}
	return " " + flag + " " + strconv.Itoa(port)
}

// knownKeys returns the keys on file for addr: the check of a key that
// matches none of them lists them all.
func knownKeys(db ssh.HostKeyCallback, addr string) []knownhosts.KnownKey {
	probe, err := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize))) // never on file
	if err != nil {
		return nil
	}
	var ke *knownhosts.KeyError
	if err := db(addr, &net.TCPAddr{IP: net.IPv4zero}, probe); errors.As(err, &ke) {
		return ke.Want
	}
	return nil
}

// appendAlgos adds the host key algorithms that present keys of type typ.
func appendAlgos(algos []string, typ string) []string {
	add := []string{typ}
	if typ == ssh.KeyAlgoRSA {
		add = []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	for _, a := range add {
		if !slices.Contains(algos, a) {
			algos = append(algos, a)
		}
	}
	return algos
}

// addKnown appends name's key to the known_hosts file (accept-new),
// creating the file and its directory when needed.
func (d *Dialer) addKnown(file, name string, key ssh.PublicKey) error {
	if file == "" {
		return errors.New("no UserKnownHostsFile to write to")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.WriteString(knownhosts.Line([]string{knownhosts.Normalize(name)}, key) + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
