// Package cmdtmpl is the C spawner's command template (GASNET_CSPAWN_CMD,
// DESIGN.md §9) and the shell quoting it needs: pure functions, from the
// template and its values to one command line for /bin/sh.
package cmdtmpl

import (
	"fmt"
	"strconv"
	"strings"
)

// Vars are the values a GASNET_CSPAWN_CMD template is expanded with
// (DESIGN.md §9).
type Vars struct {
	N       int      // %N: the number of workers
	Command []string // %C: the per-worker command, program and arguments
	Dir     string   // %D: the console's working directory
	Program string   // %P: the program's path
	Servers []string // %M: the first N of these
}

// Codes lists the codes a template accepts, for messages.
const Codes = "%N (count), %C (worker command), %D (cwd), %P (program), %M (servers), %% (a percent sign)"

// Expand expands a custom spawn command template into a command
// line for /bin/sh. Every value that is not a number is quoted for the
// shell, so that a path or an argument with spaces, quotes, $ or
// backslashes reaches the workers unchanged whatever the launcher does with
// its own argv (srun, mpirun and mpiexec pass it on as argv). An unknown
// %x, a lone % at the end, a template without %C, and %M with fewer servers
// than N are errors naming what is wrong.
func Expand(tmpl string, v Vars) (string, error) {
	var b strings.Builder
	hasC := false
	for i := 0; i < len(tmpl); i++ {
		c := tmpl[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+1 == len(tmpl) {
			return "", fmt.Errorf("GASNET_CSPAWN_CMD=%q: a lone %% at the end; accepted: %s", tmpl, Codes)
		}
		i++
		switch tmpl[i] {
		case 'N':
			b.WriteString(strconv.Itoa(v.N))
		case 'C':
			hasC = true
			b.WriteString(Join(v.Command))
		case 'D':
			b.WriteString(Quote(v.Dir))
		case 'P':
			b.WriteString(Quote(v.Program))
		case 'M':
			if len(v.Servers) < v.N {
				return "", fmt.Errorf("GASNET_CSPAWN_SERVERS lists %d hosts, but %%M of GASNET_CSPAWN_CMD needs %d (one per worker)", len(v.Servers), v.N)
			}
			b.WriteString(Join(v.Servers[:v.N]))
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("GASNET_CSPAWN_CMD=%q: unknown %%%c; accepted: %s", tmpl, tmpl[i], Codes)
		}
	}
	if !hasC {
		return "", fmt.Errorf("GASNET_CSPAWN_CMD=%q has no %%C, the command each worker runs; for example 'srun -n %%N %%C' or 'mpirun -np %%N %%C'", tmpl)
	}
	return b.String(), nil
}

// Quote quotes s as one word for a POSIX shell: as it is when it is
// made only of characters no shell treats specially, else in single quotes
// (a single quote inside ends the quoted part, is written escaped with a
// backslash, and a new quoted part begins).
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-./:=@+,", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join quotes each word with Quote and joins them with spaces.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// SplitServers splits a server list at spaces, tabs, newlines, commas,
// slashes, semicolons and colons, as the reference does.
func SplitServers(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return strings.ContainsRune(" \t\r\n,/;:", r) })
}
