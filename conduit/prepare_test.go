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
