package sshc

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Options are the ssh client options of GASNET_SSH_OPTIONS, in OpenSSH's
// command-line syntax. The built-in client honours the subset below; the
// external one (GASNET_SSH_CMD) receives Words as they are.
type Options struct {
	ConfigFile string   // -F file: the only ssh_config read ("none": none)
	Port       int      // -p port (0: unset)
	User       string   // -l user
	Identities []string // -i file, in order
	Quiet      bool     // -q
	ProxyJump  string   // -J
	// Set holds -o Key=Value settings by lower-case key; as in OpenSSH, the
	// first value given for a key wins.
	Set map[string]string
	// Words is the option string split into words, for an external client.
	Words []string
}

// builtinKeys are the -o keys (lower case) the built-in client honours.
var builtinKeys = map[string]string{
	"hostname": "HostName", "port": "Port", "user": "User",
	"identityfile": "IdentityFile", "identitiesonly": "IdentitiesOnly",
	"userknownhostsfile": "UserKnownHostsFile", "globalknownhostsfile": "GlobalKnownHostsFile",
	"stricthostkeychecking": "StrictHostKeyChecking", "hostkeyalias": "HostKeyAlias",
	"connecttimeout": "ConnectTimeout", "proxyjump": "ProxyJump",
	"batchmode": "BatchMode", "loglevel": "LogLevel",
	"passwordauthentication":       "PasswordAuthentication",
	"kbdinteractiveauthentication": "KbdInteractiveAuthentication",
	"serveraliveinterval":          "ServerAliveInterval",
}

// BuiltinKeys lists the -o keys the built-in client honours, for messages
// and documentation.
func BuiltinKeys() []string {
	var ks []string
	for _, k := range builtinKeys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// OpenSSH's flags, by what the built-in client does with them.
const (
	// argFlags take an argument (-p 22, -p22).
	argFlags = "BbcDEeFIiJLlmOopQRSWw"
	// harmlessFlags are meaningless for the built-in client's sessions
	// (never a terminal, X11 or agent forwarding, stdin always the
	// console's pipe; -q only quiets), so accepting them changes nothing.
	harmlessFlags = "TxanqC"
	// otherFlags take no argument and need OpenSSH's own client.
	otherFlags = "46AfGgKkMNsVvXYy"
)

// ParseOptions reads an OpenSSH option string: -p port, -l user, -i file,
// -F file, -J jump, -o Key=Value (also -oKey=Value and -o "Key Value"),
// flags grouped as in getopt (-qT); words are split as the shell would
// (quotes, backslashes). name is the variable's name, for errors. An
// option the built-in client cannot honour is an error that says so and
// suggests the external client (GASNET_SSH_CMD=ssh), unless external is
// set, in which case every option is passed on untouched and only the
// syntax is checked.
func ParseOptions(name, s string, external bool) (Options, error) {
	words, err := SplitWords(s)
	if err != nil {
		return Options{}, fmt.Errorf("%s=%s: %w", name, s, err)
	}
	o := Options{Set: map[string]string{}, Words: words}
	unsupported := func(what string) error {
		return fmt.Errorf("%s: %s: the built-in ssh client does not support it; set GASNET_SSH_CMD=ssh to use OpenSSH's client with these options, or use -p -l -i -F -J -q, or -o with %s",
			name, what, strings.Join(BuiltinKeys(), ", "))
	}
	for i := 0; i < len(words); i++ {
		w := words[i]
		if len(w) < 2 || w[0] != '-' {
			return o, fmt.Errorf("%s: %q is not an option; accepted: OpenSSH options such as -p 2222 -i ~/.ssh/id_ed25519 -o StrictHostKeyChecking=accept-new", name, w)
		}
		for j := 1; j < len(w); j++ {
			f := w[j]
			switch {
			case f == 'q':
				o.Quiet = true
				continue
			case strings.IndexByte(harmlessFlags, f) >= 0:
				continue
			case strings.IndexByte(otherFlags, f) >= 0:
				if !external {
					return o, unsupported("-" + string(f))
				}
				continue
			case strings.IndexByte(argFlags, f) < 0:
				return o, fmt.Errorf("%s: -%c is not an ssh option", name, f)
			}
			// f takes an argument: the rest of this word, or the next.
			arg := w[j+1:]
			if arg == "" {
				if i+1 >= len(words) {
					return o, fmt.Errorf("%s: -%c needs an argument", name, f)
				}
				i++
				arg = words[i]
			}
			if err := o.set(name, f, arg, external, unsupported); err != nil {
				return o, err
			}
			break
		}
	}
	return o, nil
}

// set records flag f with its argument.
func (o *Options) set(name string, f byte, arg string, external bool, unsupported func(string) error) error {
	switch f {
	case 'p':
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%s: -p %s: accepted: a port 1..65535", name, arg)
		}
		if o.Port == 0 {
			o.Port = n
		}
	case 'l':
		if o.User == "" {
			o.User = arg
		}
	case 'i':
		o.Identities = append(o.Identities, arg)
	case 'F':
		o.ConfigFile = arg
	case 'J':
		if o.ProxyJump == "" {
			o.ProxyJump = arg
		}
	case 'o':
		k, v, ok := strings.Cut(arg, "=")
		if !ok {
			k, v, ok = strings.Cut(strings.TrimSpace(arg), " ")
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return fmt.Errorf("%s: -o %s: accepted: -o Key=Value", name, arg)
		}
		lk := strings.ToLower(k)
		if _, known := builtinKeys[lk]; !known && !external {
			return unsupported("-o " + k)
		}
		if _, dup := o.Set[lk]; !dup {
			o.Set[lk] = v
		}
		if lk == "identityfile" {
			o.Identities = append(o.Identities, v)
		}
	default:
		if !external {
			return unsupported("-" + string(f))
		}
	}
	return nil
}

// SplitWords splits s into words as a POSIX shell would, without
// expansions: blanks separate words; single quotes keep everything;
// double quotes keep everything but \" \\ \$ \`; a backslash outside
// quotes keeps the next character.
func SplitWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in := false // a word is under way (even an empty one, from '')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("an unclosed single quote")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			in = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, fmt.Errorf("an unclosed double quote")
			}
			in = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("a backslash at the end")
			}
			i++
			cur.WriteByte(s[i])
			in = true
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
