// Package amudp is the active-message core: an Endpoint sends Short, Medium
// and Long requests and replies to the other ranks of a job over one UDP
// socket, with per-peer credits, retransmission after a timeout and
// exactly-once execution of every handler (DESIGN.md §3, §5, §6).
//
// The package is split by job, one file each:
//
//	endpoint.go   Config, the Endpoint and its peer and handler tables
//	send.go       requests: checks, credit, encoding, first transmission
//	reply.go      Token and replies from inside a request handler
//	local.go      messages a rank sends to itself (no datagram)
//	receive.go    decoding datagrams and running handlers exactly once
//	ack.go        automatic replies, batched per peer
//	timers.go     retransmission and give-up (pure timing in package retransmit)
//	progress.go   Poll, blocking waits, spinning and sleeping, Fence
//	credit.go     credit instances, send credits and byte windows
//	buffers.go    growth of the kernel socket buffers
//	returned.go   requests that could not run: Returned, handler 0
//	stats.go      counters
//	transport.go  the Transport interface; udp_linux.go the raw-syscall
//	              socket, udp_conn.go the portable one on net.UDPConn
//
// The datagram format is package wire; an in-memory lossy Transport for
// tests is package amudptest.
package amudp
