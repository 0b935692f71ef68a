package envconf

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// A configuration in binary form is what the console hands the workers it
// starts on its own host (the L spawner, a ctl.FrameSettings): their
// environment is the console's, so their configuration is the console's,
// already read and checked, and a worker that decodes it skips
// envconfig's reflection over the environment, which every process of a
// job otherwise pays at start (BenchmarkLoad against BenchmarkDecode).
//
// The form, in package varenc's encoding: the number of Config's fields;
// for each, in order, its kind (a byte) and its value (a string, a
// zig-zag varint for signed integers and durations, a uvarint for
// unsigned ones, a byte for booleans); then the count of sources and each
// as its setting's name, the variable and the value, sorted by name.

// kind is how a Config field is encoded.
func kind(t reflect.Type) byte {
	switch t.Kind() {
	case reflect.String:
		return 's'
	case reflect.Int, reflect.Int64:
		return 'i'
	case reflect.Uint32:
		return 'u'
	case reflect.Bool:
		return 'b'
	}
	panic(fmt.Sprintf("envconf: Config field of kind %v has no binary form", t.Kind()))
}

// AppendBinary appends c and src in binary form.
func AppendBinary(b []byte, c *Config, src map[string]Source) []byte {
	v := reflect.ValueOf(c).Elem()
	b = varenc.AppendUint(b, uint64(v.NumField()))
	for i := range v.NumField() {
		f := v.Field(i)
		k := kind(f.Type())
		b = append(b, k)
		switch k {
		case 's':
			b = varenc.AppendString(b, f.String())
		case 'i':
			b = varenc.AppendInt64(b, f.Int())
		case 'u':
			b = varenc.AppendUint(b, f.Uint())
		case 'b':
			b = varenc.AppendBool(b, f.Bool())
		}
	}
	b = varenc.AppendUint(b, uint64(len(src)))
	for _, name := range slices.Sorted(maps.Keys(src)) {
		b = varenc.AppendString(varenc.AppendString(varenc.AppendString(b, name), src[name].Var), src[name].Value)
	}
	return b
}

// errBinary is the error of a binary form that does not decode.
var errBinary = errors.New("envconf: malformed configuration from the console")

// DecodeBinary reads a configuration that AppendBinary wrote. A form that
// does not match Config (another build of the program) or does not decode
// is an error.
func DecodeBinary(b []byte) (*Config, map[string]Source, error) {
	var c Config
	v := reflect.ValueOf(&c).Elem()
	d := varenc.Decoder{B: b}
	if d.Uint() != uint64(v.NumField()) {
		return nil, nil, errBinary
	}
	for i := range v.NumField() {
		f := v.Field(i)
		k := kind(f.Type())
		if len(d.B) == 0 || d.B[0] != k {
			return nil, nil, errBinary
		}
		d.B = d.B[1:]
		switch k {
		case 's':
			f.SetString(d.String())
		case 'i':
			n := d.Int64()
			if f.OverflowInt(n) {
				return nil, nil, errBinary
			}
			f.SetInt(n)
		case 'u':
			n := d.Uint()
			if f.OverflowUint(n) {
				return nil, nil, errBinary
			}
			f.SetUint(n)
		case 'b':
			f.SetBool(d.Bool())
		}
	}
	n := d.Count()
	src := make(map[string]Source, n)
	for range n {
		name := d.String()
		src[name] = Source{Var: d.String(), Value: d.String()}
	}
	if d.Bad || len(d.B) != 0 {
		return nil, nil, errBinary
	}
	return &c, src, nil
}
