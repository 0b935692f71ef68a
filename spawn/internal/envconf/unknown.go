package envconf

import (
	"fmt"
	"slices"
	"strings"
)

// UnknownVars returns a one-line warning for each GASNET_* or AMUDP_*
// variable of environ that no part of udpconduit reads (a misspelt
// setting has no effect, silently otherwise), naming the known one
// nearest to it. markers are the other names udpconduit reads (the worker
// markers the console sets).
func UnknownVars(environ, markers []string) []string {
	known := map[string]bool{}
	var names []string // the settings' names without their prefix
	for _, v := range variables() {
		known[v.name] = true
		names = append(names, strings.TrimPrefix(v.name, "GASNET_"))
	}
	for _, m := range markers {
		known[m] = true
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		prefix := ""
		for _, p := range []string{"GASNET_", "AMUDP_"} {
			if strings.HasPrefix(name, p) {
				prefix = p
			}
		}
		if prefix == "" || known["GASNET_"+strings.TrimPrefix(name, prefix)] {
			continue
		}
		rest := strings.TrimPrefix(name, prefix)
		best, dist := "", len(rest)
		for _, n := range names {
			if d := editDistance(rest, n); d < dist {
				best, dist = n, d
			}
		}
		msg := fmt.Sprintf("warning: %s is not a setting of udpconduit and has no effect", name)
		if best != "" && dist <= max(2, len(rest)/3) {
			msg += fmt.Sprintf("; did you mean %s%s?", prefix, best)
		} else {
			msg += " (GASNET_VERBOSEENV=1 lists every setting)"
		}
		out = append(out, msg)
	}
	slices.Sort(out)
	return out
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
