package shmem

import (
	"bytes"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
)

func TestCopy(t *testing.T) {
	for _, n := range []int{0, 1, 100, minStrings - 1, minStrings, minStrings + 1, 65000, 1 << 20} {
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

// TestUseStrings: REP MOVSB only for minStrings bytes or more between the
// same offsets in a cache line, and only where the processor moves
// strings fast.
func TestUseStrings(t *testing.T) {
	buf := make([]byte, 4*65536)
	for _, c := range []struct {
		src, dst, n int
		want        bool
	}{
		{0, 65536, 65000, true},
		{0, 65536 + 64, 65000, true},
		{46, 65536 + 46, 65000, true},
		{0, 65536 - 4096, 65000, true},
		{0, 65536 + 8, 65000, false},    // 8 past the source modulo 4096
		{0, 65536 + 4104, 65000, false}, // the same, a page on
		{0, 65536 + 1, 65000, false},
		{46, 65536, 65000, false},
		{0, 65536 - 8, 65000, false},
		{0, 65536, minStrings - 1, false},
		{0, 65536, minStrings, true},
	} {
		dst, src := buf[c.dst:c.dst+c.n], buf[c.src:c.src+c.n]
		if got := useStrings(dst, src); got != (c.want && fastStrings) {
			t.Errorf("%d bytes from offset %d to %d: REP MOVSB %v, want %v", c.n, c.src, c.dst, got, c.want && fastStrings)
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
// destination d bytes past a page-aligned source plus 128 KiB, with Go's
// copy and with Copy: the gap between them where Copy would use REP MOVSB
// at an offset useStrings refuses (on an AMD EPYC host, d = 8: 23.5 µs
// against 1.6; d = 46: 1.9 against 1.45).
func BenchmarkCopyOffsets(b *testing.B) {
	const n = 65000
	buf := make([]byte, 4*65536+8192)
	for i := range buf {
		buf[i] = byte(i)
	}
	for _, d := range []int{0, 8, 46, 2048} {
		src := buf[4096 : 4096+n]
		dst := buf[2*65536+d : 2*65536+d+n]
		for _, c := range []struct {
			name string
			copy func(dst, src []byte) int
		}{{"go", func(d, s []byte) int { return copy(d, s) }}, {"Copy", Copy}} {
			b.Run(fmt.Sprintf("d=%d/%s", d, c.name), func(b *testing.B) {
				b.SetBytes(n)
				for range b.N {
					c.copy(dst, src)
				}
			})
		}
	}
}
