package ctl

import (
	"strconv"
	"strings"
)

// FormatMask writes the words of a CPU mask in its text form.
func FormatMask(words []uint64) string {
	end := len(words)
	for end > 0 && words[end-1] == 0 {
		end--
	}
	parts := make([]string, end)
	for i, w := range words[:end] {
		parts[i] = strconv.FormatUint(w, 16)
	}
	return strings.Join(parts, ".")
}

// ParseMask reads a CPU mask's text form; ok is false for a malformed one.
func ParseMask(s string) (words []uint64, ok bool) {
	if s == "" {
		return nil, true
	}
	parts := strings.Split(s, ".")
	if len(parts) > 64 { // 4096 CPUs
		return nil, false
	}
	for _, p := range parts {
		w, err := strconv.ParseUint(p, 16, 64)
		if err != nil {
			return nil, false
		}
		words = append(words, w)
	}
	return words, true
}
