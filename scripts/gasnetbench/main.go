// Command gasnetbench runs GASNet-EX udp-conduit's own test programs next
// to udpconduit's, in alternating rounds in one run, and prints each
// figure's median for both and the ratio (make gasnet-bench; see
// BENCHMARKS.md). Figures, not a test.
//
//	go run ./scripts/gasnetbench -gasnet DIR -bin bin [-rounds 5] [-iters 10000] [-only LIST]
//
// DIR holds GASNet's test programs (scripts/gasnet-bench.sh builds them).
// Every figure is a time, lower is better, or a rate, higher is better;
// "ahead" says whether ours is at or better than GASNet's in that sense.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// figure is one measured quantity of both systems.
type figure struct {
	name   string
	higher bool // a rate: higher is better
	g, u   []float64
	ratios []float64 // ours / GASNet of each round that measured both
}

// group is a pair of runs, GASNet's and ours, with the figures each run
// yields.
type group struct {
	name    string
	env     []string
	genv    []string // GASNet's runs only
	gasnet  []string // program (in DIR) and arguments
	ours    []string // program (in bin) and arguments
	timed   bool     // the figure is the run's wall time (start-up)
	parseG  func(string) map[string]float64
	parseU  func(string) map[string]float64
	figures []string // in print order
	rate    map[string]bool
}

func main() {
	gdir := flag.String("gasnet", "", "folder of GASNet's test programs")
	bin := flag.String("bin", "bin", "folder of udpconduit's programs")
	rounds := flag.Int("rounds", 5, "alternating rounds; each cell is their median")
	iters := flag.Int("iters", 10000, "iterations of the round-trip and flood figures")
	only := flag.String("only", "", "comma-separated groups to run (default all): "+strings.Join(groupNames(10), ","))
	flag.Parse()
	if *gdir == "" || *rounds < 1 || *iters < 1 {
		fmt.Fprintln(os.Stderr, "gasnetbench: -gasnet DIR is required; -rounds and -iters are positive")
		os.Exit(2)
	}
	var gs []group
	for _, g := range groups(*iters) {
		if *only == "" || slices.Contains(strings.Split(*only, ","), g.name) {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		fmt.Fprintf(os.Stderr, "gasnetbench: -only %q: accepted: %s\n", *only, strings.Join(groupNames(*iters), ","))
		os.Exit(2)
	}
	host, _ := os.Hostname()
	fmt.Printf("gasnetbench: %s, %d CPUs, %d alternating rounds, medians; ratio = ours / GASNet\n", host, nproc(), *rounds)
	fmt.Printf("%-56s %12s %12s %7s  %-5s  %s\n", "figure", "GASNet", "ours", "ratio", "ahead", "rounds ahead, their ratios")
	behind := 0
	for _, g := range gs {
		figs := map[string]*figure{}
		for _, f := range g.figures {
			figs[f] = &figure{name: g.name + ": " + f, higher: g.rate[f]}
		}
		for r := range *rounds {
			gm, err := run(filepath.Join(*gdir, g.gasnet[0]), g.gasnet[1:], append(g.genv, g.env...), g.timed, g.parseG)
			if err != nil {
				fail(g.name, "GASNet", r, err)
			}
			um, err := run(filepath.Join(*bin, g.ours[0]), g.ours[1:], g.env, g.timed, g.parseU)
			if err != nil {
				fail(g.name, "ours", r, err)
			}
			for k, f := range figs {
				gv, gok := gm[k]
				uv, uok := um[k]
				if gok {
					f.g = append(f.g, gv)
				}
				if uok {
					f.u = append(f.u, uv)
				}
				if gok && uok && gv > 0 {
					f.ratios = append(f.ratios, uv/gv)
				}
			}
		}
		for _, k := range g.figures {
			f := figs[k]
			if len(f.g) == 0 || len(f.u) == 0 {
				fmt.Printf("%-56s %12s %12s %7s  %s\n", f.name, cell(f.g), cell(f.u), "-", "not measured")
				continue
			}
			gm, um := median(f.g), median(f.u)
			ratio := um / gm
			ahead := ratio <= 1
			if f.higher {
				ahead = ratio >= 1
			}
			mark := "yes"
			if !ahead {
				mark, behind = "no", behind+1
			}
			fmt.Printf("%-56s %12s %12s %7.2f  %-5s  %s\n", f.name, fig(gm), fig(um), ratio, mark, spread(f.ratios, f.higher))
		}
	}
	fmt.Printf("gasnetbench: %d figures behind GASNet's\n", behind)
}

func groupNames(iters int) []string {
	var ns []string
	for _, g := range groups(iters) {
		ns = append(ns, g.name)
	}
	return ns
}

// amFigures are testam's figures, named as compare-testam names them.
var amFigures = []string{"short round trip (µs)", "medium 8 B round trip (µs)", "long 65000 B round trip (µs)", "medium 65000 B flood (MB/s)", "long 65000 B flood (MB/s)"}

var amRates = map[string]bool{"medium 65000 B flood (MB/s)": true, "long 65000 B flood (MB/s)": true, "put 1 MiB (MB/s)": true, "get 1 MiB (MB/s)": true}

// groups lists every pair of runs.
func groups(iters int) []group {
	udp := []string{"GASNET_SUPERNODE_MAXSIZE=1"}
	it := strconv.Itoa(iters)
	gs := []group{
		{name: "testam shm", gasnet: []string{"testam", "2", it}, ours: []string{"testam", "2", "-iters", it, "-sizes", "8,65000"}, parseG: gasnetAM, parseU: oursAM, figures: amFigures, rate: amRates},
		{name: "testam udp", env: udp, gasnet: []string{"testam", "2", it}, ours: []string{"testam", "2", "-iters", it, "-sizes", "8,65000"}, parseG: gasnetAM, parseU: oursAM, figures: amFigures, rate: amRates},
	}
	for _, env := range [][]string{nil, udp} {
		name := "put/get shm"
		if env != nil {
			name = "put/get udp"
		}
		small, large := strconv.Itoa(iters*10), strconv.Itoa(max(iters/20, 1))
		gs = append(gs,
			group{name: name + " 8 B", env: env, gasnet: []string{"testsmall", "2", "-minsz", "8", small, "8", "A"}, ours: []string{"testam", "2", "-rma", "-iters", small, "-sizes", "8"}, parseG: gasnetRMA, parseU: oursRMA, figures: []string{"put 8 B (µs)", "get 8 B (µs)"}, rate: amRates},
			group{name: name + " 1 MiB", env: env, gasnet: []string{"testlarge", "2", "-minsz", "1048576", large, "1048576", "A"}, ours: []string{"testam", "2", "-rma", "-iters", large, "-sizes", "1048576"}, parseG: gasnetRMA, parseU: oursRMA, figures: []string{"put 1 MiB (MB/s)", "get 1 MiB (MB/s)"}, rate: amRates})
	}
	for _, n := range []int{2, 8, 16, 64} {
		k := strconv.Itoa(max(iters*10/(n*n), 100))
		// GASNet's tests spin without yielding unless told the CPUs are
		// overcommitted (its README: GASNET_TEST_POLITE_SYNC); a GASNet
		// user with more ranks than CPUs sets it, and so does this run.
		var genv []string
		if n > nproc() {
			genv = []string{"GASNET_TEST_POLITE_SYNC=1"}
		}
		gs = append(gs, group{name: fmt.Sprintf("barrier N=%d", n), genv: genv, gasnet: []string{"testbarrier", strconv.Itoa(n), k}, ours: []string{"testam", strconv.Itoa(n), "-barrier", "-iters", k}, parseG: gasnetBarrier, parseU: oursLoops("barrier", "barrier (µs)"), figures: []string{"barrier (µs)"}})
		if n >= 16 {
			// Our one-element all-reduce (the fastest of testam
			// -allreduce's six loops, as the barrier's) against GASNet's
			// (testcollperf, a vector of one int), and against its
			// fastest barrier: issue 46's target where the ranks
			// outnumber the CPUs.
			ours := []string{"testam", strconv.Itoa(n), "-allreduce", "-iters", k}
			gs = append(gs,
				group{name: fmt.Sprintf("allreduce N=%d", n), genv: genv, gasnet: []string{"testcollperf", strconv.Itoa(n), "1", "1", "1", k}, ours: ours, parseG: gasnetAllReduce, parseU: oursLoops("allreduce", allReduceFigure), figures: []string{allReduceFigure}},
				group{name: fmt.Sprintf("allreduce:barrier N=%d", n), genv: genv, gasnet: []string{"testbarrier", strconv.Itoa(n), k}, ours: ours, parseG: gasnetBarrierAs(againstBarrier), parseU: oursLoops("allreduce", againstBarrier), figures: []string{againstBarrier}})
		}
	}
	for _, n := range []int{16, 64} {
		gs = append(gs, group{name: fmt.Sprintf("start-up N=%d", n), gasnet: []string{"testhello", strconv.Itoa(n)}, ours: []string{"hello", strconv.Itoa(n)}, timed: true, figures: []string{"job wall time (ms)"}})
	}
	return gs
}

// run runs prog and returns its figures, or with timed the job's wall
// time in milliseconds.
func run(prog string, args, env []string, timed bool, parse func(string) map[string]float64) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = append(append(os.Environ(), "GASNET_SPAWNFN=L"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v\n%s", prog, strings.Join(args, " "), err, tail(out.String()))
	}
	if timed {
		return map[string]float64{"job wall time (ms)": float64(d.Microseconds()) / 1000}, nil
	}
	m := parse(out.String())
	if len(m) == 0 {
		return nil, fmt.Errorf("%s %s: no figure in its output:\n%s", prog, strings.Join(args, " "), tail(out.String()))
	}
	return m, nil
}

// mebi and kibi are 2^20 and 2^10 bytes in MB of 10^6 bytes.
const (
	mebi = 1 << 20 / 1e6
	kibi = 1 << 10 / 1e6
)

var (
	reAM      = regexp.MustCompile(`(?m)^([A-K]):\s+(\d*)\s*(AM\w+)\s+([\w-]+)\s+([\w-]+)\s+(\w+)\s*:\s+[\d.]+ sec\s+([\d.]+) us(?:\s+([\d.]+) MB/s)?`)
	reRMA     = regexp.MustCompile(`(?m)^[A-Z]:\s+\d+ -\s+(\d+) byte :\s+(\d+) iters, (?:latency\s+(\d+) us total,\s+[\d.]+ us ave\.|throughput\s+([\d.]+) ([KM])B/sec) \((\w+)Blocking`)
	reBarrier = regexp.MustCompile(`Avg ([\w. ]+) Barrier latency:\s+([\d.]+) us`)
	// testcollperf's blocking all-reduce of one int.
	reReduceAll = regexp.MustCompile(`(?m)^[A-Z]: \d+> \S+ reduce_all sync_mode: .* size: 4 bytes time: ([\d.]+) us`)
)

// gasnetAM reads GASNet's testam: sections A (short ping-pong), B (medium
// round trips), D (medium flood), G (long round trips), I (long flood).
// Its "MB/s" are of 2^20 bytes (tests/testam.c divides by 1024*1024);
// the floods are returned in MB/s of 10^6 bytes, as ours prints them.
func gasnetAM(out string) map[string]float64 {
	f := map[string]float64{}
	for _, m := range reAM.FindAllStringSubmatch(out, -1) {
		sec, size, pat, rr, us, mbs := m[1], m[2], m[4], m[6], num(m[7]), num(m[8])
		switch {
		case sec == "A" && pat == "ping-pong" && rr == "ReqRep":
			f[amFigures[0]] = us
		case sec == "B" && size == "8":
			f[amFigures[1]] = us
		case sec == "G" && size == "65000":
			f[amFigures[2]] = us
		case sec == "D" && size == "65000":
			f[amFigures[3]] = mbs * mebi
		case sec == "I" && size == "65000":
			f[amFigures[4]] = mbs * mebi
		}
	}
	return f
}

// oursAM reads testam's lines: "NAME SIZE B ITERS iters VALUE unit [MB/s]".
func oursAM(out string) map[string]float64 {
	f := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		p := strings.Fields(l)
		if len(p) < 6 {
			continue
		}
		switch name, size := p[0], p[1]; {
		case name == "short_rtt":
			f[amFigures[0]] = num(p[5])
		case name == "medium_rtt" && size == "8":
			f[amFigures[1]] = num(p[5])
		case name == "long_rtt" && size == "65000":
			f[amFigures[2]] = num(p[5])
		case name == "medium_flood" && size == "65000":
			f[amFigures[3]] = num(p[len(p)-2])
		case name == "long_flood" && size == "65000":
			f[amFigures[4]] = num(p[len(p)-2])
		}
	}
	return f
}

// rmaName names a Put or Get figure of size bytes: latency for 8 bytes,
// bandwidth for 1 MiB.
func rmaName(op string, size int) string {
	if size >= 1<<20 {
		return fmt.Sprintf("%s 1 MiB (MB/s)", op)
	}
	return fmt.Sprintf("%s %d B (µs)", op, size)
}

// gasnetRMA reads testsmall's and testlarge's section A: blocking Put and
// Get latency (its "us total" over its iterations: "us ave." is rounded
// to the nanosecond) and throughput ("MB/sec" of 2^20 bytes, or "KB/sec"
// of 2^10), in MB/s of 10^6 bytes.
func gasnetRMA(out string) map[string]float64 {
	f := map[string]float64{}
	for _, m := range reRMA.FindAllStringSubmatch(out, -1) {
		size, _ := strconv.Atoi(m[1])
		op := strings.ToLower(m[6])
		switch {
		case m[3] != "":
			if iters := num(m[2]); iters > 0 {
				f[rmaName(op, size)] = num(m[3]) / iters
			}
		case m[5] == "M":
			f[rmaName(op, size)] = num(m[4]) * mebi
		default:
			f[rmaName(op, size)] = num(m[4]) * kibi
		}
	}
	return f
}

// oursRMA reads testam -rma's lines: "put SIZE B ITERS iters US µs/msg
// MBPS MB/s". A latency is US or SIZE/MBPS, whichever its printing rounds
// less: US has four decimals (too few for a Put of a few nanoseconds),
// MBPS one (too few at a few MB/s, as 8 bytes over UDP).
func oursRMA(out string) map[string]float64 {
	f := map[string]float64{}
	for _, l := range strings.Split(out, "\n") {
		p := strings.Fields(l)
		if len(p) < 9 || (p[0] != "put" && p[0] != "get") {
			continue
		}
		size, _ := strconv.Atoi(p[1])
		us, mbps := num(p[5]), num(p[7])
		switch {
		case size >= 1<<20:
			f[rmaName(p[0], size)] = mbps
		case mbps > 0 && 0.05/mbps < 0.00005/us:
			f[rmaName(p[0], size)] = float64(size) / mbps
		case us > 0:
			f[rmaName(p[0], size)] = us
		}
	}
	return f
}

// gasnetBarrier reads testbarrier: the fastest of its barriers (named,
// anonymous, mixed, unnamed, GEX blocking and non-blocking), the best
// GASNet does.
func gasnetBarrier(out string) map[string]float64 {
	return fastest(reBarrier, 2, out, "barrier (µs)")
}

// fastest is the figure name: the least of group i of re's matches in
// out, or none where it matches nothing.
func fastest(re *regexp.Regexp, i int, out, name string) map[string]float64 {
	best := -1.0
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		if v := num(m[i]); best < 0 || v < best {
			best = v
		}
	}
	if best < 0 {
		return nil
	}
	return map[string]float64{name: best}
}

// allReduceFigure is a one-element all-reduce; againstBarrier is ours
// next to GASNet's fastest barrier.
const (
	allReduceFigure = "all-reduce (µs)"
	againstBarrier  = "all-reduce; GASNet's barrier (µs)"
)

// gasnetBarrierAs is gasnetBarrier's figure named name.
func gasnetBarrierAs(name string) func(string) map[string]float64 {
	return func(out string) map[string]float64 { return fastest(reBarrier, 2, out, name) }
}

// gasnetAllReduce reads testcollperf: the fastest of its blocking
// all-reduces (gex_Coll_ReduceToAllNB then a wait) over its sync modes,
// "X: 0> LOCAL/SINGLE-addr reduce_all sync_mode: (..) tree: .. size: 4
// bytes time: T us"; its reduce_all_NB lines time many in flight at once.
func gasnetAllReduce(out string) map[string]float64 {
	return fastest(reReduceAll, 1, out, allReduceFigure)
}

// oursLoops reads the fastest of testam -barrier's or -allreduce's six
// loops, as gasnetBarrier reads the fastest of testbarrier's: "NAME K
// iters X µs/op N ranks", NAME being name or name_nb, as the figure
// named figure.
func oursLoops(name, figure string) func(string) map[string]float64 {
	return func(out string) map[string]float64 {
		best := -1.0
		for _, l := range strings.Split(out, "\n") {
			p := strings.Fields(l)
			if len(p) < 5 || (p[0] != name && p[0] != name+"_nb") || p[4] != "µs/op" {
				continue
			}
			if v := num(p[3]); best < 0 || v < best {
				best = v
			}
		}
		if best < 0 {
			return nil
		}
		return map[string]float64{figure: best}
	}
}

func num(s string) float64 {
	v, _ := strconv.ParseFloat(s, 64)
	return v
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// spread says in how many rounds ours was ahead (ratios: ours / GASNet
// of each round, a rate's higher is better) and the range of the
// ratios: the medians' ratio alone hides how much one round's differ.
func spread(ratios []float64, higher bool) string {
	if len(ratios) == 0 {
		return "-"
	}
	ahead := 0
	for _, r := range ratios {
		if r <= 1 && !higher || r >= 1 && higher {
			ahead++
		}
	}
	return fmt.Sprintf("%d/%d, %.2f-%.2f", ahead, len(ratios), slices.Min(ratios), slices.Max(ratios))
}

func cell(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fig(median(v))
}

// fig is a figure with two decimals, or four below 0.1 (a few ns in µs).
func fig(v float64) string {
	if v < 0.1 {
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func tail(s string) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-8):], "\n")
}

func fail(group, who string, round int, err error) {
	fmt.Fprintf(os.Stderr, "gasnetbench: %s, %s, round %d: %v\n", group, who, round+1, err)
	os.Exit(1)
}

func nproc() int {
	out, err := exec.Command("nproc").Output()
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
