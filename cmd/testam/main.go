// Command testam measures active messages between rank 0 and rank 1 (the
// other ranks wait): round-trip latency of short, medium and long
// request/reply by payload size, and one-way bandwidth of medium and long
// requests flooded up to the network depth (DESIGN.md §11). With N=1, rank 0
// measures against itself (loopback, no network).
//
//	./testam N [-json] [-iters K] [-sizes 64,1024,65000] [-np-gb]
//	./testam N -coll [-json] [-iters K]
//	./testam N -barrier [-json] [-iters K]
//	./testam N -allreduce [-json] [-iters K]
//	./testam N -atomics [-json] [-iters K]
//	./testam N -rma [-json] [-iters K] [-sizes 8,1048576]
//	./testam N ... -cpuprofile FILE
//
// With -coll, every rank runs K barriers, K all-gathers of 8 bytes, K
// broadcasts of 8 bytes from rank 0, K all-reductions (sum) of one
// uint64, K gathers of 8 bytes to rank 0 and K all-to-alls of 8-byte
// blocks (the whole job's team), each checked, in 5 blocks; before each block rank 0 measures as
// many short round trips to rank 1. Rank 0 reports the short round trip,
// then each collective per operation and in those round trips ("rtts").
//
// With -barrier, every rank times six loops of K barriers of the whole
// job, as many as GASNet's testbarrier times (one of each of its six
// kinds), and rank 0 reports each loop per barrier. With -allreduce, the
// same six loops of sums of one uint64 over the whole job, each checked.
//
// With -atomics, ranks 1..N-1 each fetch-and-add 1 to one uint64 word of
// rank 0's segment K times, one at a time, then K times to a random word
// of a random other rank (remote atomics, conduit.Atomics); rank 0 checks
// the counter and reports the operations per second of each phase.
//
// With -rma, rank 0 times K blocking Puts to rank 1 and then K blocking
// Gets of each size, as GASNet's testsmall and testlarge do (section A),
// with a segment of 1 MiB.
//
// With -cpuprofile, rank 0 writes a CPU profile of its run, from before
// Attach, to FILE (runtime/pprof), for go tool pprof or go build -pgo
// (make pgo).
//
// Program flags follow N: everything after N is the workers' argv. Rank 0
// prints one line per measurement, or with -json one JSON object per line:
//
//	{"test":"short_rtt","bytes":0,"iters":K,"us":x}
//	{"test":"long_flood","bytes":65000,"iters":K,"us":x,"MBps":y}
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/cmd/internal/cli"
	"github.com/udpconduit/udpconduit/conduit"
)

const (
	hShort     = 130 // request → short reply
	hShortR    = 131
	hMedium    = 132 // request → medium reply of the same size
	hMediumR   = 133
	hLong      = 134 // request → long reply of the same size
	hLongR     = 135
	hSink      = 136 // flood target: counts
	defaultSzs = "64,1024,8192,65000"
)

// Result is one measurement; -json prints it as is.
type Result struct {
	Test  string  `json:"test"`
	Bytes int     `json:"bytes"`
	Iters int     `json:"iters"`
	US    float64 `json:"us"`               // per round trip, per message for floods, per operation for collectives
	MBps  float64 `json:"MBps,omitempty"`   // floods: 10^6 payload bytes per second
	RTTs  float64 `json:"rtts,omitempty"`   // collectives: in short round trips
	RTTUS float64 `json:"rtt_us,omitempty"` // collectives: the short round trip measured with it
	Ranks int     `json:"ranks,omitempty"`
	OPS   float64 `json:"ops_per_s,omitempty"` // atomics: operations per second, all ranks
}

var replies, sunk atomic.Uint64

func count(*conduit.Token, []uint32, []byte) { replies.Add(1) }

var handlers = []conduit.HandlerEntry{
	{Index: hShort, Fn: func(t *conduit.Token, a []uint32, _ []byte) { t.ReplyShort(hShortR, a...) }},
	{Index: hMedium, Fn: func(t *conduit.Token, _ []uint32, p []byte) { t.ReplyMedium(hMediumR, p) }},
	{Index: hLong, Fn: func(t *conduit.Token, _ []uint32, p []byte) { t.ReplyLong(hLongR, p, 0) }},
	{Index: hShortR, Fn: count},
	{Index: hMediumR, Fn: count},
	{Index: hLongR, Fn: count},
	{Index: hSink, Fn: func(*conduit.Token, []uint32, []byte) { sunk.Add(1) }},
}

// npHandlers replace handlers' Medium and Long ones, by index, under
// -np-gb: their replies are prepared in the conduit's buffer and
// committed with the payload as the buffer holds it, as GASNet's testam
// -np-gb replies.
var npHandlers = map[int]conduit.Handler{
	hMedium: func(t *conduit.Token, _ []uint32, p []byte) {
		if pr, err := t.PrepareReplyMedium(len(p), 0); err == nil {
			pr.Commit(hMediumR, len(p))
		}
	},
	hLong: func(t *conduit.Token, _ []uint32, p []byte) {
		if pr, err := t.PrepareReplyLong(len(p), 0, 0); err == nil {
			pr.Commit(hLongR, len(p))
		}
	},
}

func main() {
	conduit.Usage = "[-json] [-iters K] [-sizes LIST] [-np-gb] [-coll | -barrier | -allreduce | -atomics | -rma] [-cpuprofile FILE]"
	conduit.Init()
	fs := flag.NewFlagSet("testam", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "print one JSON object per measurement")
	coll := fs.Bool("coll", false, "measure the collectives over every rank instead")
	bar := fs.Bool("barrier", false, "time six loops of barriers over every rank instead, as GASNet's testbarrier")
	red := fs.Bool("allreduce", false, "time six loops of one-element all-reduces over every rank instead")
	atom := fs.Bool("atomics", false, "measure fetch-and-add throughput from every rank instead")
	rmaMode := fs.Bool("rma", false, "measure blocking Put and Get latency and bandwidth instead")
	np := fs.Bool("np-gb", false, "send the requests and replies of the AM tests prepared in the conduit's buffer (PrepareRequestMedium, PrepareReplyMedium and the Long ones), as GASNet's testam -np-gb")
	profile := fs.String("cpuprofile", "", "rank 0 writes a CPU profile of its run to this file")
	iters := fs.Int("iters", 10000, "iterations of each measurement")
	sizes := fs.String("sizes", "", "comma-separated payload sizes in bytes, 1.."+strconv.Itoa(conduit.MaxMedium)+" (with -rma 1.."+strconv.Itoa(rmaSegment)+")")
	if err := fs.Parse(os.Args[1:]); err != nil {
		usage("%v", err)
	}
	if n := btoi(*coll) + btoi(*bar) + btoi(*red) + btoi(*atom) + btoi(*rmaMode); n > 1 {
		usage("-coll, -barrier, -allreduce, -atomics and -rma: accepted: at most one of them")
	} else if n == 1 && *np {
		usage("-np-gb: accepted only with the AM tests (none of -coll, -barrier, -allreduce, -atomics, -rma)")
	}
	parse, segment, def := parseSizes, conduit.MaxLong, defaultSzs
	if *rmaMode {
		parse, segment, def = parseRMASizes, rmaSegment, defaultRMASizes
	}
	if *sizes == "" {
		*sizes = def
	}
	szs, err := parse(*sizes)
	if err != nil {
		usage("%v", err)
	}
	if *iters < 1 {
		usage("-iters %d: accepted: a positive count", *iters)
	}
	stop := func() {}
	if *profile != "" && conduit.Rank() == 0 {
		if stop, err = startProfile(*profile); err != nil {
			usage("%v", err)
		}
	}
	hs := slices.Clone(handlers)
	for i := range hs {
		if fn := npHandlers[hs[i].Index]; *np && fn != nil {
			hs[i].Fn = fn
		}
	}
	if _, err := conduit.Attach(hs, segment); err != nil {
		die("attach: %v", err)
	}
	if err := conduit.Barrier(); err != nil {
		die("barrier: %v", err)
	}
	emit := func(r Result) {
		switch {
		case *asJSON:
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		case r.OPS > 0:
			fmt.Printf("%-14s %6d B  %7d ops  %10.2f µs/op  %12.0f ops/s  %d ranks\n", r.Test, r.Bytes, r.Iters, r.US, r.OPS, r.Ranks)
		case r.Ranks > 0 && r.RTTs == 0:
			fmt.Printf("%-12s %7d iters  %10.2f µs/op  %d ranks\n", r.Test, r.Iters, r.US, r.Ranks)
		case r.Ranks > 0:
			fmt.Printf("%-12s %6d B  %7d iters  %10.2f µs/op  %6.2f rtts  %d ranks  (rtt %.2f µs)\n", r.Test, r.Bytes, r.Iters, r.US, r.RTTs, r.Ranks, r.RTTUS)
		case r.MBps > 0:
			fmt.Printf("%-12s %6d B  %7d iters  %10.4f µs/msg  %10.1f MB/s\n", r.Test, r.Bytes, r.Iters, r.US, r.MBps)
		default:
			fmt.Printf("%-12s %6d B  %7d iters  %10.2f µs/rtt\n", r.Test, r.Bytes, r.Iters, r.US)
		}
	}
	peer := min(1, conduit.Size()-1)
	if *rmaMode {
		if err := rma(peer, *iters, szs, emit); err != nil {
			die("%v", err)
		}
	} else if *atom {
		if err := atomics(*iters, emit); err != nil {
			die("%v", err)
		}
	} else if *bar {
		if err := barriers(*iters, emit); err != nil {
			die("%v", err)
		}
	} else if *red {
		if err := allReduces(*iters, emit); err != nil {
			die("%v", err)
		}
	} else if *coll {
		if err := collectives(peer, *iters, emit); err != nil {
			die("%v", err)
		}
	} else if conduit.Rank() == 0 {
		if err := measure(peer, *iters, szs, *np, emit); err != nil {
			die("%v", err)
		}
	}
	stop()
	conduit.Finalize(0)
}

// startProfile starts a CPU profile into the file at path, created or
// truncated, and returns what ends it: it writes the rest and closes the
// file, or dies saying why it could not.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("-cpuprofile %s: %v; accepted: a file this rank can create", path, err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("-cpuprofile %s: %v", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			die("-cpuprofile %s: %v", path, err)
		}
	}, nil
}

func usage(format string, a ...any) {
	cli.BadArgs("testam", "testam N [-json] [-iters K] [-sizes LIST] [-np-gb] [-coll | -barrier | -allreduce | -atomics | -rma] [-cpuprofile FILE]", format, a...)
}

// btoi is 1 for true.
func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// collBlocks is the number of blocks a collective's iterations are split
// into. Before each block rank 0 measures as many short round trips, so
// that a collective and its unit are measured under the same conditions:
// on a loaded machine either drifts within a run.
const collBlocks = 5

// collectives measures, on every rank, barriers, 8-byte all-gathers and
// broadcasts, and one-element all-reductions (AllReduce, and AllReduceNB
// then Wait), checking what each returns; rank 0 reports each per
// operation, also in short round trips measured in blocks interleaved
// with the collective's (collBlocks), and first the short round trip over
// all blocks.
func collectives(peer, iters int, emit func(Result)) error {
	me, n := conduit.Rank(), conduit.Size()
	part := []byte(fmt.Sprintf("rank%4d", me%10000))
	blocks := make([]byte, 8*n) // block r: this rank and r
	for r := range n {
		blocks[8*r], blocks[8*r+1] = byte(me), byte(r)
	}
	checkSum := func(sum []uint64, err error) error {
		if want := uint64(n * (n - 1) / 2); err == nil && (len(sum) != 1 || sum[0] != want) {
			err = fmt.Errorf("rank %d: sum %v, want [%d]", me, sum, want)
		}
		return err
	}
	ops := []struct {
		name  string
		bytes int
		op    func() error
	}{
		{"barrier", 0, conduit.Barrier},
		{"allgather", 8, func() error {
			parts, err := conduit.World().AllGather(part)
			if err == nil && (len(parts) != n || string(parts[n-1]) != fmt.Sprintf("rank%4d", (n-1)%10000)) {
				err = fmt.Errorf("rank %d: %d parts, the last %q", me, len(parts), parts[len(parts)-1])
			}
			return err
		}},
		{"broadcast", 8, func() error {
			b, err := conduit.World().Broadcast(0, part)
			if err == nil && string(b) != "rank   0" {
				err = fmt.Errorf("rank %d received %q", me, b)
			}
			return err
		}},
		{"allreduce", 8, func() error {
			sum, err := conduit.AllReduce(conduit.World(), conduit.Sum, []uint64{uint64(me)})
			return checkSum(sum, err)
		}},
		{"allreduce_nb", 8, func() error {
			return checkSum(conduit.AllReduceNB(conduit.World(), conduit.Sum, []uint64{uint64(me)}).Wait())
		}},
		{"gather", 8, func() error {
			parts, err := conduit.World().Gather(0, part)
			if err == nil && me == 0 && (len(parts) != n || string(parts[n-1]) != fmt.Sprintf("rank%4d", (n-1)%10000)) {
				err = fmt.Errorf("rank 0 gathered %d parts", len(parts))
			}
			return err
		}},
		{"alltoall", 8, func() error {
			got, err := conduit.World().Alltoall(blocks)
			if err == nil && (len(got) != 8*n || got[8*(n-1)] != byte(n-1) || got[8*(n-1)+1] != byte(me)) {
				err = fmt.Errorf("rank %d: all-to-all gave %d bytes", me, len(got))
			}
			return err
		}},
	}
	per := max(iters/collBlocks, 1)
	repeat := func(k int, op func() error) error {
		for range k {
			if err := op(); err != nil {
				return err
			}
		}
		return nil
	}
	shortRTT := func() error { return conduit.RequestShort(peer, hShort, 1) }
	var results []Result
	var allRTT time.Duration
	for _, c := range ops {
		if err := repeat(max(iters/10, 1), c.op); err != nil { // warm-up
			return fmt.Errorf("%s: %w", c.name, err)
		}
		var inOp, inRTT time.Duration
		for range collBlocks {
			if me == 0 {
				d, err := roundTrips(per, shortRTT)
				if err != nil {
					return fmt.Errorf("short round trips: %w", err)
				}
				inRTT += d
			}
			if err := conduit.Barrier(); err != nil {
				return err
			}
			start := time.Now()
			if err := repeat(per, c.op); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			inOp += time.Since(start)
		}
		if me == 0 { // only rank 0 measured round trips
			allRTT += inRTT
			k := per * collBlocks
			results = append(results, Result{Test: c.name, Bytes: c.bytes, Iters: k, US: us(inOp, k),
				RTTs: float64(inOp) / float64(inRTT), RTTUS: us(inRTT, k), Ranks: n})
		}
	}
	if me == 0 {
		emit(Result{Test: "short_rtt", Iters: per * collBlocks * len(ops), US: us(allRTT, per*collBlocks*len(ops))})
		for _, r := range results {
			emit(r)
		}
	}
	return nil
}

// roundTrips sends n requests with send, each once the last one's reply
// has come, and returns the time they took.
// warmUp is the least time a round-trip test warms up for.
const warmUp = 100 * time.Millisecond

func roundTrips(n int, send func() error) (time.Duration, error) {
	start := time.Now()
	for range n {
		want := replies.Load() + 1
		if err := send(); err != nil {
			return 0, err
		}
		if err := conduit.WaitUntil(func() bool { return replies.Load() >= want }); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

func die(format string, a ...any) { cli.Die("testam", format, a...) }

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > conduit.MaxMedium {
			return nil, fmt.Errorf("-sizes %s: %q is not a size; accepted: comma-separated integers 1..%d", s, f, conduit.MaxMedium)
		}
		out = append(out, n)
	}
	return out, nil
}

// measure runs every test against peer and reports each result.
// With np the Medium and Long requests are prepared in the conduit's
// buffer and committed, the payload left as the buffer holds it, as
// GASNet's testam -np-gb sends its source buffer untouched by default.
func measure(peer, iters int, sizes []int, np bool, emit func(Result)) error {
	payload := make([]byte, conduit.MaxMedium)
	for i := range payload {
		payload[i] = byte(i)
	}
	rtt := func(name string, bytes int, send func() error) error {
		// Warm up for a tenth of the iterations, and at least warmUp:
		// the first test starts while the console and the runtime still
		// use the CPUs the ranks spin on.
		for start := time.Now(); ; {
			if _, err := roundTrips(max(iters/10, 1), send); err != nil {
				return fmt.Errorf("%s %d B: %w", name, bytes, err)
			}
			if time.Since(start) >= warmUp {
				break
			}
		}
		d, err := roundTrips(iters, send)
		if err != nil {
			return fmt.Errorf("%s %d B: %w", name, bytes, err)
		}
		emit(Result{Test: name, Bytes: bytes, Iters: iters, US: us(d, iters)})
		return nil
	}
	// sendAll sends n requests and waits until every one was answered
	// (every handler ran).
	sendAll := func(n int, send func() error) error {
		for i := 0; i < n; i++ {
			if err := send(); err != nil {
				return err
			}
		}
		return conduit.Drain()
	}
	flood := func(name string, bytes int, send func() error) error {
		// Warm up with a tenth of the iterations, as the round trips do:
		// the first copies of a size touch pages of the receiver's inbox
		// for the first time (GASNet's testam floods every size up from
		// 0, each run warming the next).
		if err := sendAll(max(iters/10, 1), send); err != nil {
			return fmt.Errorf("%s %d B: %w", name, bytes, err)
		}
		start := time.Now()
		if err := sendAll(iters, send); err != nil {
			return fmt.Errorf("%s %d B: %w", name, bytes, err)
		}
		d := time.Since(start)
		emit(Result{Test: name, Bytes: bytes, Iters: iters, US: us(d, iters), MBps: float64(bytes) * float64(iters) / d.Seconds() / 1e6})
		return nil
	}
	medium := func(h int) func(int) error {
		if np {
			return func(sz int) error {
				pr, err := conduit.PrepareRequestMedium(peer, sz, 0)
				if err != nil {
					return err
				}
				return pr.Commit(h, sz)
			}
		}
		return func(sz int) error { return conduit.RequestMedium(peer, h, payload[:sz]) }
	}
	long := func(h int) func(int) error {
		if np {
			return func(sz int) error {
				pr, err := conduit.PrepareRequestLong(peer, sz, 0, 0)
				if err != nil {
					return err
				}
				return pr.Commit(h, sz)
			}
		}
		return func(sz int) error { return conduit.RequestLong(peer, h, payload[:sz], 0) }
	}
	plan := []struct {
		name  string
		sizes []int
		run   func(name string, bytes int, send func() error) error
		send  func(size int) error
	}{
		{"short_rtt", []int{0}, rtt, func(int) error { return conduit.RequestShort(peer, hShort, 1) }},
		{"medium_rtt", sizes, rtt, medium(hMedium)},
		{"long_rtt", sizes, rtt, long(hLong)},
		{"medium_flood", sizes, flood, medium(hSink)},
		{"long_flood", sizes, flood, long(hSink)},
	}
	for _, p := range plan {
		for _, sz := range p.sizes {
			if err := p.run(p.name, sz, func() error { return p.send(sz) }); err != nil {
				return err
			}
		}
	}
	return nil
}

func us(d time.Duration, n int) float64 { return float64(d.Nanoseconds()) / float64(n) / 1000 }

// atomicWords is the number of words the random phase of -atomics spreads
// over in each rank's segment (word 0 is the one counter).
const atomicWords = 1024

// atomics measures fetch-and-add throughput: ranks 1..N-1 (rank 0 alone
// when N is 1) add 1 to word 0 of rank 0's segment iters times each, then
// to random words 1..atomicWords-1 of random other ranks; rank 0 checks the
// counter and emits the rate of each phase over all ranks.
func atomics(iters int, emit func(Result)) error {
	me, n := conduit.Rank(), conduit.Size()
	a := conduit.NewAtomics[uint64](nil)
	adders := max(n-1, 1)
	adds := me > 0 || n == 1
	rng := rand.New(rand.NewPCG(uint64(me), 7))
	for _, phase := range []string{"atomic_one", "atomic_random"} {
		if err := conduit.Barrier(); err != nil {
			return err
		}
		start := time.Now()
		for i := 0; adds && i < iters; i++ {
			to, off := 0, uint64(0)
			if phase == "atomic_random" {
				if n > 1 {
					to = (me + 1 + rng.IntN(n-1)) % n
				}
				off = 8 * uint64(1+rng.IntN(atomicWords-1))
			}
			if _, err := a.Fetch(to, off, conduit.AtomicAdd, 1, 0); err != nil {
				return fmt.Errorf("rank %d: %s: %w", me, phase, err)
			}
		}
		if err := conduit.Barrier(); err != nil {
			return err
		}
		d := time.Since(start)
		if me == 0 {
			ops := adders * iters
			emit(Result{Test: phase, Bytes: 8, Iters: ops, US: d.Seconds() * 1e6 / float64(iters), OPS: float64(ops) / d.Seconds(), Ranks: n})
		}
	}
	if me == 0 {
		if v, err := a.Fetch(0, 0, conduit.AtomicGet, 0, 0); err != nil || v != uint64(adders*iters) {
			return fmt.Errorf("the counter holds %d after %d adds (%v)", v, adders*iters, err)
		}
	}
	return nil
}
