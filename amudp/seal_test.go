package amudp

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/amudp/internal/wire"
	"github.com/udpconduit/udpconduit/internal/testbound"
	"github.com/udpconduit/udpconduit/retransmit"
)

// TestHostileDatagrams sends an endpoint, from its peer's address, in each
// protection mode: a request and its exact replay, a forgery under another
// job's key, datagrams with a header bit or a payload bit flipped or cut
// short, and requests and replies sealed before ones it accepted in their
// slot but with newer sequence numbers (an attacker's copies from before
// the 16-bit sequence wrapped). Every handler runs once, for the genuine
// messages only, and each drop is counted by reason. Under Encrypt a
// request's arguments and payload are not on the wire.
func TestHostileDatagrams(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  Config
		wm   wire.Mode
	}{{"payload", Config{}, wire.AuthPayload}, {"encrypt", Config{Encrypt: true}, wire.Encrypt}, {"header", Config{HeaderOnlyAuth: true}, wire.AuthHeader}} {
		t.Run(mode.name, func(t *testing.T) {
			cfg := mode.cfg
			cfg.NetworkDepth = 1
			e, raw := wireJob(t, cfg)
			serve(t, e)
			key, other := wire.NewKey([]byte("wire secret"), mode.wm), wire.NewKey([]byte("another job"), mode.wm)
			var mu sync.Mutex
			var ran, replies []string
			e.Register(130, func(_ *Token, args []uint32, p []byte) {
				mu.Lock()
				ran = append(ran, fmt.Sprintf("%d %s", args[0], p))
				mu.Unlock()
			})
			e.Register(131, func(_ *Token, args []uint32, _ []byte) {
				mu.Lock()
				replies = append(replies, fmt.Sprint(args[0]))
				mu.Unlock()
			})
			count := func(s *[]string) func() int {
				return func() int { mu.Lock(); defer mu.Unlock(); return len(*s) }
			}
			ranN, repliesN := count(&ran), count(&replies)
			encode := func(m wire.Message, arg uint32, payload string) []byte {
				m.Src, m.NArgs, m.Args[0], m.Payload = 1, 1, arg, []byte(payload)
				b, err := m.Append(nil)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			req := func(seq uint16, id uint32, payload string) []byte {
				return encode(wire.Message{Header: wire.Header{Kind: KindMediumRequest, Flags: wire.FlagAckNow, Handler: 130, Seq: seq}}, id, payload)
			}
			send := func(b []byte) {
				if err := raw.Send(b, e.LocalAddr()); err != nil {
					t.Fatal(err)
				}
			}

			first := key.Seal(req(1, 1, "first"), 0, 10)
			send(first)
			eventually(t, "the first request", func() bool { return ranN() == 1 })
			recvMsg(t, raw) // its automatic reply
			send(first)     // replayed: a duplicate, answered again
			if m := recvMsg(t, raw); m.Kind != KindAutoReply || m.Seq != 1 {
				t.Errorf("the replayed request was answered with a %v for seq %d, want the auto reply again", m.Kind, m.Seq)
			}

			bad := 0
			send(other.Seal(req(2, 2, "another job"), 0, 11))
			hdr := key.Seal(req(2, 3, "header bit"), 0, 12)
			hdr[2] ^= 1 // the handler
			send(hdr)
			short := key.Seal(req(2, 4, "cut short"), 0, 13)
			send(short[:len(short)-1])
			send(key.Seal(req(2, 5, "for rank 2"), 2, 14))
			bad += 4
			if mode.wm != wire.AuthHeader { // documented: its payloads may change
				pay := key.Seal(req(2, 6, "payload bit"), 0, 15)
				pay[wire.HeaderLen+4] ^= 1
				send(pay)
				bad++
			}
			// Sealed before "first" (nonce 9 < 10), with a newer seq: a
			// copy from before the sequence wrapped around.
			send(key.Seal(req(2, 7, "before the wrap"), 0, 9))
			eventually(t, "the drops", func() bool { s := e.Stats(); return s.BadMAC == uint64(bad) && s.Replays == 1 })
			send(key.Seal(req(2, 8, "second"), 0, 20))
			eventually(t, "the second request", func() bool { return ranN() == 2 })
			recvMsg(t, raw)

			// Replies: one accepted, then an older-sealed one for the
			// slot's next request, then that request's genuine reply.
			reply := func(seq uint16, id uint32) []byte {
				return encode(wire.Message{Header: wire.Header{Kind: KindMediumReply, Handler: 131, Seq: seq}}, id, "")
			}
			if err := e.RequestShort(1, 140); err != nil {
				t.Fatal(err)
			}
			r1 := recvMsg(t, raw)
			send(key.Seal(reply(r1.Seq, 1), 0, 30))
			eventually(t, "the first reply", func() bool { return repliesN() == 1 })
			if err := e.RequestShort(1, 140); err != nil {
				t.Fatal(err)
			}
			r2 := recvMsg(t, raw)
			send(key.Seal(reply(r2.Seq, 2), 0, 25))
			eventually(t, "the replayed reply dropped", func() bool { return e.Stats().Replays == 2 })
			send(key.Seal(reply(r2.Seq, 3), 0, 40))
			eventually(t, "the second reply", func() bool { return repliesN() == 2 })

			mu.Lock()
			if d := cmp.Diff([]string{"1 first", "8 second"}, ran); d != "" {
				t.Errorf("request handlers ran (-want +got):\n%s", d)
			}
			if d := cmp.Diff([]string{"1", "3"}, replies); d != "" {
				t.Errorf("reply handlers ran (-want +got):\n%s", d)
			}
			mu.Unlock()
			if s := e.Stats(); s.BadMAC != uint64(bad) || s.Replays != 2 || s.DupRequests != 1 {
				t.Errorf("dropped %d as not opening (want %d), %d replays (want 2), %d duplicate requests (want 1)", s.BadMAC, bad, s.Replays, s.DupRequests)
			}

			if mode.wm == wire.Encrypt {
				if err := e.RequestMedium(1, 140, []byte("top secret payload"), 0x41424344); err != nil {
					t.Fatal(err)
				}
				b := recvRaw(t, raw)
				if bytes.Contains(b, []byte("top secret")) || bytes.Contains(b, []byte{0x44, 0x43, 0x42, 0x41}) {
					t.Errorf("an encrypted request carries its payload or argument in clear: %q", b)
				}
			}
		})
	}
}

// eventually waits up to 10 seconds (scaled, testbound) for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(testbound.For(t, 10*time.Second)); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// recvRaw returns the bytes of the next datagram on u within a second.
func recvRaw(t *testing.T, u *UDP) []byte {
	t.Helper()
	b := make([]byte, MaxDatagram+1)
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		n, _, err := u.Recv(b)
		if err == nil {
			return slices.Clone(b[:n])
		}
		u.Wait(10 * time.Millisecond)
	}
	t.Fatal("no datagram within a second")
	return nil
}

// TestReplaysDoNotAmplify: copies of a rank's last request, which anyone
// who saw it can send, make it send its stored reply again at most once
// per resendGap (here 5 s: half of MinRTO), and do not show the peer
// alive; a datagram sealed later does.
func TestReplaysDoNotAmplify(t *testing.T) {
	rc := retransmit.Config{Initial: 20 * time.Second, Backoff: 2, Max: 0, MinRTO: 10 * time.Second}
	e, raw := wireJob(t, Config{Retransmit: rc})
	serve(t, e)
	var ran atomic.Int32
	e.Register(130, func(t *Token, _ []uint32, p []byte) { ran.Add(1); t.ReplyMedium(131, make([]byte, 60000)) })
	key := wire.NewKey([]byte("wire secret"), wire.AuthPayload)
	m := wire.Message{Header: wire.Header{Kind: KindShortRequest, Handler: 130, Src: 1, Seq: 1}}
	b, _ := m.Append(nil)
	req := key.Seal(b, 0, 100)
	heard := func() retransmit.Time {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.peers[1].heard
	}
	raw.Send(req, e.LocalAddr())
	if r := recvMsg(t, raw); r.Kind != KindMediumReply {
		t.Fatalf("got a %v, want the reply", r.Kind)
	}
	first := heard()
	for range 50 {
		raw.Send(req, e.LocalAddr())
	}
	eventually(t, "the copies handled", func() bool { return e.Stats().DupRequests == 50 })
	if r := recvMsg(t, raw); r.Kind != KindMediumReply {
		t.Fatalf("got a %v, want the reply again", r.Kind)
	}
	if s := e.Stats(); s.ReplyResends != 1 || ran.Load() != 1 {
		t.Errorf("50 copies of the request: the reply sent again %d times (want 1), the handler run %d times (want 1)", s.ReplyResends, ran.Load())
	}
	if h := heard(); h != first {
		t.Errorf("copies of an old datagram moved the time the peer was heard from %v to %v", first, h)
	}
	m.Seq = 2
	b, _ = m.Append(nil)
	raw.Send(key.Seal(b, 0, 101), e.LocalAddr())
	eventually(t, "a new request", func() bool { return ran.Load() == 2 })
	if h := heard(); h == first {
		t.Error("a new datagram did not show the peer alive")
	}
}
