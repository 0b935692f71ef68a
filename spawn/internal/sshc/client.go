package sshc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Dialer opens ssh connections to Targets: keys from the agent
// (SSH_AUTH_SOCK) and the key files, host keys checked against known_hosts,
// and never a prompt (a host that wants a password is an error that says
// so).
type Dialer struct {
	// Timeout bounds the TCP connect and the ssh handshake of a target that
	// sets no ConnectTimeout.
	Timeout time.Duration
	// Say prints notes for verbose mode (nil: quiet): host keys accepted
	// without a check or added to known_hosts, keys that could not be used.
	Say func(format string, a ...any)
	// Jump resolves a ProxyJump hop ("user@host:port") to its Target.
	Jump func(hop string) (Target, error)
	// AgentSocket is the agent's socket; "" means no agent.
	AgentSocket string

	mu     sync.Mutex // guards the known_hosts file that accept-new appends to
	keysMu sync.Mutex
	keys   map[string]ssh.Signer // parsed key files by path
	notes  map[string]string     // why a key file could not be used
}

// ErrNoPrompt says why a host that asks for a password is refused: the job
// must not hang on a prompt nobody sees.
var ErrNoPrompt = errors.New("udpconduit never prompts for a password")

func (d *Dialer) say(format string, a ...any) {
	if d.Say != nil {
		d.Say(format, a...)
	}
}

// Dial connects and logs in to t, through its ProxyJump hops if it has
// any. Every error names the target and says what to do.
func (d *Dialer) Dial(t *Target) (*ssh.Client, error) {
	var via *ssh.Client
	if t.ProxyJump != "" {
		hops := strings.Split(t.ProxyJump, ",")
		for _, h := range hops {
			if d.Jump == nil {
				return nil, fmt.Errorf("ssh %s: ProxyJump %s: no way to resolve the hop", t.Dest(), h)
			}
			ht, err := d.Jump(h)
			if err != nil {
				return nil, fmt.Errorf("ssh %s: ProxyJump %s: %w", t.Dest(), h, err)
			}
			ht.ProxyJump = ""
			c, err := d.dialVia(via, &ht)
			if err != nil {
				if via != nil {
					via.Close()
				}
				return nil, fmt.Errorf("ssh %s: through ProxyJump: %w", t.Dest(), err)
			}
			via = c
		}
	}
	c, err := d.dialVia(via, t)
	if err != nil && via != nil {
		via.Close()
	}
	return c, err
}

// dialVia opens the connection to t, directly (via nil) or through an ssh
// connection to a jump host.
func (d *Dialer) dialVia(via *ssh.Client, t *Target) (*ssh.Client, error) {
	timeout := d.Timeout
	if t.ConnectTimeout > 0 {
		timeout = t.ConnectTimeout
	}
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	deadline := time.Now().Add(timeout)
	var conn net.Conn
	var err error
	if via == nil {
		conn, err = (&net.Dialer{Deadline: deadline}).Dial("tcp", t.Addr())
	} else {
		conn, err = via.Dial("tcp", t.Addr())
	}
	if err != nil {
		if e := t.NameError(err); e != nil {
			return nil, e
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("ssh %s: cannot connect: no answer from %s within %v (GASNET_CONNECT_TIMEOUT, or ConnectTimeout in ssh_config): the host is down, or a firewall drops the connection", t.Dest(), t.Addr(), timeout)
		}
		return nil, fmt.Errorf("ssh %s: cannot connect: %w", t.Dest(), err)
	}
	cfg, wantPass, notes, err := d.clientConfig(t)
	if err != nil {
		conn.Close()
		return nil, err
	}
	conn.SetDeadline(deadline)
	cc, chans, reqs, err := ssh.NewClientConn(conn, t.Addr(), cfg)
	if err != nil {
		conn.Close()
		return nil, d.loginError(t, err, *wantPass, notes)
	}
	conn.SetDeadline(time.Time{})
	c := ssh.NewClient(cc, chans, reqs)
	if t.ServerAlive > 0 {
		go keepAlive(c, t.ServerAlive)
	}
	return c, nil
}

// NameError returns the message for err when it is a failed lookup of t's
// host name, else nil.
func (t *Target) NameError(err error) error {
	var dns *net.DNSError
	if !errors.As(err, &dns) {
		return nil
	}
	return fmt.Errorf("ssh %s: the name %s does not resolve on this host (%s); list an address, or add it to /etc/hosts or to ~/.ssh/config as a HostName", t.Dest(), t.HostName, dns.Err)
}

// keepAlive sends OpenSSH keepalives every interval and closes c when one
// gets no answer (ServerAliveInterval; OpenSSH's ServerAliveCountMax of 3).
func keepAlive(c *ssh.Client, interval time.Duration) {
	missed := 0
	for {
		time.Sleep(interval)
		done := make(chan error, 1)
		go func() { _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); done <- err }()
		select {
		case err := <-done:
			if err != nil {
				return // closed
			}
			missed = 0
		case <-time.After(interval):
			if missed++; missed >= 3 {
				c.Close()
				return
			}
		}
	}
}

// loginError explains a failed handshake.
func (d *Dialer) loginError(t *Target, err error, wantPass bool, notes []string) error {
	var hk *hostKeyError
	if errors.As(err, &hk) {
		return hk
	}
	msg := err.Error()
	if !strings.Contains(msg, "unable to authenticate") {
		return fmt.Errorf("ssh %s: %w", t.Dest(), err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ssh %s: login as %s refused", t.Dest(), t.User)
	if wantPass {
		fmt.Fprintf(&b, ": the host asks for a password, and %v (a prompt would hang the job); set up key login (ssh-copy-id -p %d %s@%s) or load a key into ssh-agent", ErrNoPrompt, t.Port, t.User, t.HostName)
	} else {
		b.WriteString(": no key was accepted; check the user, the key files (GASNET_SSH_OPTIONS='-i KEY') and the host's authorized_keys")
	}
	for _, n := range notes {
		b.WriteString("; " + n)
	}
	return errors.New(b.String())
}

// clientConfig returns the ssh configuration for t: its keys (the agent's,
// then the key files'), a note of whether the server would rather have a
// password, and its host key check.
func (d *Dialer) clientConfig(t *Target) (*ssh.ClientConfig, *bool, []string, error) {
	signers, notes := d.signers(t)
	wantPass := new(bool)
	// The client offers keys only. The server's list of the methods it
	// would still accept tells whether it wanted a password.
	var mu sync.Mutex
	noted := func(ctx *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
		if slices.Contains(ctx.AllowedMethods, "password") || slices.Contains(ctx.AllowedMethods, "keyboard-interactive") {
			mu.Lock()
			*wantPass = true
			mu.Unlock()
		}
		return nil, nil
	}
	var auth []ssh.AuthMethod
	if len(signers) > 0 {
		auth = append(auth, ssh.PublicKeys(signers...))
	} else {
		notes = append(notes, "no key to offer: no ssh-agent (SSH_AUTH_SOCK) key and none of "+strings.Join(t.Identities, ", ")+" could be read")
	}
	check, algos, err := d.hostKeyCheck(t)
	if err != nil {
		return nil, nil, nil, err
	}
	return &ssh.ClientConfig{User: t.User, Auth: auth, AuthCallback: noted, HostKeyCallback: check, HostKeyAlgorithms: algos}, wantPass, notes, nil
}

// signers returns the keys to offer t: the agent's (only those of t's
// identity files under IdentitiesOnly), then the identity files'.
func (d *Dialer) signers(t *Target) ([]ssh.Signer, []string) {
	var out, files []ssh.Signer
	var notes []string
	for _, p := range t.Identities {
		s, note := d.keyFile(p)
		if s != nil {
			files = append(files, s)
		}
		if note != "" {
			notes = append(notes, note)
		}
	}
	if d.AgentSocket != "" {
		if conn, err := net.DialTimeout("unix", d.AgentSocket, time.Second); err != nil {
			d.say("ssh-agent at SSH_AUTH_SOCK=%s: %v; using key files only", d.AgentSocket, err)
		} else {
			// The connection stays open for the signatures the handshake
			// asks for; it ends with the process.
			as, err := agent.NewClient(conn).Signers()
			if err != nil {
				d.say("ssh-agent at SSH_AUTH_SOCK=%s: %v; using key files only", d.AgentSocket, err)
			}
			for _, s := range as {
				if !t.IdentitiesOnly || slices.ContainsFunc(files, func(f ssh.Signer) bool { return sameKey(f.PublicKey(), s.PublicKey()) }) {
					out = append(out, s)
				}
			}
		}
	}
	for _, f := range files {
		if !slices.ContainsFunc(out, func(s ssh.Signer) bool { return sameKey(f.PublicKey(), s.PublicKey()) }) {
			out = append(out, f)
		}
	}
	return out, notes
}

func sameKey(a, b ssh.PublicKey) bool { return string(a.Marshal()) == string(b.Marshal()) }

// keyFile parses the private key at p once. A missing file gives no note
// when it is one of the default names; an encrypted key gives a note that
// says to load it into the agent.
func (d *Dialer) keyFile(p string) (ssh.Signer, string) {
	d.keysMu.Lock()
	defer d.keysMu.Unlock()
	if d.keys == nil {
		d.keys, d.notes = map[string]ssh.Signer{}, map[string]string{}
	}
	if s, ok := d.keys[p]; ok {
		return s, d.notes[p]
	}
	var s ssh.Signer
	var note string
	b, err := os.ReadFile(p)
	switch {
	case os.IsNotExist(err):
		if !isDefaultKey(p) {
			note = fmt.Sprintf("the key file %s does not exist", p)
		}
	case err != nil:
		note = fmt.Sprintf("the key file %s cannot be read: %v", p, err)
	default:
		s, err = ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			note = fmt.Sprintf("the key %s has a passphrase, which udpconduit never asks for: load it into ssh-agent (ssh-add %s)", p, p)
		} else if err != nil {
			note = fmt.Sprintf("the key file %s: %v", p, err)
		}
	}
	d.keys[p], d.notes[p] = s, note
	return s, note
}

func isDefaultKey(p string) bool {
	switch filepath.Base(p) {
	case "id_ed25519", "id_ecdsa", "id_rsa":
		return filepath.Base(filepath.Dir(p)) == ".ssh"
	}
	return false
}
