package envconf

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
)

// A setting's accepted values come from its Config tags: `range:"lo..hi"`
// (inclusive, in the field's own unit), `special:"v=meaning,..."` (values
// outside the range that mean something) and `unit:"bytes"` (an integer
// that is a size, which takes ParseInt's K, M and G suffixes). The same
// text serves the error of a value that does not parse and of one out of
// range, so every message names the variable, the value and what is
// accepted.

// durationType is the type of Config's durations, which envconfig reads
// with time.ParseDuration.
var durationType = reflect.TypeOf(time.Duration(0))

// bound is one end of a range or a special value, as a number: nanoseconds
// for durations.
func bound(typ reflect.Type, bytes bool, s string) (int64, error) {
	if typ == durationType {
		d, err := time.ParseDuration(s)
		return int64(d), err
	}
	return ParseInt(s, bytes)
}

// fieldRange is a setting's accepted values.
type fieldRange struct {
	lo, hi  int64
	special []struct {
		v       int64
		text    string // as written in the tag
		meaning string
	}
	dur   bool
	bytes bool // the field is a size (`unit:"bytes"`)
	set   bool // the field has a range tag
}

// fieldRanges holds the range of each of Config's fields, by index (parsed
// once: every process checks its configuration at start).
var fieldRanges = sync.OnceValue(func() []fieldRange {
	t := reflect.TypeOf(Config{})
	out := make([]fieldRange, t.NumField())
	for i := range out {
		out[i] = rangeOf(t.Field(i))
	}
	return out
})

// rangeOf reads the tags of f. A malformed tag is a programming error.
func rangeOf(f reflect.StructField) fieldRange {
	var r fieldRange
	switch unit := f.Tag.Get("unit"); {
	case unit == "bytes" && f.Type != durationType && (f.Type.Kind() == reflect.Int || f.Type.Kind() == reflect.Int64):
		r.bytes = true
	case unit != "":
		panic(fmt.Sprintf("spawn: field %s: bad unit tag %q", f.Name, unit))
	}
	tag := f.Tag.Get("range")
	if tag == "" {
		return r
	}
	r.set, r.dur = true, f.Type == durationType
	lo, hi, ok := strings.Cut(tag, "..")
	var err1, err2 error
	r.lo, err1 = bound(f.Type, r.bytes, lo)
	r.hi, err2 = bound(f.Type, r.bytes, hi)
	if !ok || err1 != nil || err2 != nil {
		panic(fmt.Sprintf("spawn: field %s: bad range tag %q", f.Name, tag))
	}
	if sp := f.Tag.Get("special"); sp != "" {
		for _, part := range strings.Split(sp, ",") {
			v, meaning, _ := strings.Cut(part, "=")
			n, err := bound(f.Type, r.bytes, v)
			if err != nil {
				panic(fmt.Sprintf("spawn: field %s: bad special tag %q", f.Name, sp))
			}
			r.special = append(r.special, struct {
				v       int64
				text    string
				meaning string
			}{n, v, meaning})
		}
	}
	return r
}

// contains reports whether v is accepted.
func (r fieldRange) contains(v int64) bool {
	if !r.set || (v >= r.lo && v <= r.hi) {
		return true
	}
	for _, s := range r.special {
		if s.v == v {
			return true
		}
	}
	return false
}

// text says what is accepted: `a duration from 100ms to 1h, such as
// "250ms"; or 0 (never)`.
func (r fieldRange) text() string {
	var b strings.Builder
	switch {
	case r.dur:
		fmt.Fprintf(&b, "a duration from %s to %s, such as \"250ms\" or \"5s\"", shortDur(r.lo), shortDur(r.hi))
	case r.bytes:
		fmt.Fprintf(&b, "a decimal number of bytes from %d to %d, with an optional K, M or G suffix (times 1024, 1024² or 1024³)", r.lo, r.hi)
	default:
		fmt.Fprintf(&b, "a decimal integer from %d to %d", r.lo, r.hi)
	}
	for _, s := range r.special {
		fmt.Fprintf(&b, "; or %s (%s)", s.text, s.meaning)
	}
	return b.String()
}

// acceptedField says what the field of Config named field accepts.
func acceptedField(field string) string {
	f, ok := reflect.TypeOf(Config{}).FieldByName(field)
	if !ok {
		return "malformed value"
	}
	if a := accepted(f); a != "" {
		return a
	}
	return "malformed value"
}

// accepted says what f accepts, for errors and the README's table; "" for
// a free-form string.
func accepted(f reflect.StructField) string {
	if r := rangeOf(f); r.set {
		return r.text()
	}
	if f.Type == durationType {
		return "a duration, such as \"250ms\" or \"5s\""
	}
	switch f.Type.Kind() {
	case reflect.Bool:
		return "1, 0, true or false"
	case reflect.Int, reflect.Int64, reflect.Uint32:
		return "a decimal integer"
	}
	return ""
}

// checkRanges returns an error naming the first field of c outside its
// range.
func (c *Config) checkRanges(src map[string]Source) error {
	t, v := reflect.TypeOf(*c), reflect.ValueOf(*c)
	ranges := fieldRanges()
	for i := 0; i < t.NumField(); i++ {
		f, r := t.Field(i), ranges[i]
		if !r.set {
			continue
		}
		var n int64
		switch fv := v.Field(i); fv.Kind() {
		case reflect.Int, reflect.Int64:
			n = fv.Int()
		case reflect.Uint32:
			n = int64(fv.Uint())
		}
		if !r.contains(n) {
			name := f.Tag.Get("envconfig")
			val := fmt.Sprint(v.Field(i).Interface())
			if s, ok := src[name]; ok {
				val = s.Value
			}
			return fmt.Errorf("%s=%s: accepted: %s", DisplayName(src, name), val, r.text())
		}
	}
	return nil
}

// shortDur writes whole hours and minutes without their zero tails: "1h",
// not "1h0m0s".
func shortDur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d != 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d != 0 && d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
