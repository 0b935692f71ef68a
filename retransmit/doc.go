// Package retransmit is the pure timing logic of udpconduit's reliable
// requests: per-request deadlines with exponential backoff, the give-up rule,
// and a per-peer round-trip-time estimate. It does no I/O, starts no
// goroutines and never reads the clock: every input takes now, and the caller
// asks NextDeadline (DESIGN.md §5).
//
// The meanings of the knobs are those of GASNET_REQUESTTIMEOUT_INITIAL,
// _BACKOFF and _MAX in GASNet's udp-conduit (AMUDP): see Config. Ours adds an
// RTT estimate with Karn's rule so that the first retransmission on a fast
// link comes after about a millisecond rather than 100 ms, while the time
// after which a request is undeliverable stays the documented one.
package retransmit
