package main

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestParse reads each program's output, lines as the programs print them
// (GASNet-EX 2025.8.0's tests and ours), into the figures the table
// compares: the lines a figure comes from, and none of their neighbours.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		name  string
		parse func(string) map[string]float64
		out   string
		want  map[string]float64
	}{
		{"GASNet testam", gasnetAM, `
A:         AMShort     ping-pong roundtrip ReqRep:  0.000 sec    1.135 us
A:         AMShort     ping-pong roundtrip ReqReq:  0.000 sec    1.035 us
B:       4 AMMedium    ping-pong roundtrip ReqRep:  0.000 sec    0.510 us   14.960 MB/s
B:       8 AMMedium    ping-pong roundtrip ReqRep:  0.000 sec    0.505 us   30.215 MB/s
D:       8 AMMedium    flood     one-way   Req   :  0.000 sec    0.055 us  138.716 MB/s
D:   65000 AMMedium    flood     one-way   Req   :  0.000 sec    0.815 us  76059.915 MB/s
G:   65000 AMLong      ping-pong roundtrip ReqRep:  0.001 sec    3.595 us  34486.137 MB/s
I:       8 AMLong      flood     one-way   Req   :  0.000 sec    0.055 us  138.716 MB/s
I:   65000 AMLong      flood     one-way   Req   :  0.000 sec    0.645 us  96106.714 MB/s
`, map[string]float64{amFigures[0]: 1.135, amFigures[1]: 0.505, amFigures[2]: 3.595, amFigures[3]: 76059.915 * 1.048576, amFigures[4]: 96106.714 * 1.048576}},
		{"our testam", oursAM, `
short_rtt         0 B      200 iters        0.25 µs/rtt
medium_rtt        8 B      200 iters        0.24 µs/rtt
medium_rtt    65000 B      200 iters        1.88 µs/rtt
long_rtt          8 B      200 iters        0.28 µs/rtt
long_rtt      65000 B      200 iters        1.81 µs/rtt
medium_flood      8 B      200 iters        0.06 µs/msg       125.1 MB/s
medium_flood  65000 B      200 iters        0.65 µs/msg     99506.3 MB/s
long_flood        8 B      200 iters        0.07 µs/msg       115.5 MB/s
long_flood    65000 B      200 iters        0.64 µs/msg    101992.8 MB/s
`, map[string]float64{amFigures[0]: 0.25, amFigures[1]: 0.24, amFigures[2]: 1.81, amFigures[3]: 99506.3, amFigures[4]: 101992.8}},
		// testsmall's "us ave." rounds to the nanosecond: the latency is
		// its total over its iterations; testlarge gives KB/sec or MB/sec
		// of 2^10 and 2^20 bytes.
		{"GASNet testsmall", gasnetRMA, `
A:  0 -          8 byte :   20000 iters, latency         39 us total,     0.002 us ave. (PutBlocking latency)
A:  0 -          8 byte :   20000 iters, latency         37 us total,     0.002 us ave. (GetBlocking latency)
`, map[string]float64{"put 8 B (µs)": 39.0 / 20000, "get 8 B (µs)": 37.0 / 20000}},
		{"GASNet testlarge", gasnetRMA, `
A:   0 -    1048576 byte :      20 iters, throughput 64000000.000 KB/sec (PutBlocking throughput)
A:   0 -    1048576 byte :     200 iters, throughput 58000.500 MB/sec (GetBlocking throughput)
`, map[string]float64{"put 1 MiB (MB/s)": 64000000 * 1.024e-3, "get 1 MiB (MB/s)": 58000.5 * 1.048576}},
		{"our testam -rma", oursRMA, `
put               8 B     2000 iters        0.00 µs/msg      2342.6 MB/s
get               8 B     2000 iters        0.00 µs/msg      2503.9 MB/s
put          1048576 B     2000 iters       15.99 µs/msg     65565.2 MB/s
get          1048576 B     2000 iters       15.63 µs/msg     67086.9 MB/s
`, map[string]float64{"put 8 B (µs)": 8 / 2342.6, "get 8 B (µs)": 8 / 2503.9, "put 1 MiB (MB/s)": 65565.2, "get 1 MiB (MB/s)": 67086.9}},
		// Over UDP, 8 bytes move at about 1 MB/s: the µs figure is the
		// precise one.
		{"our testam -rma over UDP", oursRMA, `
put               8 B     2000 iters     10.4321 µs/msg         0.8 MB/s
get               8 B     2000 iters      9.0417 µs/msg         0.9 MB/s
`, map[string]float64{"put 8 B (µs)": 10.4321, "get 8 B (µs)": 9.0417}},
		{"GASNet testbarrier: the fastest of its six", gasnetBarrier, `
Total time:    0.000 sec  Avg Named Barrier latency:    0.475 us
Total time:    0.000 sec  Avg Anon. Barrier latency:    0.475 us
Total time:    0.000 sec  Avg Mixed Barrier latency:    0.485 us
Total time:    0.000 sec  Avg Uname Barrier latency:    0.475 us
Total time:    0.000 sec  Avg GEX Blocking Barrier latency:    0.185 us
Total time:    0.000 sec  Avg GEX NB Barrier latency:    0.565 us
`, map[string]float64{"barrier (µs)": 0.185}},
		{"GASNet testbarrier, for our all-reduce", gasnetBarrierAs(againstBarrier), `
Total time:    0.000 sec  Avg Named Barrier latency:    19.5 us
Total time:    0.000 sec  Avg GEX NB Barrier latency:    17.25 us
`, map[string]float64{againstBarrier: 17.25}},
		{"GASNet testcollperf: the fastest blocking all-reduce", gasnetAllReduce, `
A: 0> LOCAL/SINGLE-addr reduce sync_mode: (no/no) tree: (null) size: 4 bytes time: 0.398 us
A: 0> LOCAL/SINGLE-addr reduce_all sync_mode: (no/no) tree: (null) size: 4 bytes time: 86.7692 us
A: 0> LOCAL/SINGLE-addr reduce_all_NB sync_mode: (no/no) tree: (null) size: 4 bytes time: 38.9897 us
B: 0> LOCAL/SINGLE-addr reduce_all sync_mode: (no/my) tree: (null) size: 4 bytes time: 83.4385 us
B: 0> LOCAL/SINGLE-addr reduce_all sync_mode: (no/my) tree: (null) size: 8 bytes time: 1.5 us
`, map[string]float64{allReduceFigure: 83.4385}},
		{"our testam -allreduce: the fastest of its six", oursLoops("allreduce", allReduceFigure), `
allreduce        390 iters       38.31 µs/op  16 ranks
allreduce_nb     390 iters       24.42 µs/op  16 ranks
allreduce        390 iters       27.61 µs/op  16 ranks
barrier          390 iters       20.33 µs/op  16 ranks
allreduce        390 iters       25.34 µs/op  16 ranks
allreduce_nb     390 iters       33.66 µs/op  16 ranks
`, map[string]float64{allReduceFigure: 24.42}},
		{"our testam -coll is not read as loops", oursLoops("allreduce", allReduceFigure), `
allreduce         8 B      390 iters       25.42 µs/op    0.91 rtts  16 ranks  (rtt 27.85 µs)
`, nil},
		{"our testam -barrier: the fastest of its six", oursLoops("barrier", "barrier (µs)"), `
barrier         1562 iters       13.25 µs/op  8 ranks
barrier_nb      1562 iters       25.52 µs/op  8 ranks
barrier         1562 iters        6.15 µs/op  8 ranks
barrier_nb      1562 iters        5.98 µs/op  8 ranks
barrier         1562 iters        6.50 µs/op  8 ranks
barrier_nb      1562 iters       12.64 µs/op  8 ranks
`, map[string]float64{"barrier (µs)": 5.98}},
		{"our testam -barrier, no loop", oursLoops("barrier", "barrier (µs)"), "short_rtt         0 B     1000 iters        0.41 µs/rtt\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, c.parse(c.out), cmpopts.EquateApprox(1e-9, 0)); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestMedian: the middle figure of an odd count, the mean of the two
// middle ones of an even count.
func TestMedian(t *testing.T) {
	for _, c := range []struct {
		v    []float64
		want float64
	}{{[]float64{3, 1, 2}, 2}, {[]float64{4, 1, 3, 2}, 2.5}, {[]float64{7}, 7}} {
		if got := median(c.v); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("median(%v) = %v, want %v", c.v, got, c.want)
		}
	}
}

// TestSpread: the rounds ahead count each ratio in its figure's direction,
// a tie as ahead, and the range is the ratios' least and greatest.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		ratios []float64
		higher bool
		want   string
	}{
		{[]float64{0.9, 1.2, 1.0, 0.7, 1.1}, false, "3/5, 0.70-1.20"},
		{[]float64{0.9, 1.2, 1.0, 0.7, 1.1}, true, "3/5, 0.70-1.20"},
		{[]float64{0.5, 0.6}, true, "0/2, 0.50-0.60"},
		{nil, false, "-"},
	} {
		if got := spread(c.ratios, c.higher); got != c.want {
			t.Errorf("spread(%v, higher %v) = %q, want %q", c.ratios, c.higher, got, c.want)
		}
	}
}
