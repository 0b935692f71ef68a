package coll

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/conduit/internal/amo"
)

// spec is one member's call in a test, parsed from words such as
// "reduce 0 sum uint64 2" (see parseSpec).
type spec struct {
	Call
	size  int // bytes of a part (all-gather, gather, broadcast, all-to-all block)
	parts int // the root's part count of a scatter (-1: the team's size)
	color int // a split's color
}

var elems = map[string]amo.Kind{"int32": amo.Int32, "uint32": amo.Uint32, "int64": amo.Int64, "uint64": amo.Uint64,
	"float32": amo.Float32, "float64": amo.Float64}

var ops = map[string]Op{"sum": Sum, "min": Min, "max": Max, "prod": Prod, "and": And, "or": Or, "xor": Xor, "op0": 0}

// parseSpec parses "barrier", "broadcast ROOT [SIZE]", "reduce ROOT OP
// ELEM LEN", "allreduce OP ELEM LEN", "gather ROOT [SIZE]", "allgather
// [SIZE]", "scatter ROOT [PARTS]", "alltoall [BLOCK]", "alltoallv",
// "split [COLOR]".
func parseSpec(s string) (spec, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return spec{}, fmt.Errorf("an empty call")
	}
	num := func(i, def int) int {
		if i >= len(f) {
			return def
		}
		v, err := strconv.Atoi(f[i])
		if err != nil {
			panic(fmt.Sprintf("call %q: word %d: %v", s, i, err))
		}
		return v
	}
	sp := spec{size: 8, parts: -1}
	switch f[0] {
	case "barrier":
		sp.Kind = Barrier
	case "broadcast":
		sp.Kind, sp.Root, sp.size = Broadcast, num(1, 0), num(2, 8)
	case "reduce", "allreduce":
		sp.Kind, f = Reduce, f[1:]
		if s[0] == 'a' {
			sp.Kind, f = AllReduce, append([]string{"-"}, f...)
		} else {
			sp.Root = num(0, 0)
		}
		if len(f) != 4 {
			return spec{}, fmt.Errorf("call %q: want ROOT OP ELEM LEN", s)
		}
		sp.Op, sp.Elem, sp.Len = ops[f[1]], elems[f[2]], num(3, 1)
	case "gather":
		sp.Kind, sp.Root, sp.size = Gather, num(1, 0), num(2, 8)
	case "allgather":
		sp.Kind, sp.size = AllGather, num(1, 8)
	case "scatter":
		sp.Kind, sp.Root, sp.parts = Scatter, num(1, 0), num(2, -1)
	case "alltoall":
		sp.Kind, sp.size = Alltoall, num(1, 8)
	case "alltoallv":
		sp.Kind = Alltoallv
	case "split":
		sp.Kind, sp.color = Split, num(1, 0)
	default:
		return spec{}, fmt.Errorf("call %q: no such collective", s)
	}
	return sp, nil
}

// part is member m's datum of i bytes in a test: its bytes name it.
func part(m, i, size int) []byte {
	b := make([]byte, size)
	for k := range b {
		b[k] = byte(m*31 + i*7 + k)
	}
	return b
}

// vec is member m's reduction vector: element i is m+i+1.
func vec(k amo.Kind, m, n int) []byte {
	b := make([]byte, 0, n*k.Size())
	for i := range n {
		v := uint64(m + i + 1)
		switch k {
		case amo.Float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(v)))
		case amo.Float64:
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(float64(v)))
		case amo.Int32, amo.Uint32:
			b = binary.LittleEndian.AppendUint32(b, uint32(v))
		default:
			b = binary.LittleEndian.AppendUint64(b, v)
		}
	}
	return b
}

// call is what sp calls in a team of n.
func (sp spec) call(n int) Call {
	c := sp.Call
	if c.Kind == Alltoall {
		c.Len = n * sp.size
	}
	return c
}

// args returns member me's arguments: its data (a vector for a
// reduction) and its parts.
func (sp spec) args(me, n int) (data []byte, parts [][]byte) {
	switch sp.Kind {
	case Reduce, AllReduce:
		return vec(sp.Elem, me, sp.Len), nil
	case Scatter:
		if me == sp.Root {
			cnt := sp.parts
			if cnt < 0 {
				cnt = n
			}
			for i := range cnt {
				parts = append(parts, part(me, i, sp.size))
			}
		}
	case Alltoall:
		for i := range n {
			data = append(data, part(me, i, sp.size)...)
		}
	case Alltoallv:
		parts = make([][]byte, n)
		for i := range parts {
			parts[i] = part(me, i, me+i)
		}
	case Split:
		data = SplitDatum(sp.color, me)
	default:
		data = part(me, 0, sp.size)
	}
	return data, parts
}

// run runs sp on member me of n over l and returns what it gives, as
// text.
func (sp spec) run(l Link, p *Plan, me, n int) (string, error) {
	r := New(l, p, sp.call(n))
	data, parts := sp.args(me, n)
	str := func(v any, err error) (string, error) { return fmt.Sprintf("%x", v), err }
	switch sp.Kind {
	case Barrier:
		return "", r.Barrier()
	case Broadcast:
		return str(r.Broadcast(data))
	case Reduce:
		return str(r.Reduce(data, OpCombine(sp.Op, sp.Elem)))
	case AllReduce:
		return str(r.AllReduce(data, OpCombine(sp.Op, sp.Elem)))
	case Gather:
		return str(r.Gather(data))
	case AllGather:
		return str(r.AllGather(data))
	case Scatter:
		return str(r.Scatter(parts))
	case Alltoall:
		return str(r.Alltoall(data))
	case Alltoallv:
		return str(r.Alltoallv(parts))
	case Split:
		res, err := r.Split(sp.color, me)
		return fmt.Sprint(res.Members, res.Me), err
	}
	return "", fmt.Errorf("no such kind %v", sp.Kind)
}

// outcome is what a member's call ended with in a test.
type outcome struct {
	out string
	err error
}

// runAll runs one collective: member m calls specs[m], all at once, on
// net's collective seq; a run longer than the bound hangs.
func runAll(net *memNet, p *Plan, seq uint64, specs []spec) []outcome {
	n := len(specs)
	res := make([]outcome, n)
	var wg sync.WaitGroup
	for m := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			net.enter(m, seq, specs[m].call(n))
			out, err := specs[m].run(&memLink{net: net, me: m, seq: seq}, p, m, n)
			res[m] = outcome{out, err}
			net.leave(m, seq, err)
		}()
	}
	wg.Wait()
	return res
}

// plans are the team plans the tests run each collective under, for n
// members: binomial trees; two levels over groups of 3; the tree
// barrier and gathers of crowded hosts; the central barrier.
func plans(n int) map[string]*Plan {
	leaders := make([]int, n)
	for r := range leaders {
		leaders[r] = r - r%3
	}
	return map[string]*Plan{"flat": nil, "hier": {Leaders: leaders}, "crowded": {Leaders: leaders, TreeBarrier: true, TreeGather: true},
		"central": {TreeBarrier: true, Central: true}}
}

// TestCollectives runs every collective with matching calls under every
// plan and team size and compares each member's result with flat's at
// the same size and with what the collective means.
func TestCollectives(t *testing.T) {
	calls := []string{"barrier", "broadcast 0", "broadcast 2 3000", "reduce 1 sum uint64 3", "reduce 0 max float64 2",
		"allreduce sum int32 4", "allreduce prod float32 1", "allreduce xor uint64 2", "gather 2 5", "allgather 3",
		"allgather 0", "scatter 1", "alltoall 4", "alltoall 300", "alltoallv", "split 0"}
	for n := 1; n <= 9; n++ {
		for _, c := range calls {
			sp, err := parseSpec(c)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Root >= n {
				continue
			}
			var flat []outcome
			for _, name := range []string{"flat", "hier", "crowded", "central"} {
				net := newMemNet(n)
				stop := net.bound(10 * time.Second)
				specs := make([]spec, n)
				for m := range specs {
					specs[m] = sp
				}
				got := runAll(net, plans(n)[name], 1, specs)
				stop()
				for m, o := range got {
					if o.err != nil {
						t.Fatalf("%d members, %s, %s: member %d: %v", n, name, c, m, o.err)
					}
				}
				if a := net.aborted(); a != nil {
					t.Fatalf("%d members, %s, %s: members %v would abort", n, name, c, a)
				}
				if flat == nil {
					flat = got
					checkMeaning(t, n, sp, got)
				}
				for m := range got {
					if got[m].out != flat[m].out && sp.Elem != amo.Float32 && sp.Elem != amo.Float64 {
						t.Errorf("%d members, %s, %s: member %d got %s, under flat %s", n, name, c, m, got[m].out, flat[m].out)
					}
				}
			}
		}
	}
}

// checkMeaning checks results that the test can compute directly.
func checkMeaning(t *testing.T, n int, sp spec, got []outcome) {
	t.Helper()
	for m, o := range got {
		var want string
		switch sp.Kind {
		case Broadcast:
			want = fmt.Sprintf("%x", part(sp.Root, 0, sp.size))
		case AllGather:
			var all [][]byte
			for i := range n {
				all = append(all, part(i, 0, sp.size))
			}
			want = fmt.Sprintf("%x", all)
		case Scatter:
			want = fmt.Sprintf("%x", part(sp.Root, m, sp.size))
		case Alltoall:
			var all []byte
			for i := range n {
				all = append(all, part(i, m, sp.size)...)
			}
			want = fmt.Sprintf("%x", all)
		case Split:
			ms := make([]int, n)
			for i := range ms {
				ms[i] = i
			}
			want = fmt.Sprint(ms, m)
		case AllReduce:
			if sp.Op == Sum && sp.Elem == amo.Int32 {
				acc := vec(sp.Elem, 0, sp.Len)
				for i := 1; i < n; i++ {
					OpCombine(Sum, sp.Elem)(acc, vec(sp.Elem, i, sp.Len))
				}
				want = fmt.Sprintf("%x", acc)
			}
		}
		if want != "" && o.out != want {
			t.Errorf("%d members, %s: member %d got %s, want %s", n, sp.Call, m, o.out, want)
		}
	}
}

// failed names how a member's call failed: "mismatch", "argument", or
// "ok" for none.
func failed(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrArgument):
		return "argument"
	case errors.Is(err, errEnded):
		return "ended"
	}
	return "error: " + err.Error()
}
