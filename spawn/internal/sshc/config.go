package sshc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// This file reads ssh_config files (ssh_config(5)) as far as the built-in
// client uses them: keywords and their values in Host blocks, Match blocks
// on all, host and originalhost, and Include. It is ours rather than a
// library's because every worker process links the S spawner, and a
// library that compiles its patterns when the process starts cost each
// worker about as much time as the package initialisation of
// x/crypto/ssh (DESIGN.md §9).

// Config is one parsed ssh_config file: its blocks in file order. Lines
// before the first Host or Match line form a block that matches every
// host.
type Config struct {
	blocks []block
}

// block is a Host or Match block: when it applies, and its lines.
type block struct {
	all      bool      // Match all, or the lines before any Host
	patterns []pattern // Host patterns, or Match host's
	lines    []line
}

// line is one keyword line of a block: keyword lowercased, its value as
// written (unquoted when it is one quoted word), or the files an Include
// named, parsed.
type line struct {
	key, value string
	included   []*Config
}

// pattern is one Host pattern: a glob of * and ?, negated by a leading !.
type pattern struct {
	glob string
	not  bool
}

// maxIncludeDepth bounds nested Include directives (OpenSSH's limit), so
// that a file that includes itself is an error, not a loop.
const maxIncludeDepth = 16

// ParseConfig parses ssh_config text; an Include in it names files
// relative to home's .ssh directory.
func ParseConfig(text string) (*Config, error) {
	return parseConfig(text, includeDir{home: home()}, 0)
}

// home returns the local user's home directory, "" if unknown.
func home() string {
	h, _ := os.UserHomeDir()
	return h
}

// includeDir says where relative Include paths are: ~/.ssh for the user's
// files, /etc/ssh for the system's.
type includeDir struct {
	home   string
	system bool
}

func (d includeDir) resolve(p string) string {
	switch {
	case filepath.IsAbs(p):
		return p
	case p == "~" || strings.HasPrefix(p, "~/"):
		return expandHome(p, d.home)
	case d.system:
		return filepath.Join("/etc/ssh", p)
	}
	return filepath.Join(d.home, ".ssh", p)
}

// parseConfigFile reads and parses the file at path.
func parseConfigFile(path string, dir includeDir, depth int) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := parseConfig(string(b), dir, depth)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// parseConfig parses text, depth Includes deep.
func parseConfig(text string, dir includeDir, depth int) (*Config, error) {
	c := &Config{blocks: []block{{all: true}}}
	for n, raw := range strings.Split(text, "\n") {
		key, value, err := splitLine(raw)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		cur := &c.blocks[len(c.blocks)-1]
		switch key {
		case "":
			continue
		case "host":
			b, err := hostBlock(value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			c.blocks = append(c.blocks, b)
		case "match":
			b, err := matchBlock(value)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			c.blocks = append(c.blocks, b)
		case "include":
			if depth >= maxIncludeDepth {
				return nil, fmt.Errorf("line %d: Include nested more than %d deep", n+1, maxIncludeDepth)
			}
			l := line{key: key, value: value}
			for _, word := range words(value) {
				paths, err := filepath.Glob(dir.resolve(word))
				if err != nil {
					return nil, fmt.Errorf("line %d: Include %s: %v", n+1, word, err)
				}
				for _, p := range paths {
					inc, err := parseConfigFile(p, dir, depth+1)
					if err != nil {
						return nil, fmt.Errorf("line %d: Include: %w", n+1, err)
					}
					l.included = append(l.included, inc)
				}
			}
			cur.lines = append(cur.lines, l)
		default:
			cur.lines = append(cur.lines, line{key: key, value: value})
		}
	}
	return c, nil
}

// splitLine splits a line into its keyword, lowercased, and its value:
// "Keyword value", "Keyword=value" or "Keyword = value", with a comment
// (from a # that starts a word) and surrounding blanks removed. A blank
// or comment line gives "".
func splitLine(raw string) (key, value string, err error) {
	s := strings.TrimRight(raw, "\r")
	s = strings.TrimSpace(stripComment(s))
	if s == "" {
		return "", "", nil
	}
	i := strings.IndexAny(s, " \t=")
	if i < 0 {
		return "", "", fmt.Errorf("%s has no value", s)
	}
	key, rest := strings.ToLower(s[:i]), strings.TrimLeft(s[i:], " \t")
	if r, ok := strings.CutPrefix(rest, "="); ok {
		rest = strings.TrimLeft(r, " \t")
	}
	if rest == "" {
		return "", "", fmt.Errorf("%s has no value", s[:i])
	}
	if strings.Count(rest, `"`)%2 != 0 {
		return "", "", fmt.Errorf("%s: unbalanced quotes", s[:i])
	}
	if len(rest) >= 2 && rest[0] == '"' && strings.IndexByte(rest[1:], '"') == len(rest)-2 {
		rest = rest[1 : len(rest)-1] // one quoted word
	}
	if strings.TrimSpace(rest) == "" {
		return "", "", fmt.Errorf("%s has no value", s[:i])
	}
	return key, rest, nil
}

// stripComment removes a comment: from a # at the start of the line or
// after a blank, outside quotes.
func stripComment(s string) string {
	quoted := false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '"':
			quoted = !quoted
		case s[i] == '#' && !quoted && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return s[:i]
		}
	}
	return s
}

// words splits a value into its blank-separated words, a quoted word
// keeping its blanks.
func words(v string) []string {
	var out []string
	for v = strings.TrimLeft(v, " \t"); v != ""; v = strings.TrimLeft(v, " \t") {
		if v[0] == '"' {
			end := strings.IndexByte(v[1:], '"')
			if end < 0 {
				end = len(v) - 1
			}
			out = append(out, v[1:1+end])
			v = v[min(len(v), end+2):]
			continue
		}
		end := strings.IndexAny(v, " \t")
		if end < 0 {
			end = len(v)
		}
		out = append(out, v[:end])
		v = v[end:]
	}
	return out
}

// patterns parses Host patterns: blank-separated words, and within a word
// comma-separated ones when lists is set (Match host's pattern-list).
func patterns(value string, lists bool) []pattern {
	if lists {
		value = strings.ReplaceAll(value, ",", " ")
	}
	var out []pattern
	for _, w := range words(value) {
		p := pattern{glob: w}
		if g, ok := strings.CutPrefix(w, "!"); ok {
			p = pattern{glob: g, not: true}
		}
		if p.glob != "" {
			out = append(out, p)
		}
	}
	return out
}

// hostBlock starts the block of "Host value".
func hostBlock(value string) (block, error) {
	ps := patterns(value, false)
	if len(ps) == 0 {
		return block{}, fmt.Errorf("Host %q has no pattern", value)
	}
	return block{patterns: ps}, nil
}

// matchBlock starts the block of "Match value": all, or host or
// originalhost (both matched against the name as listed) with patterns.
// Other criteria (exec, user, localuser, canonical, final, ...) are refused:
// the built-in client cannot tell whether they hold.
func matchBlock(value string) (block, error) {
	ws := words(value)
	switch {
	case len(ws) == 1 && strings.EqualFold(ws[0], "all"):
		return block{all: true}, nil
	case len(ws) == 2 && (strings.EqualFold(ws[0], "host") || strings.EqualFold(ws[0], "originalhost")):
		if ps := patterns(ws[1], true); len(ps) > 0 {
			return block{patterns: ps}, nil
		}
	}
	return block{}, fmt.Errorf("Match %s: the built-in ssh client takes Match all, Match host PATTERNS and Match originalhost PATTERNS (GASNET_SSH_CMD=ssh takes every form)", value)
}

// matches reports whether the block applies to alias: Match all, the lines
// before any Host, or a pattern that matches alias with no negated one
// that does (ssh_config(5)).
func (b *block) matches(alias string) bool {
	if b.all {
		return true
	}
	found := false
	for _, p := range b.patterns {
		if glob(p.glob, alias) {
			if p.not {
				return false
			}
			found = true
		}
	}
	return found
}

// glob reports whether s matches pattern, whose * matches any run of
// characters and ? any one.
func glob(pattern, s string) bool {
	// The classic backtracking matcher: remember the last * and retry it
	// one character further on a mismatch.
	p, i, star, mark := 0, 0, -1, 0
	for i < len(s) {
		switch {
		case p < len(pattern) && (pattern[p] == '?' || pattern[p] == s[i]):
			p++
			i++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, i
			p++
		case star >= 0:
			p, mark = star+1, mark+1
			i = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// Get returns the first value of key (any case) that applies to alias, in
// file order, looking into included files where their Include applies;
// "" when none does.
func (c *Config) Get(alias, key string) string {
	var out string
	c.walk(alias, strings.ToLower(key), func(v string) bool { out = v; return false })
	return out
}

// GetAll returns every value of key that applies to alias, in file order.
func (c *Config) GetAll(alias, key string) []string {
	var out []string
	c.walk(alias, strings.ToLower(key), func(v string) bool { out = append(out, v); return true })
	return out
}

// walk calls f with each value of key for alias until f returns false, and
// reports whether it should go on.
func (c *Config) walk(alias, key string, f func(string) bool) bool {
	for i := range c.blocks {
		b := &c.blocks[i]
		if !b.matches(alias) {
			continue
		}
		for _, l := range b.lines {
			switch {
			case l.key == "include":
				for _, inc := range l.included {
					if !inc.walk(alias, key, f) {
						return false
					}
				}
			case l.key == key:
				if !f(l.value) {
					return false
				}
			}
		}
	}
	return true
}
