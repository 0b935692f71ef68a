package tests

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// sshd is a real OpenSSH server the tests start (no system service): key
// login only unless password is set, its own host key, files in dir.
type sshd struct {
	dir      string
	addr     string // the address it listens on
	port     int
	hostKey  string // the public host key line ("ssh-ed25519 AAAA...")
	cmd      *exec.Cmd
	log      *syncBuffer
	password bool
}

// sshdOptions say where and how a server runs.
type sshdOptions struct {
	addr     string // listen address; default 127.0.0.1
	port     int    // default: a free port (22 in a namespace)
	netns    string // run inside this network namespace, as host name hostname
	hostname string
	password bool // accept only passwords (a host that asks for one)
	// hide is a directory the server and its sessions see empty (a tmpfs
	// mounted over it in their own mount namespace): a host that lacks
	// what the console has there.
	hide string
	// banner is a login banner the server shows before authentication.
	banner string
}

var clientKey struct {
	once sync.Once
	path string
	err  error
}

// sshClientKey returns the private key file every test client logs in with
// (made once per test run).
func sshClientKey(t *testing.T) string {
	t.Helper()
	clientKey.once.Do(func() {
		clientKey.path = filepath.Join(bin, "ssh", "id_ed25519")
		os.MkdirAll(filepath.Dir(clientKey.path), 0o700)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "udpconduit-test", "-f", clientKey.path).CombinedOutput(); err != nil {
			clientKey.err = fmt.Errorf("ssh-keygen: %v\n%s", err, out)
		}
	})
	if clientKey.err != nil {
		t.Fatal(clientKey.err)
	}
	return clientKey.path
}

// needSSHD fails the test (never skips it) when OpenSSH is missing.
func needSSHD(t *testing.T) {
	t.Helper()
	for _, c := range []struct{ cmd, pkg string }{{"/usr/sbin/sshd", "openssh-server"}, {"ssh-keygen", "openssh-client"}, {"ssh", "openssh-client"}} {
		needCommand(c.cmd, c.pkg)(t)
	}
}

// startSSHD starts a server and stops it when the test ends.
func startSSHD(t *testing.T, o sshdOptions) *sshd {
	t.Helper()
	needSSHD(t)
	key := sshClientKey(t)
	d := &sshd{dir: t.TempDir(), addr: o.addr, port: o.port, password: o.password, log: &syncBuffer{}}
	if d.addr == "" {
		d.addr = "127.0.0.1"
	}
	if d.port == 0 {
		if o.netns != "" {
			d.port = 22
		} else {
			d.port = freeTCPPort(t)
		}
	}
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil { // its privilege separation directory
		t.Fatal(err)
	}
	hk := filepath.Join(d.dir, "host_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hk).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(hk + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(pub))
	d.hostKey = f[0] + " " + f[1]
	auth, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.dir, "authorized_keys"), auth, 0o600); err != nil {
		t.Fatal(err)
	}
	login := "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
	if o.password {
		login = "PubkeyAuthentication no\nPasswordAuthentication yes\nKbdInteractiveAuthentication yes\nPermitRootLogin yes\n"
	}
	conf := fmt.Sprintf("Port %d\nListenAddress %s\nHostKey %s\nPidFile %s\nAuthorizedKeysFile %s\nStrictModes no\n%sUsePAM no\nUseDNS no\nMaxStartups 100:30:200\nMaxSessions 100\nLogLevel VERBOSE\nSubsystem sftp internal-sftp\n",
		d.port, d.addr, hk, filepath.Join(d.dir, "sshd.pid"), filepath.Join(d.dir, "authorized_keys"), login)
	if o.banner != "" {
		bf := filepath.Join(d.dir, "banner")
		if err := os.WriteFile(bf, []byte(o.banner+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		conf += "Banner " + bf + "\n"
	}
	cfgFile := filepath.Join(d.dir, "sshd_config")
	if err := os.WriteFile(cfgFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	script := "exec /usr/sbin/sshd -D -e -f " + cfgFile
	unshare := []string{"unshare"}
	if o.netns != "" {
		// Its own host name, seen by the sessions it starts.
		unshare = append(unshare, "--uts")
		script = "hostname " + o.hostname + " && " + script
	}
	if o.hide != "" {
		unshare = append(unshare, "--mount")
		script = "mount -t tmpfs udpconduit-test " + o.hide + " && " + script
	}
	d.cmd = exec.Command(unshare[0], append(unshare[1:], "sh", "-c", script)...)
	if o.netns != "" {
		d.cmd = exec.Command("ip", append([]string{"netns", "exec", o.netns}, d.cmd.Args...)...)
	}
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(d.stop)
	d.waitListening(t)
	return d
}

// waitListening waits until the server accepts connections.
func (d *sshd) waitListening(t *testing.T) {
	t.Helper()
	bound := testbound.For(t, 10*time.Second)
	deadline := time.Now().Add(bound)
	for {
		c, err := net.DialTimeout("tcp", d.hostPort(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sshd on %s does not listen after %v: %v\nits log:\n%s", d.hostPort(), bound, err, d.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (d *sshd) hostPort() string { return net.JoinHostPort(d.addr, strconv.Itoa(d.port)) }

// stop ends the server (its connections' processes end with their
// connections).
func (d *sshd) stop() {
	if d.cmd.Process != nil {
		d.cmd.Process.Kill()
		d.cmd.Wait()
	}
}

// knownHostsLine is the known_hosts line of this server under name.
func (d *sshd) knownHostsLine(name string) string {
	if d.port != 22 {
		name = "[" + name + "]:" + strconv.Itoa(d.port)
	}
	return name + " " + d.hostKey + "\n"
}

// freeTCPPort returns a loopback port nobody listens on now.
func freeTCPPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// sshClientFiles writes a known_hosts with the given lines and an
// ssh_config whose Host * block uses the test key and that known_hosts,
// plus any extra text before it. It returns the ssh_config path.
func sshClientFiles(t *testing.T, known []string, extra string) (config, knownHosts string) {
	t.Helper()
	dir := t.TempDir()
	knownHosts = filepath.Join(dir, "known_hosts")
	if err := os.WriteFile(knownHosts, []byte(strings.Join(known, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	config = filepath.Join(dir, "ssh_config")
	text := extra + fmt.Sprintf("Host *\n  User root\n  IdentityFile %s\n  UserKnownHostsFile %s\n  BatchMode yes\n", sshClientKey(t), knownHosts)
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return config, knownHosts
}
