package amudp

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
)

// TestPreparedReply: a handler's reply whose payload it wrote into the
// buffer PrepareReply gave, over the network in each authentication
// mode, through shared memory and to this rank: the requester's handler
// sees exactly the bytes and arguments committed, a Long's at its offset
// of the segment. TestPreparedReplyInPlace adds mapped segments.
func TestPreparedReply(t *testing.T) {
	for _, mode := range []struct {
		name   string
		cfg    Config
		shared bool
	}{
		{"payload", Config{}, false},
		{"header", Config{HeaderOnlyAuth: true}, false},
		{"encrypt", Config{Encrypt: true}, false},
		{"shared", Config{}, true},
	} {
		t.Run(mode.name, func(t *testing.T) { preparedReplies(t, mode.cfg, mode.shared, false) })
	}
}

// preparedReplies is TestPreparedReply in one mode; with mapped, every
// rank maps the others' segments, and a Long reply must be staged at its
// destination.
func preparedReplies(t *testing.T, cfg Config, shared, mapped bool) {
	if shared {
		saved := listen
		listen = listenShared(t, DefaultInbox)
		t.Cleanup(func() { listen = saved })
	}
	eps := newJob(t, 2, cfg)
	for _, e := range eps {
		e.SetSegment(make([]byte, 1<<17))
		if mapped {
			e.SetPeerSegments(func(r int) []byte { return eps[r].Segment() })
		}
	}
	var mu sync.Mutex
	var seen []got
	var staged, outside int // Long replies staged at their destination; seen elsewhere than offset 4096
	for _, e := range eps {
		e.Register(140, func(tk *Token, args []uint32, _ []byte) {
			prep, commit, cat := int(args[0]), int(args[1]), Category(args[2])
			pr, err := tk.PrepareReply(cat, prep, 3, 4096)
			if err != nil {
				t.Error(err)
				return
			}
			buf := pr.Payload()
			if len(buf) != prep {
				t.Errorf("Payload holds %d bytes, prepared %d", len(buf), prep)
			}
			if cat == Long && prep > 0 && &buf[0] == &eps[tk.Source()].Segment()[4096] {
				mu.Lock()
				staged++
				mu.Unlock()
			}
			for i := range buf {
				buf[i] = byte(i*7 + commit)
			}
			if err := pr.Commit(141, commit, args...); err != nil {
				t.Errorf("%v reply, %d of %d bytes: %v", cat, commit, prep, err)
			}
		})
		e.Register(141, func(tk *Token, args []uint32, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			seen = append(seen, got{tk.Source(), append([]uint32(nil), args...), append([]byte(nil), p...)})
			if args[2] == uint32(Long) && len(p) > 0 && &p[0] != &e.Segment()[4096] {
				outside++
			}
		})
	}
	serve(t, eps[1])
	var want []got
	longs := 0
	for _, dest := range []int{1, 0} {
		for _, cat := range []Category{Medium, Long} {
			for _, c := range []struct{ prep, commit int }{{0, 0}, {100, 100}, {300, 17}, {MaxMedium, MaxMedium}, {20000, 100}} {
				args := []uint32{uint32(c.prep), uint32(c.commit), uint32(cat)}
				if err := eps[0].RequestShort(dest, 140, args...); err != nil {
					t.Fatal(err)
				}
				payload := make([]byte, c.commit)
				for i := range payload {
					payload[i] = byte(i*7 + c.commit)
				}
				want = append(want, got{dest, args, payload})
				if cat == Long && c.prep > 0 {
					longs++
				}
				waitFor(t, eps[0], "the reply", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == len(want) })
			}
		}
	}
	waitFor(t, eps[0], "the credits", func() bool { return eps[0].Outstanding() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff(want, seen, cmpopts.EquateEmpty()); d != "" {
		t.Errorf("reply handlers saw (-want +got):\n%s", d)
	}
	if outside > 0 {
		t.Errorf("%d Long replies were not in the segment", outside)
	}
	if mapped && staged != longs {
		t.Errorf("%d of %d Long replies to a mapped segment were staged there", staged, longs)
	}
}

// TestPreparedReplyMisuse: a prepared reply is the handler's one reply:
// a second prepare or another reply while it is prepared is an error; a
// bad commit, or a reply left prepared, sends the automatic reply (the
// requester's credit returns), and a stale copy committed later is
// ErrNotPrepared; a released one leaves the handler free to reply; a
// reply handler cannot prepare.
func TestPreparedReplyMisuse(t *testing.T) {
	eps := newJob(t, 2, Config{NetworkDepth: 4})
	var mu sync.Mutex
	var kept []Prepared
	replies := 0
	eps[1].Register(140, func(tk *Token, args []uint32, _ []byte) {
		pr, err := tk.PrepareReply(Medium, 64, 1, 0)
		if err != nil {
			t.Error(err)
			return
		}
		if _, err := tk.PrepareReply(Medium, 8, 0, 0); !errors.Is(err, ErrAlreadyReplied) {
			t.Errorf("second PrepareReply: %v, want ErrAlreadyReplied", err)
		}
		if err := tk.ReplyShort(141); !errors.Is(err, ErrAlreadyReplied) {
			t.Errorf("ReplyShort while a reply is prepared: %v, want ErrAlreadyReplied", err)
		}
		var cerr error
		switch args[0] {
		case 0:
			cerr = pr.Commit(141, 65, 1)
		case 1:
			cerr = pr.Commit(141, 64)
		case 2:
			cerr = pr.Commit(0, 64, 1)
		case 3: // left prepared
			mu.Lock()
			kept = append(kept, pr)
			mu.Unlock()
			return
		case 4:
			if err := pr.Release(); err != nil {
				t.Error(err)
			}
			if err := tk.ReplyShort(141, 4); err != nil {
				t.Errorf("ReplyShort after Release: %v", err)
			}
			return
		}
		if cerr == nil {
			t.Errorf("case %d: bad commit succeeded", args[0])
		}
		if err := pr.Commit(141, 1, 1); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("case %d: commit after a failed commit: %v, want ErrNotPrepared", args[0], err)
		}
	})
	eps[0].Register(141, func(tk *Token, args []uint32, _ []byte) {
		if _, err := tk.PrepareReply(Medium, 8, 0, 0); !errors.Is(err, ErrNotInHandler) {
			t.Errorf("PrepareReply in a reply handler: %v, want ErrNotInHandler", err)
		}
		mu.Lock()
		replies++
		mu.Unlock()
	})
	serve(t, eps[1])
	// Three times the network depth: a credit not returned waits forever.
	for i := range 12 {
		if err := eps[0].RequestShort(1, 140, uint32(i%4)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "the credits", func() bool { return eps[0].Outstanding() == 0 })
	// The last of them left its reply prepared: nothing prepared since.
	mu.Lock()
	if len(kept) != 3 {
		t.Fatalf("%d replies left prepared, want 3", len(kept))
	}
	for i := range kept {
		if err := kept[i].Commit(141, 8, 1); !errors.Is(err, ErrNotPrepared) {
			t.Errorf("commit after the handler returned: %v, want ErrNotPrepared", err)
		}
	}
	mu.Unlock()
	if err := eps[0].RequestShort(1, 140, 4); err != nil {
		t.Fatal(err)
	}
	waitFor(t, eps[0], "the reply after Release", func() bool { mu.Lock(); defer mu.Unlock(); return replies == 1 })
	waitFor(t, eps[0], "the credits", func() bool { return eps[0].Outstanding() == 0 })
	mu.Lock()
	defer mu.Unlock()
	if replies != 1 {
		t.Errorf("%d replies ran, want 1", replies)
	}
}

// TestPreparedReplyResent: a prepared reply is the reply stored for its
// request: a retransmission of the request gets the same datagram again,
// sealed, in each protection mode, and the handler runs once.
func TestPreparedReplyResent(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  Config
		wire wire.Mode
	}{{"payload", Config{}, wire.AuthPayload}, {"header", Config{HeaderOnlyAuth: true}, wire.AuthHeader}, {"encrypt", Config{Encrypt: true}, wire.Encrypt}} {
		for _, cat := range []Category{Medium, Long} {
			t.Run(mode.name+"/"+cat.String(), func(t *testing.T) {
				e, raw := wireJob(t, mode.cfg)
				e.SetSegment(make([]byte, 4096))
				var ran atomic.Int32
				e.Register(140, func(tk *Token, _ []uint32, _ []byte) {
					ran.Add(1)
					pr, err := tk.PrepareReply(cat, 3000, 1, 512)
					if err != nil {
						t.Error(err)
						return
					}
					for i := range pr.Payload() {
						pr.Payload()[i] = byte(i * 3)
					}
					if err := pr.Commit(141, 2000, 7); err != nil {
						t.Error(err)
					}
				})
				serve(t, e)
				m := wire.Message{Header: wire.Header{Kind: KindShortRequest, Handler: 140, Src: 1, Seq: 1}}
				b, _ := m.Append(nil)
				req := wire.NewKey([]byte("wire secret"), mode.wire).Seal(b, 0, 100)
				raw.Send(req, e.LocalAddr())
				first := recvMsg(t, raw)
				want := make([]byte, 2000)
				for i := range want {
					want[i] = byte(i * 3)
				}
				if first.Kind != wire.ReplyKind(cat) || first.Handler != 141 || first.NArgs != 1 || first.Args[0] != 7 || !bytes.Equal(first.Payload, want) {
					t.Fatalf("reply %v to handler %d, args %v, %d payload bytes; want a %v to 141, [7], the 2000 bytes committed",
						first.Kind, first.Handler, first.Args[:first.NArgs], len(first.Payload), wire.ReplyKind(cat))
				}
				raw.Send(req, e.LocalAddr())
				again := recvMsg(t, raw)
				if d := cmp.Diff(first, again); d != "" {
					t.Errorf("the reply sent again differs (-first +again):\n%s", d)
				}
				if ran.Load() != 1 {
					t.Errorf("the handler ran %d times, want 1", ran.Load())
				}
			})
		}
	}
}
