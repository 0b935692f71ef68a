//go:build race

package amudp

// raceEnabled: the race detector slows every memory access several times,
// which shifts timing-dependent figures (see TestFloodBatchesReplies).
const raceEnabled = true
