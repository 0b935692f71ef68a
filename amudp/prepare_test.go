package amudp

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestPreparedRequest: a request whose payload the caller wrote into the
// endpoint's buffer reaches its handler with exactly the bytes committed
// (fewer than prepared or all), its arguments and, for a Long, in the
// segment; in every protection mode, with payloads below and above the
// split datagram's size, over the network and to this rank.
func TestPreparedRequest(t *testing.T) {
	for _, mode := range []struct {
		name string
		cfg  Config
	}{{"payload", Config{}}, {"header", Config{HeaderOnlyAuth: true}}, {"encrypt", Config{Encrypt: true}}} {
		t.Run(mode.name, func(t *testing.T) {
			eps := newJob(t, 2, mode.cfg)
			for _, e := range eps {
				e.SetSegment(make([]byte, 1<<17))
			}
			var mu sync.Mutex
			var seen []got
			outside := 0 // Long payloads not at offset 4096 of the segment
			for _, e := range eps {
				e.Register(140, func(tk *Token, args []uint32, p []byte) {
					mu.Lock()
					seen = append(seen, got{tk.Source(), append([]uint32(nil), args...), append([]byte(nil), p...)})
					if args[2] == uint32(Long) && len(p) > 0 && &p[0] != &e.Segment()[4096] {
						outside++
					}
					mu.Unlock()
				})
			}
			serve(t, eps[1])
			var want []got
			for _, dest := range []int{1, 0} {
				for _, cat := range []Category{Medium, Long} {
					for _, c := range []struct{ prep, commit int }{{0, 0}, {100, 100}, {300, 17}, {MaxMedium, MaxMedium}, {MaxMedium, 20000}, {20000, 100}} {
						pr, err := eps[0].PrepareRequest(dest, cat, c.prep, 3, 4096)
						if err != nil {
							t.Fatal(err)
						}
						buf := pr.Payload()
						if len(buf) != c.prep {
							t.Fatalf("Payload holds %d bytes, prepared %d", len(buf), c.prep)
						}
						for i := range buf {
							buf[i] = byte(i*7 + c.commit)
						}
						args := []uint32{uint32(c.prep), uint32(c.commit), uint32(cat)}
						if err := pr.Commit(140, c.commit, args...); err != nil {
							t.Fatalf("%v to %d, %d of %d bytes: %v", cat, dest, c.commit, c.prep, err)
						}
						payload := make([]byte, c.commit)
						for i := range payload {
							payload[i] = byte(i*7 + c.commit)
						}
						want = append(want, got{0, args, payload})
						waitFor(t, eps[0], "the handler", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == len(want) })
					}
				}
			}
			// Every credit came back, the bytes of each payload committed
			// shorter than prepared too.
			waitFor(t, eps[0], "the replies", func() bool { return eps[0].Outstanding() == 0 })
			eps[0].mu.Lock()
			if out := eps[0].peerLocked(1).bytes.out; out != 0 {
				t.Errorf("%d bytes left in the byte window with no request outstanding", out)
			}
			eps[0].mu.Unlock()
			mu.Lock()
			defer mu.Unlock()
			if d := cmp.Diff(want, seen, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("handlers saw (-want +got):\n%s", d)
			}
			if outside > 0 {
				t.Errorf("%d Long payloads were not in the segment", outside)
			}
		})
	}
}

// TestPreparedMisuse: a prepared request is committed or released once;
// a second commit, a commit of a stale copy, one with more bytes than
// prepared or other arguments than prepared is an error and sends
// nothing, and every error gives the credit back (a full depth of
// prepares and failed commits more than once over does not wait).
func TestPreparedMisuse(t *testing.T) {
	eps := newJob(t, 2, Config{NetworkDepth: 4})
	var mu sync.Mutex
	runs := 0
	eps[1].Register(140, func(*Token, []uint32, []byte) { mu.Lock(); runs++; mu.Unlock() })
	serve(t, eps[1])
	var zero Prepared
	if err := zero.Commit(140, 0); !errors.Is(err, ErrNotPrepared) {
		t.Errorf("Commit of a zero Prepared: %v, want ErrNotPrepared", err)
	}
	for _, dest := range []int{1, 0} {
		for i := range 12 {
			pr, err := eps[0].PrepareRequest(dest, Medium, 64, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			stale := pr
			var cerr error
			switch i % 4 {
			case 0:
				cerr = pr.Commit(140, 65, 1)
			case 1:
				cerr = pr.Commit(140, 64)
			case 2:
				cerr = pr.Commit(3000, 64, 1)
			case 3:
				if err := pr.Release(); err != nil {
					t.Fatal(err)
				}
				cerr = fmt.Errorf("released")
			}
			if cerr == nil {
				t.Fatalf("case %d: bad commit succeeded", i%4)
			}
			for _, again := range []*Prepared{&pr, &stale} {
				if err := again.Commit(140, 1, 1); !errors.Is(err, ErrNotPrepared) {
					t.Errorf("case %d, to %d: commit after a failed commit or release: %v, want ErrNotPrepared", i%4, dest, err)
				}
				if err := again.Release(); !errors.Is(err, ErrNotPrepared) {
					t.Errorf("case %d, to %d: release after a failed commit or release: %v, want ErrNotPrepared", i%4, dest, err)
				}
			}
		}
	}
	// A stale copy of a committed request, its slot prepared again since.
	pr, _ := eps[0].PrepareRequest(1, Medium, 8, 0, 0)
	stale := pr
	if err := pr.Commit(140, 8); err != nil {
		t.Fatal(err)
	}
	waitFor(t, eps[0], "the handler", func() bool { mu.Lock(); defer mu.Unlock(); return runs == 1 })
	var live []Prepared
	for range 4 {
		p, err := eps[0].PrepareRequest(1, Medium, 8, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		live = append(live, p)
	}
	if err := stale.Commit(140, 8); !errors.Is(err, ErrNotPrepared) {
		t.Errorf("commit of a stale copy: %v, want ErrNotPrepared", err)
	}
	for i := range live {
		if err := live[i].Commit(140, 8); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, eps[0], "the handlers", func() bool { mu.Lock(); defer mu.Unlock(); return runs == 5 })
	for _, bad := range []struct {
		cat      Category
		n, nargs int
	}{{Short, 8, 0}, {Medium, MaxMedium + 1, 0}, {Medium, -1, 0}, {Long, 8, MaxArgs + 1}} {
		if _, err := eps[0].PrepareRequest(1, bad.cat, bad.n, bad.nargs, 0); err == nil {
			t.Errorf("PrepareRequest(%v, %d bytes, %d args) succeeded", bad.cat, bad.n, bad.nargs)
		}
	}
}
