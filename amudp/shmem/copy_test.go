package shmem

import (
	"bytes"
	"cmp"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestCopy(t *testing.T) {
	for _, n := range []int{0, 1, 100, minStrings - 1, minStrings, minStrings + 1, 65000, chunk, 1 << 20, 3<<20 + 5, cachedMax + 1} {
		src := make([]byte, n+64)
		for i := range src {
			src[i] = byte(i * 7)
		}
		for _, shift := range []int{0, 1, 63} {
			dst := make([]byte, n+128)
			if got := Copy(dst[shift:shift+n], src[:n]); got != n {
				t.Fatalf("Copy of %d bytes returned %d", n, got)
			}
			if !bytes.Equal(dst[shift:shift+n], src[:n]) || bytes.ContainsFunc(dst[:shift], func(r rune) bool { return r != 0 }) || bytes.ContainsFunc(dst[shift+n:], func(r rune) bool { return r != 0 }) {
				t.Fatalf("Copy of %d bytes at %d: wrong bytes", n, shift)
			}
		}
	}
	if got := Copy(make([]byte, 10), make([]byte, 5000)); got != 10 {
		t.Fatalf("Copy into 10 bytes returned %d", got)
	}
}

// TestCopyOverlap: a source and destination in one buffer, either ahead,
// by a whole number of cache lines (REP MOVSB's offsets) or not, get the
// source's bytes as they were, as copy's do.
func TestCopyOverlap(t *testing.T) {
	for _, n := range []int{65000, 3 << 20} {
		testCopyOverlap(t, n)
	}
}

func testCopyOverlap(t *testing.T, n int) {
	for _, shift := range []int{-4096, -64, -8, 8, 64, 128, 4096} {
		buf := make([]byte, n+8192)
		for i := range buf {
			buf[i] = byte(i*7 + i>>8) // no period within n
		}
		want := append([]byte(nil), buf[4096:4096+n]...)
		if got := Copy(buf[4096+shift:4096+shift+n], buf[4096:4096+n]); got != n || !bytes.Equal(buf[4096+shift:4096+shift+n], want) {
			t.Errorf("%d bytes, shift %d: returned %d, bytes equal %v", n, shift, got, bytes.Equal(buf[4096+shift:4096+shift+n], want))
		}
	}
}

// TestUseStrings: REP MOVSB only for minStrings bytes or more, both ways,
// between the same offsets in a cache line (sameLine, checked on every
// host), and only where the processor moves strings fast.
func TestUseStrings(t *testing.T) {
	buf := make([]byte, 4*65536)
	for _, c := range []struct {
		src, dst, n, dstLen int
		same, want          bool
	}{
		{0, 65536, 65000, 0, true, true},
		{0, 65536 + 64, 65000, 0, true, true},
		{46, 65536 + 46, 65000, 0, true, true},
		{65536 + 4096, 0, 65000, 0, true, true},   // the destination first
		{0, 65536 + 8, 65000, 0, false, false},    // 8 past the source modulo 4096
		{0, 65536 + 4104, 65000, 0, false, false}, // the same, a page on
		{0, 65536 + 1, 65000, 0, false, false},
		{0, 65536 + 16, 65000, 0, false, false},
		{0, 65536 + 32, 65000, 0, false, false},
		{46, 65536, 65000, 0, false, false},
		{0, 65536 - 8, 65000, 0, false, false},
		{0, 65536, minStrings - 1, 0, true, false},
		{0, 65536, minStrings, 0, true, true},
		{0, 65536, 65000, minStrings - 1, true, false}, // a destination too short
		{0, 64, 65000, 0, true, false},                 // overlapping
		{64, 0, 65000, 0, true, false},
		{0, 65000, 65000, 0, false, false},
		{0, 65024, 65000, 0, true, true}, // just apart
	} {
		src := buf[c.src : c.src+c.n]
		dst := buf[c.dst : c.dst+cmp.Or(c.dstLen, c.n)]
		if got := sameLine(dst, src); got != c.same {
			t.Errorf("from offset %d to %d: same offset in a line %v, want %v", c.src, c.dst, got, c.same)
		}
		if got := useStrings(dst, src); got != (c.want && fastStrings) {
			t.Errorf("%d bytes into %d from offset %d to %d: REP MOVSB %v, want %v", len(src), len(dst), c.src, c.dst, got, c.want && fastStrings)
		}
	}
}

// TestCopySmall: 8 to 16 bytes are copied into a destination at least as
// long, and nothing past them; other lengths, or a destination too short,
// copy nothing.
func TestCopySmall(t *testing.T) {
	for n := range 20 {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(i + 1)
		}
		for _, room := range []int{n - 1, n, n + 5} {
			if room < 0 {
				continue
			}
			dst := make([]byte, room)
			copied := CopySmall(dst, src)
			want := n >= 8 && n <= 16 && room >= n
			if copied != want {
				t.Fatalf("CopySmall of %d bytes into %d: %v, want %v", n, room, copied, want)
			}
			switch {
			case copied && (!bytes.Equal(dst[:n], src) || bytes.ContainsFunc(dst[n:], func(r rune) bool { return r != 0 })):
				t.Errorf("CopySmall of %d bytes into %d: %v", n, room, dst)
			case !copied && bytes.ContainsFunc(dst, func(r rune) bool { return r != 0 }):
				t.Errorf("CopySmall of %d bytes into %d wrote %v, reporting it did not", n, room, dst)
			}
		}
	}
}

// TestCopySmallOverlap: a source and destination in one buffer, either
// ahead, get the source's bytes as they were.
func TestCopySmallOverlap(t *testing.T) {
	for _, shift := range []int{-5, -1, 1, 5} {
		buf := []byte("0123456789abcdefghijklmnop")
		want := string(buf[8:21])
		if !CopySmall(buf[8+shift:21+shift], buf[8:21]) || string(buf[8+shift:21+shift]) != want {
			t.Errorf("shift %d: %q, want %q", shift, buf[8+shift:21+shift], want)
		}
	}
}

// BenchmarkCopy passes a 65000-byte payload back and forth between two
// threads, each copying what the other wrote into a buffer the other
// reads next, as two ranks' Long messages do through shared memory.
func BenchmarkCopy(b *testing.B) {
	for _, c := range []struct {
		name string
		copy func(dst, src []byte) int
	}{{"go", func(d, s []byte) int { return copy(d, s) }}, {"memcopy", Copy}} {
		b.Run(c.name, func(b *testing.B) {
			const n = 65000
			a, z := make([]byte, n), make([]byte, n)
			var turn atomic.Int64
			done := make(chan struct{})
			go func() {
				runtime.LockOSThread()
				for i := int64(1); ; i += 2 {
					for turn.Load() != i {
						if turn.Load() < 0 {
							close(done)
							return
						}
					}
					c.copy(z, a)
					turn.Store(i + 1)
				}
			}()
			runtime.LockOSThread()
			b.SetBytes(2 * n)
			for i := range b.N {
				for turn.Load() != int64(2*i) {
				}
				c.copy(a, z)
				turn.Store(int64(2*i + 1))
			}
			for turn.Load() != int64(2*b.N) {
			}
			turn.Store(-1)
			<-done
		})
	}
}

// BenchmarkCopyOffsets copies 65000 bytes within one buffer, the
// destination 124 KiB + d bytes past a page-aligned source, with Go's
// copy, with Copy, and, where the processor moves strings fast, with REP
// MOVSB whatever the offsets: the last is what useStrings refuses (on an
// AMD EPYC host, d = 8: 23.5-29.6 µs against 1.5-1.7; d = 46: 1.9
// against 1.45).
func BenchmarkCopyOffsets(b *testing.B) {
	const n = 65000
	buf := make([]byte, 4*65536+8192)
	for i := range buf {
		buf[i] = byte(i)
	}
	copies := []struct {
		name string
		copy func(dst, src []byte) int
	}{{"go", func(d, s []byte) int { return copy(d, s) }}, {"Copy", Copy}}
	if fastStrings {
		copies = append(copies, struct {
			name string
			copy func(dst, src []byte) int
		}{"movsb", func(d, s []byte) int { movsb(&d[0], &s[0], uintptr(len(s))); return len(s) }})
	}
	for _, d := range []int{0, 8, 46, 2048} {
		src := buf[4096 : 4096+n]
		dst := buf[2*65536+d : 2*65536+d+n]
		for _, c := range copies {
			b.Run(fmt.Sprintf("d=%d/%s", d, c.name), func(b *testing.B) {
				b.SetBytes(n)
				for range b.N {
					c.copy(dst, src)
				}
			})
		}
	}
}
