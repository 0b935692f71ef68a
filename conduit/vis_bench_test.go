package conduit

import (
	"testing"
	"time"
)

// BenchmarkStridedPut writes 1000 pieces of 8 bytes, every 64 bytes of
// rank 1's segment, from rank 0 of an in-process job over UDP loopback
// (RunLocal): "strided" with one PutStrided an operation, "puts" with
// 1000 PutNBs and a wait for each (make vis-bench prints both and their
// ratio).
func BenchmarkStridedPut(b *testing.B) {
	const pieces, size, stride = 1000, 8, 64
	for _, mode := range []string{"strided", "puts"} {
		b.Run(mode, func(b *testing.B) {
			var elapsed time.Duration
			code, err := RunLocal(2, func(j *Job) {
				if _, err := j.Attach(nil, pieces*stride); err != nil {
					b.Error(err)
					return
				}
				data := pattern(1, pieces*size)
				hs := make([]*Handle[struct{}], pieces)
				if j.Rank() == 0 {
					start := time.Now()
					for range b.N {
						if mode == "strided" {
							if err := j.PutStrided(1, Strided{Stride: stride, Count: pieces, Size: size}, data, size); err != nil {
								b.Error(err)
								break
							}
							continue
						}
						for i := range hs {
							h, err := j.PutNB(1, uint64(i*stride), data[i*size:(i+1)*size])
							if err != nil {
								b.Error(err)
								break
							}
							hs[i] = h
						}
						for _, h := range hs {
							if _, err := h.Wait(); err != nil {
								b.Error(err)
							}
						}
					}
					elapsed = time.Since(start)
				}
				j.World().Barrier()
			})
			if code != 0 || err != nil {
				b.Fatalf("job: %d, %v", code, err)
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N), "ns/op")
		})
	}
}
