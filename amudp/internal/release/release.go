// Package release stores to words that other goroutines and processes
// read with sync/atomic, when the caller is the word's only writer: a
// store with release ordering, which on amd64 is a plain move instead of
// the locked exchange that atomic.Uint64.Store compiles to (a full
// barrier that waits for every earlier store to reach the cache). Readers
// use atomic loads, which order what they read after the word after it,
// as the writer wrote it.
//
// Under the race detector, and on other architectures, the stores are
// sync/atomic's, so the detector sees the ordering they give.
package release

import "sync/atomic"

// Inc adds one to *p, whose only writer is the caller.
func Inc(p *atomic.Uint64) { Store(p, p.Load()+1) }

// Add adds d to *p, whose only writer is the caller.
func Add(p *atomic.Uint64, d uint64) { Store(p, p.Load()+d) }
