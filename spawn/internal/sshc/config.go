package sshc

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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
	all      bool        // the lines before any Host
	patterns []pattern   // a Host line's patterns
	match    []criterion // a Match line's criteria, which must all hold
	lines    []line
}

// criterion is one criterion of a Match line: all, final, canonical, host
// or originalhost (with its patterns), negated by a leading !.
type criterion struct {
	kind     string
	not      bool
	patterns []pattern
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
		//lint:ignore ST1005 the message starts with the keyword as the file spells it
		return block{}, fmt.Errorf("Host %q has no pattern", value)
	}
	return block{patterns: ps}, nil
}

// matchBlock starts the block of "Match value": criteria all, final,
// canonical, host and originalhost (with a pattern list), each negated
// by a leading !, all of which must hold. Other criteria (exec, user,
// localuser, localnetwork, tagged, version, ...) are refused: the built-in
// client cannot tell whether they hold.
func matchBlock(value string) (block, error) {
	ws := words(value)
	refuse := func() (block, error) {
		//lint:ignore ST1005 the message starts with the keyword as the file spells it
		return block{}, fmt.Errorf("Match %s: the built-in ssh client takes Match with all, final, canonical, host and originalhost (GASNET_SSH_CMD=ssh takes every form)", value)
	}
	var b block
	for i := 0; i < len(ws); i++ {
		c := criterion{kind: strings.ToLower(ws[i])}
		if k, ok := strings.CutPrefix(c.kind, "!"); ok {
			c.kind, c.not = k, true
		}
		switch c.kind {
		case "all", "final", "canonical":
		case "host", "originalhost":
			if i+1 == len(ws) {
				return refuse()
			}
			i++
			if c.patterns = patterns(strings.ToLower(ws[i]), true); len(c.patterns) == 0 {
				return refuse()
			}
		default:
			return refuse()
		}
		b.match = append(b.match, c)
	}
	if len(b.match) == 0 {
		return refuse()
	}
	return b, nil
}

// target is what blocks match against, as a walk through the files goes:
// the name as listed (alias), the host name that a HostName line met so
// far gives (host, alias until then), and whether this is OpenSSH's final
// pass (Match final).
type target struct {
	alias, host string
	hostSet     bool
	final       bool
}

// matches reports whether the block applies to t: the lines before any
// Host; a Host line one of whose patterns matches the name as listed (with
// its case), with no negated one matching; or a Match line
// all of whose criteria hold (host and originalhost compare without case,
// host the name a HostName line gave; canonical never holds: the client
// does not canonicalize names).
func (b *block) matches(t *target) bool {
	if b.all {
		return true
	}
	if b.match == nil {
		return matchList(b.patterns, t.alias)
	}
	for _, c := range b.match {
		var ok bool
		switch c.kind {
		case "all":
			ok = true
		case "final":
			ok = t.final
		case "host":
			ok = matchList(c.patterns, strings.ToLower(t.host))
		case "originalhost":
			ok = matchList(c.patterns, strings.ToLower(t.alias))
		}
		if ok == c.not {
			return false
		}
	}
	return true
}

// matchList reports whether one of ps matches s and no negated one does
// (ssh_config(5)).
func matchList(ps []pattern, s string) bool {
	found := false
	for _, p := range ps {
		if glob(p.glob, s) {
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
// "" when none does. As OpenSSH, it reads the files again as the final
// pass (Match final) for a key the first pass left unset.
func (c *Config) Get(alias, key string) string {
	var out string
	found := func(v string) bool { out = v; return false }
	key = strings.ToLower(key)
	t := &target{alias: alias, host: alias}
	c.walk(t, key, found)
	if out == "" {
		c.walk(&target{alias: alias, host: t.host, final: true}, key, found)
	}
	return out
}

// GetAll returns every value of key that applies to alias, in file order,
// then those that only the final pass adds.
func (c *Config) GetAll(alias, key string) []string {
	var out []string
	key = strings.ToLower(key)
	t := &target{alias: alias, host: alias}
	c.walk(t, key, func(v string) bool { out = append(out, v); return true })
	first := len(out)
	c.walk(&target{alias: alias, host: t.host, final: true}, key, func(v string) bool {
		if !slices.Contains(out[:first], v) {
			out = append(out, v)
		}
		return true
	})
	return out
}

// walk calls f with each value of key for t, in file order, until f
// returns false, and reports whether it should go on. The first HostName
// met sets the host name that later Match host criteria see (%h is the
// name as listed).
func (c *Config) walk(t *target, key string, f func(string) bool) bool {
	for i := range c.blocks {
		b := &c.blocks[i]
		if !b.matches(t) {
			continue
		}
		for _, l := range b.lines {
			switch {
			case l.key == "include":
				for _, inc := range l.included {
					if !inc.walk(t, key, f) {
						return false
					}
				}
				continue
			case l.key == "hostname" && !t.hostSet:
				t.host, t.hostSet = strings.ReplaceAll(l.value, "%h", t.alias), true
			}
			if l.key == key && !f(l.value) {
				return false
			}
		}
	}
	return true
}
