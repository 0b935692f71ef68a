package shmem

import "golang.org/x/sys/cpu"

// minStrings is the fewest bytes that Copy moves with REP MOVSB. Where the
// processor has fast string moves (ERMS), a REP MOVSB writes whole cache
// lines without first reading them for ownership: into lines that another
// core holds (the peer that reads them next), that saves a fetch per line,
// which Go's vector copy pays (BenchmarkCopy).
const minStrings = 4096

var fastStrings = cpu.X86.HasERMS

// movsb copies n bytes from src to dst with REP MOVSB.
//
//go:noescape
func movsb(dst, src *byte, n uintptr)
