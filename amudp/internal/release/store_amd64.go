//go:build amd64 && !race

package release

import "sync/atomic"

// Store sets *p to v with release ordering: every store the caller made
// before it is visible to a goroutine or process that loads v from *p
// with sync/atomic. The caller is the only writer of *p.
//
//go:noescape
func Store(p *atomic.Uint64, v uint64)
