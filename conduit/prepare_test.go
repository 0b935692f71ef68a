package conduit

import (
	"bytes"
	"errors"
	"sync/atomic"
	"testing"
)

// TestPreparedRequests: rank 0 sends Medium and Long requests prepared in
// the conduit's buffer to rank 1, over UDP and through shared memory; each
// handler sees exactly the bytes committed, a Long's in the segment; a
// commit to a bad handler is an error that returns the credit (more of
// them than the network depth do not wait), a second commit is
// ErrNotPrepared, and a Long outside the segment is refused at Prepare.
func TestPreparedRequests(t *testing.T) {
	for _, net := range []struct {
		name string
		jn   jobNet
	}{{"udp", loopbackUDP}, {"shared", loopbackShared(t)}} {
		t.Run(net.name, func(t *testing.T) {
			var bad atomic.Int32
			var ok atomic.Int32
			res, _ := runJob(t, 2, net.jn, false, func(j *Job) {
				check := func(p []byte, n int) {
					if !bytes.Equal(p, pattern(n, n)) {
						bad.Add(1)
						return
					}
					ok.Add(1)
				}
				seg, err := j.Attach([]HandlerEntry{
					{Index: 140, Fn: func(_ *Token, args []uint32, p []byte) { check(p, int(args[0])) }},
				}, 1<<17)
				if err != nil {
					t.Error(err)
					j.Exit(1)
				}
				if j.Rank() == 0 {
					// Each Long has its own bytes of the segment: one
					// written over another's before its handler runs
					// would be the program's race.
					off := uint64(0)
					for _, n := range []int{0, 9, 5000, MaxMedium} {
						for _, long := range []bool{false, true} {
							var pr Prepared
							if long {
								pr, err = j.PrepareRequestLong(1, n, 1, off)
								off += uint64(n)
							} else {
								pr, err = j.PrepareRequestMedium(1, MaxMedium, 1)
							}
							if err != nil {
								t.Error(err)
								j.Exit(1)
							}
							copy(pr.Payload(), pattern(n, n))
							if err := pr.Commit(140, n, uint32(n)); err != nil {
								t.Errorf("commit of %d bytes: %v", n, err)
							}
							if err := pr.Commit(140, n, uint32(n)); !errors.Is(err, ErrNotPrepared) {
								t.Errorf("second commit: %v, want ErrNotPrepared", err)
							}
						}
					}
					for range 40 {
						pr, err := j.PrepareRequestMedium(1, 8, 0)
						if err != nil {
							t.Fatal(err)
						}
						if err := pr.Commit(5, 8); !errors.Is(err, ErrHandlerIndex) {
							t.Errorf("commit to handler 5: %v, want ErrHandlerIndex", err)
						}
					}
					if _, err := j.PrepareRequestLong(1, 100, 0, uint64(len(seg))); err == nil {
						t.Error("a Long prepared outside the segment")
					}
				}
				if err := j.World().Barrier(); err != nil {
					t.Error(err)
				}
				j.Finalize(0)
			})
			if res.Code != 0 {
				t.Fatalf("job ended %+v", res)
			}
			if ok.Load() != 8 || bad.Load() != 0 {
				t.Errorf("%d handlers saw the payload committed, %d did not; want 8 and 0", ok.Load(), bad.Load())
			}
		})
	}
}

// TestPreparedReplies: rank 1's handler replies with Medium and Long
// replies prepared in the conduit's buffer, over UDP and through shared
// memory; rank 0's reply handler sees exactly the bytes committed, a
// Long's in its segment; a reply prepared to a handler below 128 is an
// error, and the automatic reply still returns the request's credit
// (more of them than the network depth do not wait).
func TestPreparedReplies(t *testing.T) {
	for _, net := range []struct {
		name string
		jn   jobNet
	}{{"udp", loopbackUDP}, {"shared", loopbackShared(t)}} {
		t.Run(net.name, func(t *testing.T) {
			var bad, ok, refused atomic.Int32
			res, _ := runJob(t, 2, net.jn, false, func(j *Job) {
				var seg []byte
				seg, err := j.Attach([]HandlerEntry{
					{Index: 141, Fn: func(tk *Token, args []uint32, _ []byte) {
						n, long := int(args[0]), args[1] != 0
						var pr Prepared
						var err error
						if long {
							pr, err = tk.PrepareReplyLong(n, 3, uint64(args[2]))
						} else {
							pr, err = tk.PrepareReplyMedium(MaxMedium, 3)
						}
						if err != nil {
							t.Error(err)
							return
						}
						copy(pr.Payload(), pattern(n, n))
						h := 142
						if args[3] != 0 {
							h = 64
						}
						if err := pr.Commit(h, n, uint32(n), args[1], args[2]); err != nil {
							if h == 64 && errors.Is(err, ErrHandlerIndex) {
								refused.Add(1)
								return
							}
							t.Errorf("commit of a %d-byte reply: %v", n, err)
						}
					}},
					{Index: 142, Fn: func(_ *Token, args []uint32, p []byte) {
						long := args[1] != 0 && len(p) > 0
						if !bytes.Equal(p, pattern(int(args[0]), int(args[0]))) || long && &p[0] != &seg[args[2]] {
							bad.Add(1)
							return
						}
						ok.Add(1)
					}},
				}, 1<<17)
				if err != nil {
					t.Error(err)
					j.Exit(1)
				}
				if j.Rank() == 0 {
					off := uint32(0)
					for _, n := range []int{0, 9, 5000, MaxMedium} {
						for _, long := range []uint32{0, 1} {
							if err := j.RequestShort(1, 141, uint32(n), long, off, 0); err != nil {
								t.Error(err)
							}
							off += long * uint32(n)
						}
					}
					for range 40 {
						if err := j.RequestShort(1, 141, 8, 0, 0, 1); err != nil {
							t.Error(err)
						}
					}
					if err := j.WaitUntil(func() bool { return ok.Load()+bad.Load() == 8 }); err != nil {
						t.Error(err)
					}
				}
				if err := j.World().Barrier(); err != nil {
					t.Error(err)
				}
				j.Finalize(0)
			})
			if res.Code != 0 {
				t.Fatalf("job ended %+v", res)
			}
			if ok.Load() != 8 || bad.Load() != 0 || refused.Load() != 40 {
				t.Errorf("%d reply handlers saw the payload committed, %d did not, %d replies to handler 64 refused; want 8, 0 and 40", ok.Load(), bad.Load(), refused.Load())
			}
		})
	}
}
