package worker

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// hubRun is a hub of n ranks on loopback, with what it said and the code
// it killed the job with.
type hubRun struct {
	h      *hub
	secret []byte
	mu     sync.Mutex
	said   []string
	killed int
	left   []int // the ranks handed to kill
	// welcomeErr, when set, is what the hub's welcomes returns.
	welcomeErr error
}

func startHub(t *testing.T, n int, exitTimeout, connectTimeout, liveness time.Duration) *hubRun {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &hubRun{secret: []byte("0123456789abcdef"), killed: -1}
	r.h = newHub(ln, r.secret, n, exitTimeout, connectTimeout, liveness,
		func(s string) { r.mu.Lock(); r.said = append(r.said, s); r.mu.Unlock() },
		func(joins []ctl.Join) ([]ctl.Welcome, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.welcomeErr != nil {
				return nil, r.welcomeErr
			}
			var udp []string
			for _, j := range joins {
				udp = append(udp, j.UDP)
			}
			wels := make([]ctl.Welcome, len(joins))
			for i := range joins {
				wels[i] = ctl.Welcome{Rank: i, Size: len(joins), Table: []byte(strings.Join(udp, " "))}
			}
			return wels, nil
		},
		func(code int, left []ctl.Join) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.killed = code
			for _, j := range left {
				r.left = append(r.left, j.Rank)
			}
		})
	go r.h.serve()
	t.Cleanup(r.h.close)
	return r
}

// taken reports whether a connection of rank has been taken.
func (r *hubRun) taken(rank int) bool {
	r.h.tmu.Lock()
	defer r.h.tmu.Unlock()
	return r.h.taken[rank]
}

func (r *hubRun) lines() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.said...), r.killed
}

// fakeRank is a rank's end of its connection to the hub.
type fakeRank struct {
	c net.Conn
	r *bufio.Reader
}

func (r *hubRun) connect(t *testing.T, rank int, secret []byte) *fakeRank {
	t.Helper()
	c, err := net.Dial("tcp", r.h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	hello := ctl.NewHello(secret)
	if err := ctl.WriteFrame(c, ctl.FrameHello, hello); err != nil {
		t.Fatal(err)
	}
	c = ctl.Seal(c, c, secret, hello.Nonce, false)
	if err := ctl.WriteFrame(c, ctl.FrameJoin, ctl.Join{Rank: rank, Index: rank, PID: 100 + rank, Name: "h", UDP: fmt.Sprintf("127.0.0.1:%d", 9000+rank)}); err != nil {
		t.Fatal(err)
	}
	return &fakeRank{c: c, r: bufio.NewReader(c)}
}

// terminated returns the code of the Terminate that came within d, scaled
// (testbound), (after the Welcome, if one came), or -1 when none did and the connection is
// still open, or -2 when it ended. A timeout spoils the connection's
// reader: a test's last read.
func (f *fakeRank) terminated(d time.Duration) int {
	f.c.SetReadDeadline(time.Now().Add(testbound.Scale(d)))
	typ, body, err := ctl.ReadFrame(f.r)
	if err == nil && typ == ctl.FrameWelcome {
		typ, body, err = ctl.ReadFrame(f.r)
	}
	switch {
	case err != nil && strings.Contains(err.Error(), "timeout"):
		return -1
	case err != nil:
		return -2
	case typ != ctl.FrameTerminate:
		return -3
	}
	return ctl.DecodeExit(body).Code
}

func waitDrained(t *testing.T, h *hub) {
	t.Helper()
	select {
	case <-h.Drained():
	case <-time.After(testbound.For(t, 10*time.Second)):
		t.Fatalf("the hub did not drain within %v", testbound.For(t, 10*time.Second))
	}
}

// TestHubExit: the first Exit is every rank's code; once the others have
// closed their connections the hub drains, and it says nothing.
func TestHubExit(t *testing.T) {
	r := startHub(t, 3, 5*time.Second, 5*time.Second, 0)
	ranks := []*fakeRank{r.connect(t, 0, r.secret), r.connect(t, 1, r.secret), r.connect(t, 2, r.secret)}
	if err := ctl.WriteFrame(ranks[2].c, ctl.FrameExit, ctl.Code{Code: 3}); err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, f := range ranks {
		got = append(got, f.terminated(5*time.Second))
	}
	if d := cmp.Diff([]int{3, 3, 3}, got); d != "" {
		t.Errorf("Terminate codes (-want +got):\n%s", d)
	}
	ranks[1].c.Close()
	ranks[2].c.Close()
	waitDrained(t, r.h)
	if said, killed := r.lines(); len(said) != 0 || killed != -1 {
		t.Errorf("said %q, killed with %d; want nothing", said, killed)
	}
}

// TestHubWelcome: the hub sends each rank its Welcome, made from every
// rank's Join, once the last has joined; when the Joins cannot make a job
// (welcomes fails) it aborts the job with 1, saying why, and the ranks are
// told 1 instead.
func TestHubWelcome(t *testing.T) {
	r := startHub(t, 3, 5*time.Second, 5*time.Second, 0)
	ranks := make([]*fakeRank, 3)
	for _, i := range []int{2, 0, 1} {
		ranks[i] = r.connect(t, i, r.secret)
		time.Sleep(20 * time.Millisecond) // in this order
	}
	for i, f := range ranks {
		f.c.SetReadDeadline(time.Now().Add(testbound.For(t, 5*time.Second)))
		typ, body, err := ctl.ReadFrame(f.r)
		var w ctl.Welcome
		if err != nil || typ != ctl.FrameWelcome || ctl.DecodeBody(body, &w) != nil {
			t.Fatalf("rank %d: frame %d (%v), want a Welcome", i, typ, err)
		}
		want := ctl.Welcome{Rank: i, Size: 3, Table: []byte("127.0.0.1:9000 127.0.0.1:9001 127.0.0.1:9002"), Env: map[string]string{}}
		if d := cmp.Diff(want, w); d != "" {
			t.Errorf("rank %d's Welcome (-want +got):\n%s", i, d)
		}
	}

	r = startHub(t, 2, 5*time.Second, 5*time.Second, 0)
	r.mu.Lock()
	r.welcomeErr = errors.New("rank 1 (pid 101 on h) sent rank 0 a malformed UDP address")
	r.mu.Unlock()
	a, b := r.connect(t, 0, r.secret), r.connect(t, 1, r.secret)
	for i, f := range []*fakeRank{a, b} {
		if got := f.terminated(5 * time.Second); got != 1 {
			t.Errorf("rank %d: Terminate %d, want 1", i, got)
		}
	}
	if said, _ := r.lines(); len(said) != 1 || !strings.Contains(said[0], "rank 1 (pid 101 on h) sent rank 0 a malformed UDP address") {
		t.Errorf("said %q; want the welcomes' error", said)
	}
}

// TestHubNoPingBeforeWelcome: a rank waiting for its Welcome, the others
// not all joined, is sent no ping (it would take one for a malformed
// Welcome): the connect timeout, not liveness, ends the wait, naming the
// rank that did not connect.
func TestHubNoPingBeforeWelcome(t *testing.T) {
	r := startHub(t, 2, 5*time.Second, time.Second, 100*time.Millisecond)
	a := r.connect(t, 0, r.secret)
	if got := a.terminated(5 * time.Second); got != 1 {
		t.Errorf("rank 0: %d, want Terminate 1 as its first frame", got)
	}
	if said, _ := r.lines(); len(said) != 1 || !strings.Contains(said[0], "rank 1 did not connect to rank 0 within 1s of the launcher's fence (GASNET_CONNECT_TIMEOUT=1s") {
		t.Errorf("said %q; want one line naming rank 1", said)
	}
}

// TestHubRankGone: a rank whose connection ends without Exit while the
// others run (a crash, a return from main) aborts the job with 1 after
// the exit timeout, named in one line; one that is not heard from after
// its Terminate is killed through the launcher.
func TestHubRankGone(t *testing.T) {
	r := startHub(t, 3, 200*time.Millisecond, 5*time.Second, 0)
	ranks := []*fakeRank{r.connect(t, 0, r.secret), r.connect(t, 1, r.secret), r.connect(t, 2, r.secret)}
	start := time.Now()
	ranks[1].c.Close()
	for _, i := range []int{0, 2} {
		if got := ranks[i].terminated(5 * time.Second); got != 1 {
			t.Errorf("rank %d: Terminate %d, want 1", i, got)
		}
	}
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("the others told %v after rank 1 ended, before the exit timeout of 200ms", d)
	}
	waitDrained(t, r.h) // rank 2 stays: killed after the exit timeout
	said, killed := r.lines()
	if len(said) != 1 || !strings.Contains(said[0], "rank 1 ended (its status is the launcher's to tell) without calling conduit.Finalize or conduit.Exit while 2 other ranks still run") {
		t.Errorf("said %q; want one line naming rank 1", said)
	}
	if killed != 1 {
		t.Errorf("rank 2, not gone after its Terminate, killed with %d; want 1", killed)
	}
}

// TestHubStragglers: ranks left after the exit timeout that answer the
// hub's pings are waited for (their grace period ends them with the job's
// code; a kill would make the launcher's code the job's), GASNET_EXIT_TIMEOUT
// at a time; one that stops answering is killed, and so are ranks that
// answer but stay past maxProbes.
func TestHubStragglers(t *testing.T) {
	// Long enough for a pong to come back within it on a loaded host.
	const timeout = 400 * time.Millisecond
	// answer makes f answer every ping until stop is closed, and counts
	// the pings.
	answer := func(f *fakeRank, stop <-chan struct{}) *atomic.Int32 {
		var pings atomic.Int32
		go func() {
			for {
				f.c.SetReadDeadline(time.Now().Add(time.Minute))
				typ, _, err := ctl.ReadFrame(f.r)
				if err != nil {
					return
				}
				select {
				case <-stop:
					continue
				default:
				}
				if typ == ctl.FramePing {
					pings.Add(1)
					ctl.WriteFrame(f.c, ctl.FramePong, ctl.NoBody{})
				}
			}
		}()
		return &pings
	}
	killedAfter := func(r *hubRun) (time.Duration, int) {
		start := time.Now()
		for range 1000 {
			if _, killed := r.lines(); killed != -1 {
				return time.Since(start), killed
			}
			select {
			case <-r.h.Drained():
				_, killed := r.lines() // kill comes before the drain
				return time.Since(start), killed
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Fatal("the hub neither drained nor killed within 10 s")
		return 0, 0
	}

	// Rank 1 answers and ends by itself after three exit timeouts: no kill.
	r := startHub(t, 2, timeout, 5*time.Second, 0)
	a, b := r.connect(t, 0, r.secret), r.connect(t, 1, r.secret)
	answer(a, nil)
	if err := ctl.WriteFrame(a.c, ctl.FrameExit, ctl.Code{Code: 5}); err != nil {
		t.Fatal(err)
	}
	answer(b, nil)
	closeB := b.c.Close
	time.AfterFunc(5*timeout/2, func() { closeB() })
	if _, killed := killedAfter(r); killed != -1 {
		t.Errorf("a rank that answered its pings and then ended was killed with %d", killed)
	}

	// Rank 1 answers the first ping, then stops answering: killed.
	r = startHub(t, 2, timeout, 5*time.Second, 0)
	a, b = r.connect(t, 0, r.secret), r.connect(t, 1, r.secret)
	answer(a, nil)
	stop := make(chan struct{})
	pings := answer(b, stop)
	time.AfterFunc(timeout+timeout/2, func() { close(stop) })
	if err := ctl.WriteFrame(a.c, ctl.FrameExit, ctl.Code{Code: 5}); err != nil {
		t.Fatal(err)
	}
	if _, killed := killedAfter(r); killed != 5 {
		t.Errorf("a rank that stopped answering: killed with %d, want 5", killed)
	}
	if n := pings.Load(); n < 1 {
		t.Errorf("rank 1 answered %d pings before it stopped, want 1", n)
	}

	// Rank 1 answers for ever: killed after maxProbes.
	r = startHub(t, 2, timeout, 5*time.Second, 0)
	a, b = r.connect(t, 0, r.secret), r.connect(t, 1, r.secret)
	answer(a, nil)
	pings = answer(b, nil)
	if err := ctl.WriteFrame(a.c, ctl.FrameExit, ctl.Code{Code: 5}); err != nil {
		t.Fatal(err)
	}
	if _, killed := killedAfter(r); killed != 5 {
		t.Errorf("a rank that answers but never ends: killed with %d, want 5", killed)
	}
	if n := pings.Load(); n != maxProbes {
		t.Errorf("%d pings before the kill, want %d", n, maxProbes)
	}
}

// TestHubAllReturn: every rank ending without Exit at once (all return
// from main) is no abort.
func TestHubAllReturn(t *testing.T) {
	r := startHub(t, 2, 200*time.Millisecond, 5*time.Second, 0)
	a, b := r.connect(t, 0, r.secret), r.connect(t, 1, r.secret)
	b.c.Close()
	a.c.Close()
	time.Sleep(500 * time.Millisecond)
	if said, killed := r.lines(); len(said) != 0 || killed != -1 {
		t.Errorf("said %q, killed with %d; want nothing", said, killed)
	}
}

// TestHubNeverConnects: a rank that has not connected within the connect
// timeout aborts the job with 1, named with every other such rank; a connection without the job's
// secret, or a second one for a rank, does not count.
func TestHubNeverConnects(t *testing.T) {
	r := startHub(t, 4, time.Second, 300*time.Millisecond, 0)
	a := r.connect(t, 0, r.secret)
	r.connect(t, 1, []byte("not the secret"))
	r.connect(t, 2, r.secret) // rank 3 never connects
	for !r.taken(0) {         // a's Join first, so that dup is the second
		time.Sleep(time.Millisecond)
	}
	dup := r.connect(t, 0, r.secret)
	if got := a.terminated(5 * time.Second); got != 1 {
		t.Errorf("rank 0: Terminate %d, want 1", got)
	}
	if got := dup.terminated(time.Second); got != -2 {
		t.Errorf("a second connection of rank 0: %d, want it closed (-2)", got)
	}
	said, _ := r.lines()
	if len(said) != 1 || !strings.Contains(said[0], "rank 1, rank 3 did not connect to rank 0 within 300ms of the launcher's fence (GASNET_CONNECT_TIMEOUT=300ms") {
		t.Errorf("said %q; want one line naming ranks 1 and 3", said)
	}
}

// TestHubLateJoin: a rank that connects after the job ended, and after
// every other rank had gone (rank 0 itself, slow to reach its hub), is
// told the job's code.
func TestHubLateJoin(t *testing.T) {
	r := startHub(t, 3, 5*time.Second, 5*time.Second, 0)
	b, c := r.connect(t, 1, r.secret), r.connect(t, 2, r.secret)
	if err := ctl.WriteFrame(c.c, ctl.FrameExit, ctl.Code{Code: 4}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []*fakeRank{b, c} {
		if got := f.terminated(5 * time.Second); got != 4 {
			t.Fatalf("Terminate %d, want 4", got)
		}
		f.c.Close()
	}
	waitDrained(t, r.h)
	if got := r.connect(t, 0, r.secret).terminated(5 * time.Second); got != 4 {
		t.Errorf("rank 0, connecting after the end: Terminate %d, want 4", got)
	}
}

// TestHubLiveness: a rank that answers no ping (stopped, its host gone)
// aborts the job after GASNET_LIVENESS_TIMEOUT, named, and is handed to
// kill; the ranks that answer are told 1.
func TestHubLiveness(t *testing.T) {
	r := startHub(t, 2, 5*time.Second, 5*time.Second, 400*time.Millisecond)
	a, b := r.connect(t, 0, r.secret), r.connect(t, 1, r.secret)
	// Rank 0 answers each ping; rank 1 reads them and answers none.
	go func() {
		for {
			typ, _, err := ctl.ReadFrame(a.r)
			if err != nil {
				return
			}
			if typ == ctl.FramePing {
				ctl.WriteFrame(a.c, ctl.FramePong, ctl.NoBody{})
			}
		}
	}()
	b.c.SetReadDeadline(time.Now().Add(testbound.For(t, 10*time.Second)))
	for {
		typ, body, err := ctl.ReadFrame(b.r)
		if err != nil {
			t.Fatalf("rank 1: %v before its Terminate", err)
		}
		if typ == ctl.FrameTerminate {
			if c := ctl.DecodeExit(body).Code; c != 1 {
				t.Errorf("rank 1: Terminate %d, want 1", c)
			}
			break
		}
	}
	said, killed := r.lines()
	for deadline := time.Now().Add(testbound.For(t, 5*time.Second)); killed == -1 && time.Now().Before(deadline); said, killed = r.lines() {
		time.Sleep(10 * time.Millisecond) // the kill follows the Terminates
	}
	r.mu.Lock()
	left := r.left
	r.mu.Unlock()
	if d := cmp.Diff([]int{0, 1}, left); d != "" {
		t.Errorf("ranks handed to kill (-want +got):\n%s", d)
	}
	if len(said) != 1 || !strings.Contains(said[0], "rank 1 (pid 101 on h) has not answered rank 0 for") || killed != 1 {
		t.Errorf("said %q, killed with %d; want one line naming rank 1, and 1", said, killed)
	}
}

// TestWaitRanks: waitRanks returns the ranks not up when the timeout
// passes, asking about one rank at a time (the first not up yet, then
// each once more at the end), and returns at once when every rank is up.
func TestWaitRanks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		asked := map[int]int{}
		missing := waitRanks([]int{1, 2, 3, 5}, time.Second, func(r int) bool {
			asked[r]++
			return r == 1 || r == 3 && time.Since(start) >= 100*time.Millisecond
		})
		if d := cmp.Diff([]int{2, 5}, missing); d != "" {
			t.Errorf("missing (-want +got):\n%s", d)
		}
		if el := time.Since(start); el != time.Second {
			t.Errorf("returned after %v, want the timeout, 1s", el)
		}
		// Rank 2, never up, is asked at 0, 0.5, 1.5 ms, then every 2 ms:
		// about 500 times in a second; the others once each.
		if asked[1] != 1 || asked[3] != 1 || asked[5] != 1 || asked[2] < 490 || asked[2] > 510 {
			t.Errorf("asked %v times; want rank 2 about 500 times, the others once", asked)
		}
		start = time.Now()
		if missing := waitRanks([]int{4, 6}, time.Minute, func(int) bool { return true }); len(missing) != 0 || time.Since(start) != 0 {
			t.Errorf("all up: %v missing after %v", missing, time.Since(start))
		}
	})
}

// TestNodeMissing: each run of a node's missing ranks is named once, by
// the rank up just above it, and a run at the node's end by its lowest
// rank up; a rank asks only about the one it waits for (the rank below
// it; for the lowest, the last) while it waits.
func TestNodeMissing(t *testing.T) {
	local := []int{3, 5, 7, 9}
	for _, c := range []struct {
		down []int // never up
		i    int   // the watcher, local[i]
		want []int // what it names
	}{
		{down: []int{7}, i: 0},
		{down: []int{7}, i: 1},
		{down: []int{7}, i: 3, want: []int{7}},
		{down: []int{9}, i: 0, want: []int{9}},
		{down: []int{7, 9}, i: 0, want: []int{7, 9}},
		{down: []int{3}, i: 1, want: []int{3}},
		{down: []int{3, 9}, i: 1, want: []int{3, 9}},
		{down: []int{3, 7, 9}, i: 1, want: []int{3, 7, 9}},
		{down: []int{3}, i: 2},
		{down: []int{3, 5}, i: 2, want: []int{3, 5}},
		{down: []int{3, 5}, i: 3},
		{down: []int{5}, i: 2, want: []int{5}},
		{down: []int{5}, i: 0},
		{down: []int{5, 9}, i: 0, want: []int{9}},
		{down: []int{5, 9}, i: 2, want: []int{5}},
		{down: []int{3, 5, 7}, i: 3, want: []int{3, 5, 7}},
		{down: []int{5, 7}, i: 3, want: []int{5, 7}},
		{i: 2},
		{i: 0},
	} {
		t.Run(fmt.Sprintf("%v-down-%d-watches", c.down, local[c.i]), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				asked := map[int]int{}
				got := nodeMissing(local, c.i, time.Second, func(r int) bool {
					asked[r]++
					return !slices.Contains(c.down, r)
				})
				if d := cmp.Diff(c.want, got); d != "" {
					t.Errorf("ranks %v down, watched by %d: named (-want +got):\n%s", c.down, local[c.i], d)
				}
				waited := local[len(local)-1]
				if c.i > 0 {
					waited = local[c.i-1]
				}
				if slices.Contains(c.down, waited) && asked[waited] < 400 {
					t.Errorf("ranks %v down, watched by %d: asked %v; want %d asked until the timeout", c.down, local[c.i], asked, waited)
				}
				for r, n := range asked {
					if r != waited && n > 1 {
						t.Errorf("ranks %v down, watched by %d: asked about %d %d times, want at most once", c.down, local[c.i], r, n)
					}
				}
			})
		})
	}
}

// TestNodeMissingOnce: for every set of missing ranks of a node of 5 but
// all of them, the ranks up together name each missing rank exactly once.
func TestNodeMissingOnce(t *testing.T) {
	local := []int{0, 1, 2, 3, 4}
	for set := 1; set < 1<<len(local)-1; set++ {
		down := func(r int) bool { return set&(1<<r) != 0 }
		named := map[int]int{}
		synctest.Test(t, func(t *testing.T) {
			for i, r := range local {
				if !down(r) {
					for _, m := range nodeMissing(local, i, time.Second, func(q int) bool { return !down(q) }) {
						named[m]++
					}
				}
			}
		})
		for _, r := range local {
			if want := map[bool]int{true: 1}[down(r)]; named[r] != want {
				t.Errorf("missing set %05b: rank %d named %d times, want %d", set, r, named[r], want)
			}
		}
	}
}
