package sshc

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Target is everything the client needs to reach one host: the server
// entry resolved through the options and the ssh_config files.
type Target struct {
	Alias    string // the name as listed (what ssh_config Host lines match)
	HostName string // what is dialled
	Port     int
	User     string
	// Identities are the key files to try after the agent's keys; when
	// DefaultIdentities is set they are OpenSSH's default names, and the
	// missing ones are skipped silently.
	Identities        []string
	DefaultIdentities bool
	IdentitiesOnly    bool // only Identities, not every key of the agent
	// KnownHosts are the known_hosts files checked (user's, then global).
	// UserKnownHosts is the first user file, where accept-new adds keys.
	KnownHosts     []string
	UserKnownHosts string
	HostKeyAlias   string // the name host keys are checked under, if not HostName
	// StrictHostKeyChecking is "yes" (also for OpenSSH's "ask": nothing is
	// ever asked), "accept-new" or "no".
	StrictHostKeyChecking string
	ConnectTimeout        time.Duration // 0: the caller's
	ServerAlive           time.Duration // ServerAliveInterval, 0: off
	ProxyJump             string        // "" or "none": direct
	Quiet                 bool
}

// Addr is the host:port dialled.
func (t *Target) Addr() string { return net.JoinHostPort(t.HostName, strconv.Itoa(t.Port)) }

// KeyName is the name the host key is looked up under in known_hosts:
// "host", or "[host]:port" off port 22.
func (t *Target) KeyName() string {
	h := t.HostName
	if t.HostKeyAlias != "" {
		h = t.HostKeyAlias
	}
	if t.Port == 22 {
		return h
	}
	return "[" + h + "]:" + strconv.Itoa(t.Port)
}

// Dest is how the target is named in messages: user@alias, with the port
// and address when they say more.
func (t *Target) Dest() string {
	s := t.Alias
	if t.HostName != t.Alias || t.Port != 22 {
		s += " (" + t.Addr() + ")"
	}
	return s
}

// Local is what the resolution needs to know of the local user.
type Local struct {
	Home string // home directory, for ~ and the default files
	User string // login name, the default remote user
}

// ConfigFiles are the parsed ssh_config files, in the order they are
// consulted (the first value found for a key wins, as in OpenSSH).
type ConfigFiles []*Config

// LoadConfigFiles reads the ssh_config files: file alone when set (-F;
// "none" for none, an unreadable one is an error), else ~/.ssh/config and
// /etc/ssh/ssh_config when they exist. A file that does not parse is an
// error naming it.
func LoadConfigFiles(file string, loc Local) (ConfigFiles, error) {
	type source struct {
		path string
		dir  includeDir
	}
	files := []source{{filepath.Join(loc.Home, ".ssh", "config"), includeDir{home: loc.Home}},
		{"/etc/ssh/ssh_config", includeDir{home: loc.Home, system: true}}}
	if file != "" {
		if file == "none" {
			return nil, nil
		}
		files = []source{{expandHome(file, loc.Home), includeDir{home: loc.Home}}}
	}
	var out ConfigFiles
	for _, f := range files {
		c, err := parseConfigFile(f.path, f.dir, 0)
		if err != nil {
			if file == "" && os.IsNotExist(err) {
				continue
			}
			return nil, fmt.Errorf("ssh config: %w", err)
		}
		out = append(out, c)
	}
	return out, nil
}

// get returns the first value of key for alias over the files.
func (cf ConfigFiles) get(alias, key string) string {
	for _, c := range cf {
		if v := c.Get(alias, key); v != "" {
			return v
		}
	}
	return ""
}

// getAll returns every value of key for alias over the files, in order.
func (cf ConfigFiles) getAll(alias, key string) []string {
	var out []string
	for _, c := range cf {
		out = append(out, c.GetAll(alias, key)...)
	}
	return out
}

// Resolve makes the Target of server s: the entry's own user and port
// first, then the options (-l, -p, -i, -o ...), then the ssh_config files,
// then OpenSSH's defaults. name is the options' variable, for errors.
func Resolve(s Server, o Options, cf ConfigFiles, loc Local) (Target, error) {
	t := Target{Alias: s.Host, Quiet: o.Quiet}
	// setting returns the value of key: -o first, then the files.
	setting := func(key string) string {
		if v, ok := o.Set[strings.ToLower(key)]; ok {
			return v
		}
		return cf.get(s.Host, key)
	}
	t.HostName = s.Host
	if h := setting("HostName"); h != "" {
		t.HostName = strings.ReplaceAll(h, "%h", s.Host)
	}
	t.User = first(s.User, o.User, setting("User"), loc.User)
	port := first(portString(s.Port), portString(o.Port), setting("Port"), "22")
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return t, fmt.Errorf("ssh %s: Port %s; accepted: 1..65535", s.Host, port)
	}
	t.Port = p
	tokens := func(v string) string { return expandTokens(v, loc, t.HostName, t.User, s.Host) }
	ids := o.Identities
	if len(ids) == 0 {
		ids = cf.getAll(s.Host, "IdentityFile")
	}
	for _, id := range ids {
		t.Identities = append(t.Identities, tokens(id))
	}
	if len(t.Identities) == 0 {
		t.DefaultIdentities = true
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			t.Identities = append(t.Identities, filepath.Join(loc.Home, ".ssh", n))
		}
	}
	if t.IdentitiesOnly, err = yesNo(s.Host, "IdentitiesOnly", setting("IdentitiesOnly"), false); err != nil {
		return t, err
	}
	user := first(setting("UserKnownHostsFile"), "~/.ssh/known_hosts ~/.ssh/known_hosts2")
	global := first(setting("GlobalKnownHostsFile"), "/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2")
	for i, f := range strings.Fields(user) {
		if f == "none" || f == "/dev/null" {
			continue
		}
		f = tokens(f)
		if i == 0 {
			t.UserKnownHosts = f
		}
		t.KnownHosts = append(t.KnownHosts, f)
	}
	for _, f := range strings.Fields(global) {
		if f != "none" {
			t.KnownHosts = append(t.KnownHosts, tokens(f))
		}
	}
	t.HostKeyAlias = setting("HostKeyAlias")
	switch v := strings.ToLower(first(setting("StrictHostKeyChecking"), "ask")); v {
	case "yes", "ask", "true":
		t.StrictHostKeyChecking = "yes"
	case "accept-new":
		t.StrictHostKeyChecking = "accept-new"
	case "no", "off", "false":
		t.StrictHostKeyChecking = "no"
	default:
		return t, fmt.Errorf("ssh %s: StrictHostKeyChecking=%s; accepted: yes, accept-new, no", s.Host, v)
	}
	if v := setting("ConnectTimeout"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return t, fmt.Errorf("ssh %s: ConnectTimeout=%s; accepted: seconds, an integer >= 0", s.Host, v)
		}
		t.ConnectTimeout = time.Duration(n) * time.Second
	}
	if v := setting("ServerAliveInterval"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return t, fmt.Errorf("ssh %s: ServerAliveInterval=%s; accepted: seconds, an integer >= 0", s.Host, v)
		}
		t.ServerAlive = time.Duration(n) * time.Second
	}
	t.ProxyJump = first(o.ProxyJump, setting("ProxyJump"))
	if strings.EqualFold(t.ProxyJump, "none") {
		t.ProxyJump = ""
	}
	for _, k := range []string{"PasswordAuthentication", "KbdInteractiveAuthentication", "BatchMode"} {
		if _, err := yesNo(s.Host, k, setting(k), true); err != nil {
			return t, err
		}
	}
	return t, nil
}

func portString(p int) string {
	if p == 0 {
		return ""
	}
	return strconv.Itoa(p)
}

// first returns the first non-empty string.
func first(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func yesNo(host, key, v string, def bool) (bool, error) {
	switch strings.ToLower(v) {
	case "":
		return def, nil
	case "yes", "true":
		return true, nil
	case "no", "false":
		return false, nil
	}
	return false, fmt.Errorf("ssh %s: %s=%s; accepted: yes or no", host, key, v)
}

// expandHome replaces a leading ~/ by the home directory.
func expandHome(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// expandTokens expands ~ and the ssh_config tokens of file names: %d
// (home), %u (local user), %h (host name), %r (remote user), %n (the name
// as given), %%.
func expandTokens(v string, loc Local, host, user, alias string) string {
	v = expandHome(v, loc.Home)
	if !strings.Contains(v, "%") {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '%' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		i++
		switch v[i] {
		case 'd':
			b.WriteString(loc.Home)
		case 'u':
			b.WriteString(loc.User)
		case 'h':
			b.WriteString(host)
		case 'r':
			b.WriteString(user)
		case 'n':
			b.WriteString(alias)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(v[i])
		}
	}
	return b.String()
}
