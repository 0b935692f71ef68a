package amudp

// Endpoint limits and defaults, from AMUDP 3.x on Linux (DESIGN.md §3, §6);
// the wire format's limits are in package wire.
const (
	// NumHandlers is the size of the handler table. Index 0 is the
	// returned-message handler; 1–63 are the core's, 64–127 the extended
	// API's (put/get/barrier) and 128–255 the client's.
	NumHandlers = 256

	// DefaultNetworkDepth is the default number of outstanding requests per
	// peer (GASNET_NETWORKDEPTH).
	DefaultNetworkDepth = 128

	// MaxNetworkDepth is the largest accepted network depth.
	MaxNetworkDepth = 1024

	// MaxPeers is the largest number of endpoints in a job.
	MaxPeers = 1 << 20

	// MaxRecvDepth is the largest accepted receive depth.
	MaxRecvDepth = 65534

	// DefaultSocketBufferMax is the default limit of socket buffer growth
	// (GASNET_SOCKETBUFFER_MAX).
	DefaultSocketBufferMax = 4 << 20

	// DefaultSocketBufferInitial is the socket buffer size requested at start
	// (GASNET_SOCKETBUFFER_INITIAL).
	DefaultSocketBufferInitial = 1 << 20
)
