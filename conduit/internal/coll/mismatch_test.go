package coll

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// mismatchCase is a line of testdata/mismatch.txt.
type mismatchCase struct {
	name  string
	n     int
	specs []spec
	want  []string // by member
}

// members returns the members sel names among n, given those named
// before on the line (for "rest").
func members(sel string, n int, named []bool) ([]int, error) {
	var out []int
	for m := range n {
		switch sel {
		case "all":
		case "even":
			if m%2 != 0 {
				continue
			}
		case "odd":
			if m%2 == 0 {
				continue
			}
		case "rest":
			if named[m] {
				continue
			}
		default:
			continue
		}
		out = append(out, m)
	}
	if out == nil && sel != "rest" {
		for _, f := range strings.Split(sel, ",") {
			m, err := strconv.Atoi(f)
			if err != nil || m < 0 || m >= n {
				return nil, fmt.Errorf("members %q: accepted: all, even, odd, rest or member numbers below %d", sel, n)
			}
			out = append(out, m)
		}
	}
	return out, nil
}

// assign parses "MEMBERS: VALUE | ..." into one value by member.
func assign(s string, n int, set func(m int, v string) error) error {
	named := make([]bool, n)
	for _, f := range strings.Split(s, "|") {
		sel, v, ok := strings.Cut(f, ":")
		if !ok {
			return fmt.Errorf("%q: want MEMBERS: VALUE", f)
		}
		ms, err := members(strings.TrimSpace(sel), n, named)
		if err != nil {
			return err
		}
		for _, m := range ms {
			named[m] = true
			if err := set(m, strings.TrimSpace(v)); err != nil {
				return err
			}
		}
	}
	for m, ok := range named {
		if !ok {
			return fmt.Errorf("%q: member %d has no value", s, m)
		}
	}
	return nil
}

func parseCase(line string) (mismatchCase, error) {
	calls, want, ok := strings.Cut(line, "=>")
	head, calls, ok2 := strings.Cut(calls, "|")
	f := strings.Fields(head)
	if !ok || !ok2 || len(f) != 2 {
		return mismatchCase{}, fmt.Errorf("want NAME N | MEMBERS: CALL ... => MEMBERS: OUTCOME ...")
	}
	n, err := strconv.Atoi(f[1])
	if err != nil || n < 1 {
		return mismatchCase{}, fmt.Errorf("team size %q", f[1])
	}
	c := mismatchCase{name: f[0], n: n, specs: make([]spec, n), want: make([]string, n)}
	err = assign(calls, n, func(m int, v string) (err error) {
		c.specs[m], err = parseSpec(v)
		return err
	})
	if err == nil {
		err = assign(want, n, func(m int, v string) error { c.want[m] = v; return nil })
	}
	return c, err
}

// TestMismatchData runs testdata/mismatch.txt.
func TestMismatchData(t *testing.T) {
	f, err := os.Open("testdata/mismatch.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		c, err := parseCase(text)
		if err != nil {
			t.Fatalf("testdata/mismatch.txt:%d: %v", line, err)
		}
		for name, p := range plans(c.n) {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				got, outs := runCase(c.n, p, c.specs)
				for m, w := range c.want {
					if slices.Contains(strings.Split(w, "/"), got[m]) {
						got[m] = w // one of the outcomes the line accepts
					}
				}
				if d := cmp.Diff(c.want, got); d != "" {
					t.Errorf("testdata/mismatch.txt:%d: outcomes by member (-want +got):\n%s\n%v", line, d, outs)
				}
			})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// runCase runs specs, then (where no member would abort) an all-reduce
// that every member must complete with the sum; it returns each member's
// outcome (failed's, or "abort"), with the first step's results.
func runCase(n int, p *Plan, specs []spec) ([]string, []outcome) {
	net := newMemNet(n)
	defer net.bound(10 * time.Second)()
	outs := runAll(net, p, 1, specs)
	got := make([]string, n)
	for m, o := range outs {
		got[m] = failed(o.err)
	}
	aborted := net.aborted()
	for _, m := range aborted {
		got[m] = "abort"
	}
	if aborted != nil {
		return got, outs
	}
	next, _ := parseSpec("allreduce sum uint64 1")
	nexts := runAll(net, p, 2, slices.Repeat([]spec{next}, n))
	want := fmt.Sprintf("%x", vecSum(n))
	for m, o := range nexts {
		if o.err != nil || o.out != want {
			got[m] += fmt.Sprintf(", then the next all-reduce: %q, %v", o.out, o.err)
		}
	}
	return got, outs
}

// vecSum is the sum of the members' one-element uint64 vectors.
func vecSum(n int) []byte {
	acc := vec(elems["uint64"], 0, 1)
	for m := 1; m < n; m++ {
		OpCombine(Sum, elems["uint64"])(acc, vec(elems["uint64"], m, 1))
	}
	return acc
}

// TestEveryMismatchPair runs every pair of different calls, the even
// members calling one and the odd the other, at several sizes under every
// plan: no member hangs; each returns an error wrapping ErrMismatch or
// ErrArgument, or left with a result and aborts the job, or (only where
// some member aborts the job, which names the difference) returned its
// result before the difference showed.
func TestEveryMismatchPair(t *testing.T) {
	calls := []string{"barrier", "broadcast 0", "broadcast 1", "reduce 0 sum uint64 1", "reduce 1 sum uint64 1",
		"reduce 0 sum int64 1", "allreduce sum uint64 1", "allreduce sum int64 1", "allreduce max uint64 1",
		"allreduce sum uint64 2", "gather 0", "gather 1", "allgather", "scatter 0", "scatter 1", "alltoall 8",
		"alltoall 16", "alltoallv", "split 0"}
	for _, n := range []int{2, 3, 4, 5, 7} {
		for name, p := range plans(n) {
			for i, a := range calls {
				for _, b := range calls[i+1:] {
					specs := evenOdd(a, b, n)
					got, _ := runCase(n, p, specs)
					aborted := slices.Contains(got, "abort")
					for m, o := range got {
						if o == "ok" && !aborted || !slices.Contains([]string{"ok", "mismatch", "argument", "abort", "ended"}, o) {
							t.Errorf("%d members, %s: even %q, odd %q: member %d: %s", n, name, a, b, m, o)
						}
					}
				}
			}
		}
	}
}

// evenOdd returns the calls of n members, the even calling a and the odd
// b (as parseSpec reads them).
func evenOdd(a, b string, n int) []spec {
	sa, _ := parseSpec(a)
	sb, _ := parseSpec(b)
	specs := make([]spec, n)
	for m := range specs {
		specs[m] = [2]spec{sa, sb}[m%2]
	}
	return specs
}
