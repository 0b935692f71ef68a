package conduit

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPutGetMapped: Put and Get to a rank whose segment this process maps
// (the next rank's, once looked at, and its own) copy, up to the
// segment's last byte, and refuse what does not fit, as the messages'
// path does: ErrOutOfSegment for an offset or a length past the end,
// an offset that wraps included, and nothing written; a rank outside the
// job is an error.
func TestPutGetMapped(t *testing.T) {
	const segSize = 64
	res, jobs := runJob(t, 2, loopbackShared(t), true, func(j *Job) {
		me := j.Rank()
		peer := 1 - me
		seg, err := j.Attach(nil, segSize)
		if err != nil {
			t.Errorf("rank %d: Attach: %v", me, err)
			return
		}
		mine := []byte(fmt.Sprintf("<rank %d>", me)) // 8 bytes
		check := func(what string, err, want error) {
			t.Helper()
			if !errors.Is(err, want) {
				t.Errorf("rank %d: %s: %v, want %v", me, what, err, want)
			}
		}
		for _, to := range []struct {
			rank int
			at   uint64 // where mine goes
		}{{peer, segSize - 8}, {me, 0}} {
			buf := bytes.Repeat([]byte{'x'}, 9)
			check(fmt.Sprintf("Put to rank %d", to.rank), j.Put(to.rank, to.at, mine), nil)
			check(fmt.Sprintf("Put to rank %d, one byte past the end", to.rank), j.Put(to.rank, segSize-7, mine), ErrOutOfSegment)
			check(fmt.Sprintf("Put to rank %d, nine bytes", to.rank), j.Put(to.rank, segSize-8, buf), ErrOutOfSegment)
			check(fmt.Sprintf("Put to rank %d at 2^64-1", to.rank), j.Put(to.rank, 1<<64-1, mine), ErrOutOfSegment)
			check(fmt.Sprintf("Put to rank %d, none at the end", to.rank), j.Put(to.rank, segSize, nil), nil)
			check(fmt.Sprintf("Get from rank %d, one byte past the end", to.rank), j.Get(to.rank, segSize-7, buf[:8]), ErrOutOfSegment)
			check(fmt.Sprintf("Get from rank %d at 2^64-8", to.rank), j.Get(to.rank, 1<<64-8, buf[:8]), ErrOutOfSegment)
			check(fmt.Sprintf("Get from rank %d, nine bytes", to.rank), j.Get(to.rank, segSize-8, buf), ErrOutOfSegment)
			if !bytes.Equal(buf, bytes.Repeat([]byte{'x'}, 9)) {
				t.Errorf("rank %d: refused Gets from rank %d wrote %q", me, to.rank, buf)
			}
			check(fmt.Sprintf("Get from rank %d", to.rank), j.Get(to.rank, to.at, buf[:8]), nil)
			if !bytes.Equal(buf[:8], mine) {
				t.Errorf("rank %d: Get from rank %d at %d: %q, want %q", me, to.rank, to.at, buf[:8], mine)
			}
			// 13 bytes, two words that overlap, there and back, then
			// zeros again.
			odd, back := []byte("thirteen byte"), make([]byte, 13)
			check(fmt.Sprintf("Put of 13 bytes to rank %d", to.rank), j.Put(to.rank, 20+uint64(me)*16, odd), nil)
			check(fmt.Sprintf("Get of 13 bytes from rank %d", to.rank), j.Get(to.rank, 20+uint64(me)*16, back), nil)
			if !bytes.Equal(back, odd) {
				t.Errorf("rank %d: 13 bytes from rank %d: %q, want %q", me, to.rank, back, odd)
			}
			check(fmt.Sprintf("Put of 13 zeros to rank %d", to.rank), j.Put(to.rank, 20+uint64(me)*16, make([]byte, 13)), nil)
		}
		for _, r := range []int{-1, 2} {
			if err := j.Put(r, 0, mine); err == nil {
				t.Errorf("rank %d: Put to rank %d of 2: no error", me, r)
			}
			if err := j.Get(r, 0, mine); err == nil {
				t.Errorf("rank %d: Get from rank %d of 2: no error", me, r)
			}
		}
		if j.LocalView(peer) == nil || j.mapped(peer) == nil {
			t.Errorf("rank %d: rank %d's segment is not mapped", me, peer)
		}
		j.setAborting() // as handler 0 does: Put and Get take the path that ends the rank
		if j.mapped(peer) != nil || j.mapped(me) != nil {
			t.Errorf("rank %d: Put and Get take the mapping while the job aborts", me)
		}
		j.aborting.Store(false)
		j.nb.direct.Store(&j.nb.views)
		if err := j.World().Barrier(); err != nil {
			t.Errorf("rank %d: Barrier: %v", me, err)
			return
		}
		want := fmt.Sprintf("<rank %d>%s<rank %d>", me, bytes.Repeat([]byte{0}, segSize-16), peer)
		if string(seg) != want {
			t.Errorf("rank %d: segment %q, want %q", me, seg, want)
		}
		j.World().Barrier()
	})
	if d := cmp.Diff(jobResult{Ends: []string{"returned", "returned"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, j := range jobs {
		if p, g := j.nb.puts.Load(), j.nb.gets.Load(); p != 0 || g != 0 {
			t.Errorf("rank %d: counted %d Puts and %d Gets without GASNET_STATS", j.rank, p, g)
		}
	}
}

// TestPutMappedEndsWithTheJob: a rank that only Puts to a mapped segment
// ends at its next Put once another rank's Exit ended the job.
func TestPutMappedEndsWithTheJob(t *testing.T) {
	res, _ := runJob(t, 2, loopbackShared(t), true, func(j *Job) {
		if _, err := j.Attach(nil, 64); err != nil {
			t.Errorf("rank %d: Attach: %v", j.Rank(), err)
			return
		}
		if err := j.Put(1-j.Rank(), 0, []byte("mapped")); err != nil {
			t.Errorf("rank %d: Put: %v", j.Rank(), err)
		}
		j.World().Barrier()
		if j.Rank() == 1 {
			j.Exit(5)
		}
		for start := time.Now(); time.Since(start) < time.Minute; {
			if err := j.Put(1, 0, []byte("again")); err != nil {
				t.Errorf("rank 0: Put: %v", err)
				return
			}
		}
		t.Error("rank 0 Put for a minute after rank 1's Exit(5)")
	})
	if d := cmp.Diff(jobResult{Code: 5, Ends: []string{"terminated", "exit 5"}}, res); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}
