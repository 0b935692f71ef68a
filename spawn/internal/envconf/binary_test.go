package envconf

import (
	"math"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBinaryRoundTrip: a configuration with a value in every field, and
// where each came from, decodes to itself; every truncation, a byte more,
// and a field of another kind are refused.
func TestBinaryRoundTrip(t *testing.T) {
	c, src, err := LoadEnv([]string{"AMUDP_NETWORKDEPTH=7", "SSH_SERVERS=h1 h2", "GASNET_POLL_SPIN=-1ns", "GASNET_REQUESTTIMEOUT_MAX=3600000000"})
	if err != nil {
		t.Fatal(err)
	}
	// Every field set, whatever its kind: no zero value hides a field the
	// form skips.
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		switch f := v.Field(i); f.Kind() {
		case reflect.String:
			f.SetString(f.String() + "x" + string(rune('a'+i)))
		case reflect.Int, reflect.Int64:
			f.SetInt(f.Int()*3 + int64(i) + 1)
		case reflect.Uint32:
			f.SetUint(f.Uint() + uint64(i) + 1)
		case reflect.Bool:
			f.SetBool(!f.Bool())
		}
	}
	b := AppendBinary(nil, c, src)
	got, gotSrc, err := DecodeBinary(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(c, got); d != "" {
		t.Errorf("configuration (-sent +decoded):\n%s", d)
	}
	if d := cmp.Diff(src, gotSrc); d != "" || gotSrc["GASNET_NETWORKDEPTH"].Var != "AMUDP_NETWORKDEPTH" {
		t.Errorf("sources (-sent +decoded):\n%s", d)
	}
	if got.ReqTimeoutMax <= math.MaxUint32 {
		t.Errorf("ReqTimeoutMax %d: the test lacks a value wider than 32 bits", got.ReqTimeoutMax)
	}
	for i := range len(b) {
		if _, _, err := DecodeBinary(b[:i]); err == nil {
			t.Errorf("truncated to %d of %d bytes: accepted", i, len(b))
		}
	}
	if _, _, err := DecodeBinary(append(b[:len(b):len(b)], 0)); err == nil {
		t.Error("a byte past the end was accepted")
	}
	wrong := append([]byte(nil), b...)
	wrong[1] = 'b' // the first field, a string, said to be a bool
	if _, _, err := DecodeBinary(wrong); err == nil {
		t.Error("a field of another kind was accepted")
	}
}

// BenchmarkDecodeBinary is what a worker of the L spawner pays for its
// configuration, against BenchmarkLoad's reading of the environment.
func BenchmarkDecodeBinary(b *testing.B) {
	c, src, err := LoadEnv([]string{"GASNET_SPAWNFN=L"})
	if err != nil {
		b.Fatal(err)
	}
	form := AppendBinary(nil, c, src)
	for b.Loop() {
		if _, _, err := DecodeBinary(form); err != nil {
			b.Fatal(err)
		}
	}
}
