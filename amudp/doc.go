// Package amudp is the active-message core: an Endpoint sends Short, Medium
// and Long requests and replies to the other ranks of a job over one UDP
// socket, with per-peer credits, retransmission after a timeout and
// exactly-once execution of every handler (DESIGN.md §3, §5, §6).
//
// A caller's duties, in order:
//  1. NewEndpoint over a Transport (ListenUDP, or amudptest's network),
//     with the job's Config: its rank, secret and limits.
//  2. SetPeers with every rank's address (or some of them, and FillPeers
//     when the rest is known; a peer whose address is unknown still
//     reaches this rank, which learns it from the authenticated datagram).
//  3. Register the handlers (index 1..255; 0 receives returned requests)
//     and SetSegment for Long messages, before the first message that
//     needs them can arrive.
//  4. Send requests (RequestShort, RequestMedium, RequestLong) from any
//     goroutine; handlers reply through their Token, and may not request.
//  5. Make progress: Poll, or WaitUntil a condition, on some goroutine,
//     often enough: handlers, acknowledgements and retransmissions run
//     only there. Drain waits until every request sent is answered; Fence
//     orders this rank's memory with its handlers'.
//  6. Close: requests in flight are abandoned, and calls after it return
//     net.ErrClosed.
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
//	shm.go        Shared, the Transport between ranks of one host:
//	              shared-memory inboxes (package amudp/internal/shmring)
//	              over the UDP one
//
// The datagram format is package amudp/internal/wire; an in-memory lossy Transport for
// tests is package amudptest.
package amudp
