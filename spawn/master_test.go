package spawn

import "testing"

// TestMismatched: which collectives the ranks wait in can never complete.
func TestMismatched(t *testing.T) {
	b := func(n uint64) Coll { return Coll{Kind: "barrier", Seq: n} }
	g := func(n uint64) Coll { return Coll{Kind: "all-gather", Seq: n} }
	tree := func(k string, n uint64) Coll { return Coll{Kind: k, Seq: n} }
	for _, tt := range []struct {
		name    string
		waiting []Coll
		want    bool
	}{
		{"nobody waits", []Coll{{}, {}}, false},
		{"all in one barrier", []Coll{b(1), b(1), b(1)}, false},
		{"one elsewhere, the others in a barrier", []Coll{{}, b(3), b(3)}, false},
		{"barriers one apart (a rank left the one before)", []Coll{b(2), b(3)}, false},
		{"barriers two apart", []Coll{b(2), {}, b(4)}, true},
		{"all-gathers two apart", []Coll{g(5), g(3)}, true},
		{"an all-gather and barriers", []Coll{g(1), b(1), b(1)}, true},
		{"a barrier and an all-reduce", []Coll{b(1), tree("all-reduce", 1)}, true},
		{"a broadcast and a reduce (one family)", []Coll{tree("broadcast", 1), tree("reduce", 4)}, false},
		{"broadcasts far apart (a root runs ahead)", []Coll{tree("broadcast", 1), tree("broadcast", 9)}, false},
	} {
		if got := mismatched(tt.waiting); got != tt.want {
			t.Errorf("%s: mismatched(%v) = %v, want %v", tt.name, tt.waiting, got, tt.want)
		}
	}
}
