package amudp

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// listen opens the transport of newJob's endpoints: the kernel socket of
// this system, or ConnUDP in TestConnUDP.
var listen = func(addr netip.AddrPort, bufSize int) (Transport, error) { return ListenUDP(addr, bufSize) }

// newJob makes n endpoints on loopback UDP sockets that know each other.
func newJob(t testing.TB, n int, cfg Config) []*Endpoint {
	t.Helper()
	eps := make([]*Endpoint, n)
	addrs := make([]netip.AddrPort, n)
	for i := range eps {
		u, err := listen(loopback, DefaultSocketBufferInitial) // as conduit does
		if err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Rank = i
		if c.Secret == nil {
			c.Secret = []byte("test secret")
		}
		if eps[i], err = NewEndpoint(u, c); err != nil {
			t.Fatal(err)
		}
		addrs[i] = u.LocalAddr()
	}
	shareInboxes(eps, addrs)
	for _, e := range eps {
		if err := e.SetPeers(addrs); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
	}
	return eps
}

// serve polls e in the background until the test ends.
func serve(t testing.TB, e *Endpoint) {
	t.Helper()
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.WaitUntil(stop.Load)
	}()
	t.Cleanup(func() { stop.Store(true); e.Wake(); <-done })
}

func waitFor(t testing.TB, e *Endpoint, what string, cond func() bool) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.WaitUntil(cond) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	case <-time.After(testbound.For(t, 10*time.Second)):
		t.Fatalf("timed out waiting for %s", what)
	}
}

type got struct {
	Src     int
	Args    []uint32
	Payload []byte
}

func TestEveryKindBothDirections(t *testing.T) {
	for _, cat := range []Category{Short, Medium, Long} {
		t.Run(cat.String(), func(t *testing.T) {
			eps := newJob(t, 2, Config{})
			var mu sync.Mutex
			var reqs, reps []got
			payload := bytes.Repeat([]byte("xyz"), 1000)
			for i, e := range eps {
				e.SetSegment(make([]byte, 8192))
				e.Register(130, func(tk *Token, args []uint32, p []byte) {
					mu.Lock()
					reqs = append(reqs, got{tk.Source(), append([]uint32(nil), args...), append([]byte(nil), p...)})
					mu.Unlock()
					if !tk.IsRequest() {
						t.Error("request handler token says reply")
					}
					var err error
					switch cat {
					case Short:
						err = tk.ReplyShort(131, args[0]+1)
					case Medium:
						err = tk.ReplyMedium(131, p[:10], args[0]+1)
					case Long:
						err = tk.ReplyLong(131, p[:10], 4000, args[0]+1)
					}
					if err != nil {
						t.Errorf("reply: %v", err)
					}
				})
				e.Register(131, func(tk *Token, args []uint32, p []byte) {
					mu.Lock()
					reps = append(reps, got{tk.Source(), append([]uint32(nil), args...), append([]byte(nil), p...)})
					mu.Unlock()
					if tk.IsRequest() {
						t.Error("reply handler token says request")
					}
					if err := tk.ReplyShort(131); !errors.Is(err, ErrNotInHandler) {
						t.Errorf("reply from a reply handler: %v", err)
					}
				})
				_ = i
			}
			for from := 0; from < 2; from++ {
				to := 1 - from
				serve(t, eps[to])
				var err error
				switch cat {
				case Short:
					err = eps[from].RequestShort(to, 130, uint32(10*from), 7)
				case Medium:
					err = eps[from].RequestMedium(to, 130, payload, uint32(10*from), 7)
				case Long:
					err = eps[from].RequestLong(to, 130, payload, 100, uint32(10*from), 7)
				}
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, eps[from], "reply", func() bool { mu.Lock(); defer mu.Unlock(); return len(reps) == from+1 })
			}
			var wantReq, wantRep []got
			for from := 0; from < 2; from++ {
				var p, rp []byte
				if cat != Short {
					p, rp = payload, payload[:10]
				}
				wantReq = append(wantReq, got{from, []uint32{uint32(10 * from), 7}, p})
				wantRep = append(wantRep, got{1 - from, []uint32{uint32(10*from) + 1}, rp})
			}
			if d := cmp.Diff(wantReq, reqs, cmp.Comparer(bytes.Equal)); d != "" {
				t.Errorf("requests (-want +got):\n%s", d)
			}
			if d := cmp.Diff(wantRep, reps, cmp.Comparer(bytes.Equal)); d != "" {
				t.Errorf("replies (-want +got):\n%s", d)
			}
			if cat == Long {
				for i, e := range eps {
					seg := e.Segment()
					if !bytes.Equal(seg[100:100+len(payload)], payload) {
						t.Errorf("rank %d: long request payload not in segment", i)
					}
					if !bytes.Equal(seg[4000:4010], payload[:10]) {
						t.Errorf("rank %d: long reply payload not in segment", i)
					}
				}
			}
			for i, e := range eps {
				if n := e.Outstanding(); n != 0 {
					t.Errorf("rank %d: %d requests outstanding", i, n)
				}
			}
		})
	}
}

func TestSelfSendRunsAtOnce(t *testing.T) {
	eps := newJob(t, 2, Config{})
	e := eps[0]
	e.SetSegment(make([]byte, 64))
	var order []string
	e.Register(140, func(tk *Token, args []uint32, p []byte) {
		order = append(order, "request")
		if tk.Source() != 0 {
			t.Errorf("self request source %d", tk.Source())
		}
		if err := tk.ReplyMedium(141, []byte("back"), args...); err != nil {
			t.Error(err)
		}
		if err := tk.ReplyShort(141); !errors.Is(err, ErrAlreadyReplied) {
			t.Errorf("second reply: %v", err)
		}
	})
	e.Register(141, func(tk *Token, args []uint32, p []byte) {
		order = append(order, "reply:"+string(p))
	})
	if err := e.RequestShort(0, 140, 1, 2); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"request", "reply:back"}, order); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if err := e.RequestLong(0, 140, []byte("abcd"), 60); err != nil {
		t.Fatal(err)
	}
	if string(e.Segment()[60:64]) != "abcd" {
		t.Error("self long not written to the segment")
	}
	if err := e.RequestLong(0, 140, []byte("abcde"), 60); !errors.Is(err, ErrOutOfSegment) {
		t.Errorf("self long past the segment: %v", err)
	}
	if s := e.Stats(); s.Sent != 0 {
		t.Errorf("self requests used the network: %+v", s)
	}
}

func TestAutoReplyFreesCredit(t *testing.T) {
	eps := newJob(t, 2, Config{NetworkDepth: 2})
	var ran atomic.Int32
	eps[1].Register(150, func(*Token, []uint32, []byte) { ran.Add(1) })
	serve(t, eps[1])
	for i := 0; i < 50; i++ { // 25× the depth: only possible if credits come back
		if err := eps[0].RequestShort(1, 150); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "drain", func() bool { return eps[0].Outstanding() == 0 })
	if ran.Load() != 50 {
		t.Errorf("handler ran %d times, want 50", ran.Load())
	}
}

func TestSendErrors(t *testing.T) {
	eps := newJob(t, 2, Config{})
	e := eps[0]
	big := make([]byte, MaxMedium+1)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"17 args", e.RequestShort(1, 130, make([]uint32, 17)...), ErrTooManyArgs},
		{"medium too big", e.RequestMedium(1, 130, big), ErrPayloadTooBig},
		{"long too big", e.RequestLong(1, 130, big, 0), ErrPayloadTooBig},
		{"handler 0", e.RequestShort(1, 0), ErrBadHandler},
		{"handler 256", e.RequestShort(1, 256), ErrBadHandler},
		{"rank -1", e.RequestShort(-1, 130), ErrBadRank},
		{"rank 2", e.RequestShort(2, 130), ErrBadRank},
		{"self unregistered", e.RequestShort(0, 199), ErrBadHandler},
		{"self long without segment", func() error {
			e.Register(199, func(*Token, []uint32, []byte) {})
			return e.RequestLong(0, 199, []byte{1}, 0)
		}(), ErrNoSegment},
		{"register 0", e.Register(0, nil), ErrBadHandler},
		{"nil token reply", (*Token)(nil).ReplyShort(130), ErrNotInHandler},
	}
	for _, tc := range tests {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.err, tc.want)
		}
	}
	if e.Outstanding() != 0 {
		t.Errorf("refused sends hold %d credits", e.Outstanding())
	}
}

// TestReplyAfterHandlerReturns: a token kept past its handler refuses to
// reply, on the network path and on the self path.
func TestReplyAfterHandlerReturns(t *testing.T) {
	eps := newJob(t, 2, Config{})
	var kept atomic.Pointer[Token]
	keep := func(tk *Token, _ []uint32, _ []byte) { kept.Store(tk) }
	eps[1].Register(130, keep)
	eps[0].Register(130, keep)
	go eps[1].WaitUntil(func() bool { return false }) // ends with Close below
	if err := eps[0].RequestShort(1, 130); err != nil {
		t.Fatal(err)
	}
	waitFor(t, eps[0], "auto reply", func() bool { return eps[0].Outstanding() == 0 })
	eps[1].Close() // waits for the poller: its handler is over
	if tk := kept.Load(); tk == nil {
		t.Fatal("handler did not run")
	} else if err := tk.ReplyShort(130); !errors.Is(err, ErrNotInHandler) {
		t.Errorf("reply through a kept network token: %v, want ErrNotInHandler", err)
	}
	kept.Store(nil)
	if err := eps[0].RequestShort(0, 130); err != nil {
		t.Fatal(err)
	}
	if err := kept.Load().ReplyShort(130); !errors.Is(err, ErrNotInHandler) {
		t.Errorf("reply through a kept self token: %v, want ErrNotInHandler", err)
	}
}

func TestReturnedToHandlerZero(t *testing.T) {
	eps := newJob(t, 2, Config{})
	eps[1].SetSegment(make([]byte, 100))
	eps[1].Register(130, func(*Token, []uint32, []byte) {})
	eps[1].Register(131, func(t *Token, _ []uint32, _ []byte) { t.ReplyShort(178) })
	var mu sync.Mutex
	var rets []Returned
	eps[0].SetReturnedHandler(func(r Returned) { mu.Lock(); rets = append(rets, r); mu.Unlock() })
	serve(t, eps[1])
	eps[0].RequestShort(1, 177)                      // not registered there
	eps[0].RequestLong(1, 130, make([]byte, 50), 60) // past the end
	eps[0].RequestShort(1, 131)                      // its reply's handler is not registered here
	waitFor(t, eps[0], "returns", func() bool { mu.Lock(); defer mu.Unlock(); return len(rets) == 3 })
	addr := eps[1].LocalAddr()
	want := []Returned{
		{Reason: ReasonBadHandler, Dest: 1, Addr: addr, Kind: KindShortRequest, Handler: 177},
		{Reason: ReasonBadOffset, Dest: 1, Addr: addr, Kind: KindLongRequest, Handler: 130},
		{Reason: ReasonBadHandler, Dest: 1, Addr: addr, Kind: KindShortReply, Handler: 178, Incoming: true},
	}
	if d := cmp.Diff(want, rets, cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if eps[0].Outstanding() != 0 {
		t.Error("returned requests still hold credit")
	}
}

func TestUndeliverableAfterTimeout(t *testing.T) {
	// The schedule is scaled (testbound): a sender kept off the CPU for
	// the whole of it (22 ms unscaled, under -race on a loaded machine)
	// gives up at its first timer without a retransmission.
	ms := testbound.Scale(time.Millisecond)
	rc := retransmit.Config{Initial: 2 * ms, Backoff: 2, Max: 8 * ms, MinRTO: time.Millisecond}
	eps := newJob(t, 2, Config{Retransmit: rc})
	dead := eps[1].LocalAddr()
	eps[1].Close() // nobody answers any more
	start := time.Now()
	if err := eps[0].RequestShort(1, 130); err != nil {
		t.Fatal(err)
	}
	err := eps[0].Drain()
	var re *ReturnedError
	if !errors.As(err, &re) || !re.Timeout() || re.Dest != 1 || re.Addr != dead {
		t.Fatalf("Drain = %v, want a timeout naming rank 1 at %v", err, dead)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Error("not a net.Error timeout")
	}
	if el := time.Since(start); el < rc.GiveUpAfter() {
		t.Errorf("gave up after %v, before the configured %v", el, rc.GiveUpAfter())
	}
	// On wall-clock time a late timer may leave one retransmission fewer
	// before the give-up time, and a peer heard from during the setup
	// within the Heard window makes the waits grow by the RTT estimate
	// instead of doubling (Config.NextWait), so more fit than in the
	// reference schedule; the exact schedules are tested on a fake clock
	// in package retransmit. Here: some, and no more than one per MinRTO.
	most := uint64(rc.GiveUpAfter() / rc.MinRTO)
	if s := eps[0].Stats(); s.Retransmits == 0 || s.Retransmits > most {
		t.Errorf("%d retransmissions, want 1..%d", s.Retransmits, most)
	}
}

// TestInterruptEndsWaits: a request waiting for credit to a peer that does
// not answer, and Drain, give up with ErrInterrupted once the interrupt
// function says so and the endpoint is woken; before that they wait.
func TestInterruptEndsWaits(t *testing.T) {
	eps := newJob(t, 2, Config{NetworkDepth: 2})
	var stop atomic.Bool
	eps[0].SetInterrupt(stop.Load)
	for range 2 { // the peer never polls: the credit is used up
		if err := eps[0].RequestShort(1, 130); err != nil {
			t.Fatal(err)
		}
	}
	sent := make(chan error, 1)
	go func() { sent <- eps[0].RequestShort(1, 130) }()
	select {
	case err := <-sent:
		t.Fatalf("a request without credit returned %v before the interrupt", err)
	case <-time.After(50 * time.Millisecond):
	}
	stop.Store(true)
	eps[0].Wake()
	select {
	case err := <-sent:
		if !errors.Is(err, ErrInterrupted) {
			t.Errorf("request = %v, want ErrInterrupted", err)
		}
	case <-time.After(testbound.For(t, 5*time.Second)):
		t.Fatal("the request still waits for credit after the interrupt")
	}
	if err := eps[0].Drain(); !errors.Is(err, ErrInterrupted) {
		t.Errorf("Drain = %v, want ErrInterrupted", err)
	}
}

// TestGarbageDatagramsDropped sends malformed and forged datagrams from a raw
// socket: none runs a handler, each is counted.
func TestGarbageDatagramsDropped(t *testing.T) {
	eps := newJob(t, 2, Config{NetworkDepth: 4})
	var ran atomic.Int32
	eps[1].Register(130, func(*Token, []uint32, []byte) { ran.Add(1) })
	serve(t, eps[1])
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(eps[1].LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := wire.Message{Header: wire.Header{Kind: KindShortRequest, Handler: 130, Src: 0, Slot: 0, Seq: 1}}
	enc := func(m wire.Message) []byte {
		b, err := m.Append(nil)
		if err != nil {
			t.Fatal(err)
		}
		return sealed("test secret", 1, b)
	}
	wrongTag := enc(good)
	wrongTag[4]++
	unknownRank, badSlot, forgedSource := good, good, good
	unknownRank.Src = 9
	badSlot.Slot = 4
	forgedSource.Src = 0 // right tag and rank, but from another address
	for _, b := range [][]byte{{1, 2, 3}, enc(good)[:20], wrongTag, enc(unknownRank), enc(badSlot), enc(forgedSource)} {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "drops counted", func() bool {
		s := eps[1].Stats()
		return s.BadDatagrams == 2 && s.BadMAC == 1 && s.BadSource == 2 && s.BadSlot == 1
	})
	if ran.Load() != 0 {
		t.Errorf("a forged datagram ran a handler")
	}
	// The endpoint still works.
	eps[0].RequestShort(1, 130)
	waitFor(t, eps[0], "real request", func() bool { return ran.Load() == 1 })
}

// TestRequestBlocksWithoutCredit: a receiver that does not poll lets exactly
// depth requests through; the next one blocks until it polls.
// TestConcurrentSenders: many goroutines share one endpoint.
func TestConcurrentSenders(t *testing.T) {
	eps := newJob(t, 3, Config{NetworkDepth: 8})
	var count [3]atomic.Int32
	for i, e := range eps {
		e.Register(130, func(tk *Token, args []uint32, _ []byte) { count[i].Add(1); tk.ReplyShort(131, args...) })
		e.Register(131, func(*Token, []uint32, []byte) {})
	}
	serve(t, eps[1])
	serve(t, eps[2])
	var wg sync.WaitGroup
	const G, K = 8, 200
	for g := 0; g < G; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < K; k++ {
				if err := eps[0].RequestMedium(1+(g+k)%2, 130, []byte{byte(k)}, uint32(g)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, eps[0], "all replies", func() bool { return eps[0].Outstanding() == 0 })
	if got := count[1].Load() + count[2].Load(); got != G*K {
		t.Errorf("handlers ran %d times, want %d", got, G*K)
	}
}

func TestNewEndpointRejectsBadConfig(t *testing.T) {
	u, err := ListenUDP(loopback, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for _, c := range []Config{
		{NetworkDepth: 1025}, {NetworkDepth: -1}, {RecvDepth: 70000}, {SendDepth: -2}, {Rank: -1},
		{Retransmit: retransmit.Config{Initial: -1, Backoff: 2}},
	} {
		if _, err := NewEndpoint(u, c); err == nil {
			t.Errorf("NewEndpoint(%+v) accepted", c)
		}
	}
}

func TestSocketBufferReadBack(t *testing.T) {
	u, err := ListenUDP(loopback, 256<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	rcv, snd, err := u.SetBuffers(0)
	if err != nil || rcv < 256<<10 || snd < 256<<10 {
		t.Errorf("buffers %d/%d (%v), want at least 256 KiB", rcv, snd, err)
	}
}

// TestReturnedSaysWhoDidWhat: the description of a returned message names
// who refused what, so that the rank that refused a reply does not report
// its own message as returned to it.
func TestReturnedSaysWhoDidWhat(t *testing.T) {
	a := netip.MustParseAddrPort("10.0.0.2:4000")
	tests := []struct {
		r    Returned
		want string
	}{
		{Returned{Reason: ReasonBadHandler, Dest: 1, Addr: a, Kind: KindShortRequest, Handler: 140},
			"short-request to rank 1 at 10.0.0.2:4000 (handler 140) was refused by rank 1: no handler registered at that index"},
		{Returned{Reason: ReasonTimeout, Dest: 3, Addr: a, Kind: KindMediumRequest, Handler: 130},
			"medium-request to rank 3 at 10.0.0.2:4000 (handler 130) is undeliverable: the peer sent nothing for the give-up time"},
		{Returned{Reason: ReasonBadOffset, Dest: 1, Addr: a, Kind: KindLongReply, Handler: 131, Incoming: true},
			"long-reply from rank 1 at 10.0.0.2:4000 (handler 131) was refused here: long payload outside the receiver's segment"},
	}
	for _, tc := range tests {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// testNonces numbers the datagrams that tests seal (sealed), as an
// endpoint numbers its own.
var testNonces atomic.Uint64

// sealed seals datagram b for rank dest in a job with secret, whose
// endpoints authenticate payloads (the default), under a nonce no other
// datagram of the test process sealed with it has.
func sealed(secret string, dest int, b []byte) []byte {
	return wire.NewKey([]byte(secret), wire.AuthPayload).Seal(b, uint32(dest), testNonces.Add(1))
}

// TestRegisterAll: every handler of the map is installed in one step; a
// map with an index out of range installs none of them.
func TestRegisterAll(t *testing.T) {
	eps := newJob(t, 1, Config{})
	e := eps[0]
	var ran [3]atomic.Int32
	hs := map[int]Handler{}
	for i := range ran {
		hs[150+i] = func(*Token, []uint32, []byte) { ran[i].Add(1) }
	}
	if err := e.RegisterAll(hs); err != nil {
		t.Fatal(err)
	}
	bad := map[int]Handler{160: func(*Token, []uint32, []byte) {}, NumHandlers: nil}
	if err := e.RegisterAll(bad); !errors.Is(err, ErrBadHandler) {
		t.Errorf("index %d: %v, want ErrBadHandler", NumHandlers, err)
	}
	for i := range ran {
		if err := e.RequestShort(0, 150+i); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.RequestShort(0, 160); !errors.Is(err, ErrBadHandler) {
		t.Errorf("handler 160 of the refused map: %v, want ErrBadHandler", err)
	}
	waitFor(t, e, "handlers", func() bool { return ran[0].Load()+ran[1].Load()+ran[2].Load() == 3 })
	for i := range ran {
		if ran[i].Load() != 1 {
			t.Errorf("handler %d ran %d times", 150+i, ran[i].Load())
		}
	}
}
