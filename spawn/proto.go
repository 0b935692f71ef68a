package spawn

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Frame types of the control connection between the console and a worker.
// Each frame is one type byte, a little-endian uint32 length and a JSON (or
// raw) body.
const (
	frameJoin    byte = 1 // worker → console: Join
	frameWelcome byte = 2 // console → worker: Welcome
	frameBarrier byte = 3 // worker → console: entered barrier; console → worker: barrier done
	// 4 was the console's all-gather; collectives now run among the workers.
	frameExit      byte = 5 // worker → console: Exit(code) called
	frameTerminate byte = 6 // console → worker: exit now with the code in the body
	frameOutput    byte = 7 // worker → console, first frame of a routed output stream: Output
	frameHello     byte = 8 // worker → console, first frame of a control connection: Hello
	framePing      byte = 9 // console → worker: answer with framePong (liveness)
	framePong      byte = 10
	frameSignal    byte = 11 // console → worker: raise the signal numbered in the body (Code) on itself
	frameColl      byte = 12 // worker → console: Coll, where a rank waits long in a collective
	maxFrame            = 64 << 20
	// maxFirstFrame bounds the first frame of a connection, read before the
	// secret is checked, and maxJoinFrame the Join that follows a Hello: a
	// stranger makes the console read at most a few bytes.
	maxFirstFrame = 512
	maxJoinFrame  = 4096
)

// Hello is the first frame of a worker's control connection, sent as soon
// as it connects: the console checks the secret before it reads anything
// else.
type Hello struct {
	Secret string `json:"secret"` // the job secret, hex
}

// Join is the first frame a worker sends.
type Join struct {
	Rank  int    `json:"rank"`  // requested rank, -1 for any
	Index int    `json:"index"` // spawn index when the spawner knows it, else -1
	Host  string `json:"host"`  // host identity for grouping (GASNET_HOST_DETECT)
	Name  string `json:"name"`  // host name, for messages
	PID   int    `json:"pid"`
	UDP   string `json:"udp"` // the worker's UDP address
}

// Welcome is the console's answer once every worker has joined.
type Welcome struct {
	Rank  int      `json:"rank"`
	Size  int      `json:"size"`
	Addrs []string `json:"addrs,omitempty"` // UDP address of every rank: rank 0 only
	Hosts []string `json:"hosts,omitempty"` // host identity of every rank: rank 0 only
	// Peers holds, for ranks other than 0, the UDP addresses of this rank
	// and its relay-tree neighbours; the rest of the table comes through
	// the tree (see TreeChildren).
	Peers map[int]string    `json:"peers,omitempty"`
	Env   map[string]string `json:"env"` // the console's GASNET_*/AMUDP_* settings
	// HostCount is the number of ranks on this rank's host, itself
	// included (so that it can tell an oversubscribed host).
	HostCount int `json:"hostCount"`
}

// Coll says that a rank has waited long in a collective (In), or has left
// it: the console reports collectives that do not match (GASNET_HANG_WARN).
type Coll struct {
	Kind string `json:"kind"` // one of collKinds
	Seq  uint64 `json:"seq"`  // its number on this rank, from 1
	In   bool   `json:"in"`
}

// collKinds are the collectives a rank reports (Coll.Kind); each kind has
// its own numbering.
var collKinds = map[string]bool{"barrier": true, "all-gather": true, "broadcast": true, "reduce": true}

// Code is the body of exit and terminate frames.
type Code struct {
	Code int `json:"code"`
	// Why is, in an Exit frame, the reason a rank aborts the job (the
	// console reports it); empty for a plain Exit.
	Why string `json:"why,omitempty"`
}

func writeFrame(w io.Writer, typ byte, v any) error {
	f, err := encodeFrame(typ, v)
	if err != nil {
		return err
	}
	_, err = w.Write(f)
	return err
}

// encodeFrame returns the bytes of one frame.
func encodeFrame(typ byte, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	f := make([]byte, 5, 5+len(body))
	f[0] = typ
	binary.LittleEndian.PutUint32(f[1:], uint32(len(body)))
	return append(f, body...), nil
}

func readFrame(r *bufio.Reader) (byte, []byte, error) { return readFrameMax(r, maxFrame) }

// readFrameMax reads a frame whose body is at most limit bytes; a longer
// one is an error, and its body is not read.
func readFrameMax(r *bufio.Reader, limit uint32) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[1:])
	if n > limit {
		return 0, nil, fmt.Errorf("spawn: control frame of %d bytes exceeds %d", n, limit)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return hdr[0], body, nil
}
