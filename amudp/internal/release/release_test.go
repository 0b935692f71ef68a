package release

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestPublishes checks the one promise: a reader that loads the value a
// Store wrote sees every store the writer made before it.
func TestPublishes(t *testing.T) {
	const rounds = 200000
	var flag atomic.Uint64
	data := make([]uint64, 8)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := uint64(1); i <= rounds; i++ {
			for flag.Load() != 2*i-1 {
			}
			for k := range data {
				if data[k] != i {
					t.Errorf("round %d: word %d is %d", i, k, data[k])
					return
				}
			}
			Inc(&flag)
		}
	}()
	for i := uint64(1); i <= rounds; i++ {
		for k := range data {
			data[k] = i
		}
		Store(&flag, 2*i-1)
		for flag.Load() != 2*i {
		}
	}
	wg.Wait()
}

func TestAdd(t *testing.T) {
	var w atomic.Uint64
	Add(&w, 5)
	Inc(&w)
	if got := w.Load(); got != 6 {
		t.Fatalf("got %d, want 6", got)
	}
}

// BenchmarkStore compares Store with atomic.Uint64.Store on a word of the
// caller's own.
func BenchmarkStore(b *testing.B) {
	var w atomic.Uint64
	b.Run("release", func(b *testing.B) {
		for i := range b.N {
			Store(&w, uint64(i))
		}
	})
	b.Run("atomic", func(b *testing.B) {
		for i := range b.N {
			w.Store(uint64(i))
		}
	})
}
