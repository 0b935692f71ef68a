package console

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/binomial"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/worker"
)

// The bootstrap load test (TestBootstrapScale) runs this test binary three
// ways: as the test, as a console (envScaleRole=console) whose C spawner's
// launcher is this binary again (envScaleRole=sim), which simulates N
// workers: one goroutine and one connection each, with a fake UDP address.
const (
	envScaleRole = "UDPCONDUIT_SCALE_ROLE"
	envScaleN    = "UDPCONDUIT_SCALE_N"
	// envScaleProfile names a file for the console's CPU profile (go tool
	// pprof), to see where its time goes.
	envScaleProfile = "UDPCONDUIT_SCALE_CPUPROFILE"
)

func TestMain(m *testing.M) {
	switch os.Getenv(envScaleRole) {
	case "console":
		os.Exit(scaleConsole())
	case "sim":
		os.Exit(scaleSim())
	}
	os.Exit(m.Run())
}

// scaleConsole is a job's console, as a program's would be.
func scaleConsole() int {
	cfg, src, err := envconf.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv(envScaleN))
	if path := os.Getenv(envScaleProfile); path != "" {
		f, err := os.Create(path)
		if err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	return Run(cfg, src, n, os.Args[0], nil)
}

// simStats is what the simulated workers report on their last line.
type simStats struct {
	Workers int   `json:"workers"`
	Bytes   int64 `json:"bytes"` // everything the console sent them
}

// scaleSim runs N simulated workers against the console named by the
// worker marker: each joins with a fake UDP address (10.x.y.z:9, 16 per
// host), receives its welcome, takes the table through a simulated relay
// tree (every rank's table is its tree parent's; rank 0's comes from the
// console), checks it against the addresses joined, passes the startup
// barrier, calls Exit(0) and waits for the console's Terminate.
func scaleSim() int {
	n, _ := strconv.Atoi(os.Getenv(envScaleN))
	secret, err := worker.ReadSecret()
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim:", err)
		return 1
	}
	hexSecret := []byte(hex.EncodeToString(secret))
	addr := os.Getenv(ctl.EnvMaster)
	type simWorker struct {
		conn net.Conn
		r    *bufio.Reader
		udp  string
		w    ctl.Welcome
	}
	ws := make([]*simWorker, n)
	var received atomic.Int64
	dials := make(chan struct{}, 256) // dials at once
	errs := make(chan error, n)
	var welcomed sync.WaitGroup
	for i := range n {
		welcomed.Go(func() {
			dials <- struct{}{}
			c, err := net.DialTimeout("tcp", addr, time.Minute)
			<-dials
			if err != nil {
				errs <- err
				return
			}
			hello := ctl.NewHello(hexSecret)
			if err := ctl.WriteFrame(c, ctl.FrameHello, hello); err != nil {
				errs <- err
				return
			}
			c = ctl.Seal(c, c, hexSecret, hello.Nonce, false)
			s := &simWorker{conn: c, r: bufio.NewReader(c), udp: fmt.Sprintf("10.%d.%d.%d:9", i>>16, i>>8&255, i&255)}
			ws[i] = s
			join := ctl.Join{Rank: -1, Index: i, Host: fmt.Sprintf("simhost%d", i/16), Name: "sim", PID: os.Getpid(), UDP: s.udp}
			if err := ctl.WriteFrame(c, ctl.FrameJoin, join); err != nil {
				errs <- err
				return
			}
			typ, body, err := ctl.ReadFrame(s.r)
			received.Add(int64(5 + len(body)))
			if err == nil && (typ != ctl.FrameWelcome || ctl.DecodeBody(body, &s.w) != nil) {
				err = fmt.Errorf("worker %d: frame %d instead of a welcome", i, typ)
			}
			if err != nil {
				errs <- err
			}
		})
	}
	welcomed.Wait()
	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "sim:", err)
		return 1
	default:
	}
	// The relay, simulated: rank 0 has the table; every other rank gets
	// its parent's (parents have lower ranks), and must find there the
	// addresses its welcome named.
	byRank := make([]*simWorker, n)
	for _, s := range ws {
		if s.w.Rank < 0 || s.w.Rank >= n || byRank[s.w.Rank] != nil || s.w.Size != n {
			fmt.Fprintf(os.Stderr, "sim: bad welcome: rank %d of %d\n", s.w.Rank, s.w.Size)
			return 1
		}
		byRank[s.w.Rank] = s
	}
	tab, err := ctl.DecodeTable(byRank[0].w.Table, n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sim: rank 0's table:", err)
		return 1
	}
	tables := make([][]netip.AddrPort, n)
	tables[0] = tab.Addrs
	for r := 1; r < n; r++ {
		tables[r] = tables[binomial.Parent(r)]
		for k, a := range byRank[r].w.Peers {
			if tables[r][k].String() != a {
				fmt.Fprintf(os.Stderr, "sim: rank %d: the console says rank %d is %s, the relayed table %s\n", r, k, a, tables[r][k])
				return 1
			}
		}
	}
	for r, s := range byRank {
		if len(tables[r]) != n || tables[r][r].String() != s.udp {
			fmt.Fprintf(os.Stderr, "sim: rank %d joined as %s; the table says otherwise\n", r, s.udp)
			return 1
		}
	}
	// Every rank calls Exit(0), as a program's ranks do at its end; the
	// console answers each with Terminate.
	var done sync.WaitGroup
	for _, s := range ws {
		done.Go(func() {
			defer s.conn.Close()
			if err := ctl.WriteFrame(s.conn, ctl.FrameExit, ctl.Code{Code: 0}); err != nil {
				errs <- err
				return
			}
			for {
				typ, body, err := ctl.ReadFrame(s.r)
				if err != nil {
					errs <- fmt.Errorf("rank %d: %w", s.w.Rank, err)
					return
				}
				received.Add(int64(5 + len(body)))
				switch typ {
				case ctl.FramePing:
					ctl.WriteFrame(s.conn, ctl.FramePong, ctl.NoBody{})
				case ctl.FrameTerminate:
					return
				}
			}
		})
	}
	done.Wait()
	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "sim:", err)
		return 1
	default:
	}
	b, _ := json.Marshal(simStats{Workers: n, Bytes: received.Load()})
	fmt.Println(string(b))
	return 0
}

// scaleRun is one bootstrap of n simulated workers: the console's peak
// resident memory (VmHWM), the bytes it sent and the wall time.
type scaleRun struct {
	n       int
	peakKiB int64
	bytes   int64
	wall    time.Duration
}

// runScale runs a console of n simulated workers and measures it.
func runScale(t *testing.T, n int) scaleRun {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envScaleRole+"=console", envScaleN+"="+strconv.Itoa(n),
		"GASNET_SPAWNFN=C", "GASNET_CSPAWN_CMD=env "+envScaleRole+"=sim %C",
		"GASNET_CONNECT_TIMEOUT=2m", "GASNET_LIVENESS_TIMEOUT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The console's peak resident memory, read from /proc while it runs
	// (its rusage would count the simulator, its child, too).
	var peak atomic.Int64
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if kib := vmHWM(cmd.Process.Pid); kib > peak.Load() {
				peak.Store(kib)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	err := cmd.Wait()
	wall := time.Since(start)
	close(stop)
	sampler.Wait()
	if err != nil {
		t.Fatalf("N=%d: console: %v\nstderr:\n%s", n, err, stderr.String())
	}
	var st simStats
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &st); err != nil || st.Workers != n {
		t.Fatalf("N=%d: the simulator's report %q: %v\nstderr:\n%s", n, stdout.String(), err, stderr.String())
	}
	if peak.Load() == 0 {
		t.Fatalf("N=%d: no reading of the console's memory", n)
	}
	return scaleRun{n: n, peakKiB: peak.Load(), bytes: st.Bytes, wall: wall}
}

// vmHWM returns the peak resident set of process pid in KiB (0 when it
// cannot be read, as once the process has ended).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kib, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kib
		}
	}
	return 0
}

// TestBootstrapScale: 1024, 4096 and 16384 simulated workers (one
// connection each, in one process) join one console, get the table
// through the relay tree (simulated) and exit. The bytes the console sends
// must grow linearly (a count: a doubling of N may multiply them by at
// most 2.5), and so must its peak memory, within the same bound; the wall
// time is logged, not judged (a figure of the machine: make scale prints
// it against bare processes). Other tests may share the machine: when a
// slope is over, the three runs are made again and each figure is the
// smaller of its two.
func TestBootstrapScale(t *testing.T) {
	if testing.Short() {
		t.Skip("a load test of about 10 s: run without -short (make test does)")
	}
	sizes := []int{1024, 4096, 16384}
	runs := make([]scaleRun, len(sizes))
	for attempt := 1; ; attempt++ {
		for i, n := range sizes {
			r := runScale(t, n)
			t.Logf("N=%5d: console peak RSS %6.1f MiB, sent %6.2f MiB (%4.0f B/worker), wall %v",
				n, float64(r.peakKiB)/1024, float64(r.bytes)/(1<<20), float64(r.bytes)/float64(n), r.wall.Round(time.Millisecond))
			if attempt == 1 {
				runs[i] = r
			} else {
				runs[i] = scaleRun{n, min(r.peakKiB, runs[i].peakKiB), min(r.bytes, runs[i].bytes), min(r.wall, runs[i].wall)}
			}
		}
		over := scaleSlopes(runs)
		if len(over) == 0 {
			return
		}
		if attempt == 2 {
			for _, o := range over {
				t.Error(o)
			}
			return
		}
		t.Logf("again (%s)", strings.Join(over, "; "))
	}
}

// scaleSlopes says which of the byte and memory figures of runs (by
// increasing N) grow more than 2.5× per doubling of N.
func scaleSlopes(runs []scaleRun) []string {
	var over []string
	for i := 1; i < len(runs); i++ {
		a, b := runs[i-1], runs[i]
		doublings := math.Log2(float64(b.n) / float64(a.n))
		for _, m := range []struct {
			what string
			x, y float64
		}{
			{"peak memory", float64(a.peakKiB), float64(b.peakKiB)},
			{"bytes sent", float64(a.bytes), float64(b.bytes)},
		} {
			if per := math.Pow(m.y/m.x, 1/doublings); per > 2.5 {
				over = append(over, fmt.Sprintf("N %d → %d: the console's %s grew %.2f× per doubling of N (%.3g → %.3g); linear is 2×, the limit 2.5×", a.n, b.n, m.what, per, m.x, m.y))
			}
		}
	}
	return over
}
