package envconf

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
)

// errNotDecimal and errTooLarge are ParseInt's errors; a setting's error
// says instead what the setting accepts.
var (
	errNotDecimal = errors.New("not a decimal integer")
	errTooLarge   = errors.New("beyond the 64-bit integers")
)

// sizeShift is the power of two that each size suffix multiplies by.
var sizeShift = map[byte]uint{'K': 10, 'k': 10, 'M': 20, 'm': 20, 'G': 30, 'g': 30}

// ParseInt reads an integer of a setting the way GASNet's users write it:
// decimal digits, with a leading - for a negative number. Leading zeros
// are decimal too (010 is ten, as GASNet reads it), and there is no other
// sign, base prefix (0x, 0o, 0b), digit separator (_) or space. When
// bytes is set, a K, M or G suffix, in either case and optionally followed
// by B, multiplies by 1024, 1024² or 1024³ (64K, 4m, 1GB); a B alone is
// not a suffix. A value beyond int64 is an error. It is the one parser of
// the settings' integers: the environment's, the bounds of their range
// tags, and GASNET_WORKER_RANK's.
func ParseInt(s string, bytes bool) (int64, error) {
	digits, neg := strings.CutPrefix(s, "-")
	var mult uint64 = 1
	if bytes {
		unit := strings.TrimSuffix(strings.TrimSuffix(digits, "B"), "b")
		if n := len(unit); n > 0 && sizeShift[unit[n-1]] != 0 {
			mult, digits = 1<<sizeShift[unit[n-1]], unit[:n-1]
		}
	}
	if digits == "" {
		return 0, errNotDecimal
	}
	var u uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			return 0, errNotDecimal
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, errTooLarge
		}
		u = u*10 + uint64(c-'0')
	}
	if u > math.MaxUint64/mult {
		return 0, errTooLarge
	}
	u *= mult
	switch {
	case neg && u <= 1<<63:
		return int64(-u), nil // in two's complement: -2⁶³ too
	case !neg && u <= math.MaxInt64:
		return int64(u), nil
	}
	return 0, errTooLarge
}

// envconfigValue returns what envconfig is to read for s, the value of
// Config's field i: for an integer setting, s as ParseInt reads it (with
// the field's suffixes), in plain decimal, which envconfig's own parser
// (base 0, to which 010 is octal) reads the same; s itself for any other
// setting. It reports false for an integer ParseInt refuses or that the
// field cannot hold.
func envconfigValue(i int, s string) (string, bool) {
	t := reflect.TypeOf(Config{}).Field(i).Type
	if t == durationType {
		return s, true
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64, reflect.Uint32:
		n, err := ParseInt(s, fieldRanges()[i].bytes)
		if err != nil {
			return "", false
		}
		f := reflect.New(t).Elem()
		if t.Kind() == reflect.Uint32 && (n < 0 || f.OverflowUint(uint64(n))) || t.Kind() != reflect.Uint32 && f.OverflowInt(n) {
			return "", false
		}
		return strconv.FormatInt(n, 10), true
	}
	return s, true
}
