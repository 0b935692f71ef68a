// Package sshc is the ssh side of the S spawner (DESIGN.md §9): the server
// list, OpenSSH-style options and ~/.ssh/config resolved into one Target per
// host (pure functions, table-tested), and a client on golang.org/x/crypto/ssh
// that dials a Target with agent and key-file authentication, checks host
// keys against known_hosts, never prompts, and runs or stages the program.
package sshc

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
)

// Server is one entry of the server list: a host name or address, with
// the user and port when the entry names them ("user@host:port").
type Server struct {
	User string // "" when the entry names none
	Host string
	Port int // 0 when the entry names none
}

// String gives the entry back in the form it was written.
func (s Server) String() string {
	h := s.Host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if s.User != "" {
		h = s.User + "@" + h
	}
	if s.Port != 0 {
		h += ":" + strconv.Itoa(s.Port)
	}
	return h
}

// ParseServers reads a server list as GASNET_SSH_SERVERS holds it: entries
// separated by spaces, commas, slashes, semicolons or colons (the
// reference's separators), each "host", "user@host", "host:port" or
// "user@host:port", with an IPv6 address in brackets ("[::1]:2222"). A
// colon followed by digits only is a port, since no host name is all
// digits: "h1:h2" is two hosts, "h1:2222" one host on port 2222. name is
// the variable's name, for errors.
func ParseServers(name, list string) ([]Server, error) {
	var out []Server
	for _, tok := range strings.FieldsFunc(list, func(r rune) bool { return strings.ContainsRune(" \t\n,/;", r) }) {
		// tok may still hold colon-separated entries, and ports.
		for tok != "" {
			var entry string
			entry, tok = nextPiece(tok)
			s, err := parseEntry(name, entry)
			if err != nil {
				return nil, err
			}
			// A port follows the entry when the next piece is all digits.
			if p, rest := nextPiece(tok); allDigits(p) {
				n, err := strconv.Atoi(p)
				if err != nil || n < 1 || n > 65535 {
					return nil, fmt.Errorf("%s: %q: port %s; accepted: 1..65535", name, entry+":"+p, p)
				}
				s.Port, tok = n, rest
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// nextPiece splits s at its first colon outside brackets.
func nextPiece(s string) (piece, rest string) {
	depth := 0
	for i := range len(s) {
		switch s[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ':':
			if depth == 0 {
				return s[:i], s[i+1:]
			}
		}
	}
	return s, ""
}

// parseEntry reads "host", "user@host" or "user@[v6]".
func parseEntry(name, entry string) (Server, error) {
	var s Server
	if u, h, ok := strings.Cut(entry, "@"); ok {
		if u == "" || h == "" || strings.ContainsAny(u, "[]:") {
			return s, fmt.Errorf("%s: %q: accepted: host, user@host, host:port or user@host:port", name, entry)
		}
		s.User, entry = u, h
	}
	if strings.HasPrefix(entry, "[") {
		v6 := strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]")
		if ip := net.ParseIP(v6); ip == nil || !strings.HasSuffix(entry, "]") {
			return s, fmt.Errorf("%s: %q: not an address in brackets; accepted: [IPv6] or [IPv6]:port", name, entry)
		}
		entry = v6
	} else if allDigits(entry) || entry == "" || strings.ContainsAny(entry, "[]@:") {
		return s, fmt.Errorf("%s: %q is not a host name; accepted: host, user@host, host:port or user@host:port", name, entry)
	}
	s.Host = entry
	return s, nil
}

func allDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// ParseNodeFile reads a node file as batch systems write one
// ($PBS_NODEFILE, `scontrol show hostnames`): one entry per line, in rank
// order, a name repeated once per rank it hosts; blank lines and # comments
// are skipped. Each line is parsed as a ParseServers entry. name is the
// file's name, for errors.
func ParseNodeFile(name string, r io.Reader) ([]Server, error) {
	var out []Server
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		if strings.ContainsAny(text, " \t,/;") {
			return nil, fmt.Errorf("%s:%d: %q: accepted: one host per line", name, line, text)
		}
		s, err := ParseServers(fmt.Sprintf("%s:%d", name, line), text)
		if err != nil {
			return nil, err
		}
		if len(s) != 1 {
			return nil, fmt.Errorf("%s:%d: %q: accepted: one host per line", name, line, text)
		}
		out = append(out, s[0])
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return out, nil
}

// ForRanks returns the servers of ranks 0..n-1: the first n entries (a
// name listed twice hosts two ranks; extra entries are ignored). from says
// where the list came from, for the error when it is too short.
func ForRanks(list []Server, n int, from string) ([]Server, error) {
	if len(list) < n {
		return nil, fmt.Errorf("%s lists %d host(s); N=%d needs %d, one per rank (repeat a name to run several ranks on one host)", from, len(list), n, n)
	}
	return list[:n], nil
}
