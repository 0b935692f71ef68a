// Package ctl is the control protocol between the console and its workers
// (DESIGN.md §7.1): the frame types and their bodies (Hello, Join,
// Welcome, Coll, Code, Output), their binary encoding (internal/varenc),
// reading and writing frames within size limits, and the Sender that
// writes a worker's frames in order without ever blocking the console.
package ctl

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// Frame types of the control connection between the console and a worker.
// Each frame is one type byte, a little-endian uint32 length and a binary
// body (codec.go).
const (
	FrameJoin    byte = 1 // worker → console: Join
	FrameWelcome byte = 2 // console → worker: Welcome
	// 3 and 4 are unused: collectives run among the workers.
	FrameExit      byte = 5 // worker → console: Exit(code) called
	FrameTerminate byte = 6 // console → worker: exit now with the code in the body
	FrameOutput    byte = 7 // worker → console, first frame of a routed output stream: Output
	FrameHello     byte = 8 // worker → console, first frame of a control connection: Hello
	FramePing      byte = 9 // console → worker: answer with FramePong (liveness)
	FramePong      byte = 10
	FrameSignal    byte = 11 // console → worker: raise the signal numbered in the body (Code) on itself
	FrameColl      byte = 12 // worker → console: Coll, where a rank waits long in a collective
	// FrameSettings: console → worker, after the Hello on a control
	// connection the console made (L): Settings.
	FrameSettings byte = 13
	// FrameFinalize: worker → console, Finalize(code) called: the rank
	// waits for the job's end, which comes once every rank has called
	// it (Code).
	FrameFinalize byte = 14
	MaxFrame           = 64 << 20
	// MaxFirstFrame bounds the first frame of a connection, read before the
	// secret is checked, and MaxJoinFrame the Join that follows a Hello: a
	// stranger makes the console read at most a few bytes.
	MaxFirstFrame = 512
	MaxJoinFrame  = 4096
)

// Hello is the first frame of a control connection. A worker sends it on
// its TCP connection as soon as it connects, with a nonce and a proof of
// the job secret (NewHello), which the console checks before it reads
// anything else; the connection is sealed after it (Seal). On the socket
// pair of a worker the L spawner starts, the console writes it with the
// secret itself for the worker to read.
type Hello struct {
	Secret string // the job secret, hex (socket pairs only)
	Nonce  string // NonceLen random bytes (TCP)
	Proof  string // HMAC-SHA-256 of the secret over the nonce (TCP)
}

// Settings is the console's configuration in envconf's binary form
// (envconf.AppendBinary), which a worker of the console's host, whose
// environment is the console's, takes instead of reading its own.
type Settings struct {
	Config []byte
}

// Join is the first frame a worker sends.
type Join struct {
	Rank  int    // requested rank, -1 for any
	Index int    // spawn index when the spawner knows it, else -1
	Host  string // host identity for grouping (GASNET_HOST_DETECT)
	Name  string // host name, for messages
	PID   int
	UDP   string // the worker's UDP address
	CPUs  int    // the CPUs this worker may use (runtime.NumCPU)
	Mask  string // which CPUs: its affinity mask (see FormatMask); "": unknown
	// Inbox is the path by which a process of the worker's host maps its
	// shared-memory inbox (amudp.Shared); "": it has none.
	Inbox string
	// Nets are the addresses at which the worker's UDP socket (bound to
	// every address of its host, on UDP's port) may be reached, best
	// known first, at most MaxNets; none when UDP is its only one.
	Nets []Net
}

// Net is an address a worker publishes (DESIGN.md §7.2): one of its
// host's, with its interface's prefix length and MTU (0: unknown).
type Net struct {
	Prefix netip.Prefix
	MTU    int
}

// MaxNets bounds the addresses of a Join.
const MaxNets = 64

// Welcome is the console's answer once every worker has joined.
type Welcome struct {
	Rank int
	Size int
	// Table is the address table in the relay's wire form (EncodeTable):
	// every rank's UDP address, host identity and shared-memory inbox
	// (Join.Inbox). Rank 0 only.
	Table []byte
	// Peers holds, for ranks other than 0, the UDP addresses of this rank
	// and its relay-tree neighbours; the rest of the table comes through
	// the tree (see package binomial).
	Peers map[int]string
	Env   map[string]string // the console's GASNET_*/AMUDP_* settings
	// HostCount is the number of ranks on this rank's host, itself
	// included, and HostCPUs the number of CPUs they may run on together
	// (the union of their affinity masks): see Oversubscribed.
	HostCount, HostCPUs int
	// Crowded says that some host of the job is oversubscribed: the same
	// for every rank, so that all choose the same barrier algorithm
	// (GASNET_BARRIER).
	Crowded bool
	// Protocol is the console's Protocol: a worker of another refuses
	// the job (an older amudprun would not know a newer program's frames).
	Protocol int
}

// Protocol numbers this version of the control protocol: a change of
// frames or of their bodies changes it. A Welcome of an older console has
// no Protocol, and an older worker cannot decode a newer Welcome: either
// way the worker refuses the job in one line.
const Protocol = 2

// Oversubscribed reports whether this rank's host has more ranks than
// CPUs for them (see the function Oversubscribed).
func (w *Welcome) Oversubscribed() bool { return Oversubscribed(w.HostCount, w.HostCPUs) }

// Coll says that a rank has waited long in a collective (In), or has left
// it: the console reports collectives that do not match (GASNET_HANG_WARN).
type Coll struct {
	Kind string // one of CollKinds
	Seq  uint64 // its number on this rank, from 1
	In   bool
	// Tree numbers a broadcast or reduction among all of the rank's
	// (an all-reduce is two: the first), from 1; 0 for other kinds. In a
	// program whose collectives match, tree collective n is the same call,
	// of the same root, on every rank.
	Tree uint64
	Root int // the root of a broadcast or reduction
	// Index numbers the call among all of the rank's collective calls,
	// of every kind, from 1: in a program whose collectives match, call k
	// is the same collective on every rank.
	Index uint64
	// Team is the id of the team of a team collective (InTeam; 0 is the
	// whole job's team), whose Seq numbers it among the team's.
	Team uint64
}

// InTeam reports whether c is a collective of a team (conduit's Team),
// which a rank may wait in while it waits in others: its Kind starts with
// "team ".
func (c Coll) InTeam() bool { return strings.HasPrefix(c.Kind, "team ") }

// String says where the rank waits: "in barrier 3", "in broadcast 2 from
// rank 1", "in team gather 4 of team 9e37 (root 0)".
func (c Coll) String() string {
	if c.InTeam() {
		team := fmt.Sprintf("team %x", c.Team)
		if c.Team == 0 {
			team = "the whole job's team"
		}
		return fmt.Sprintf("in %s %d of %s (root %d)", c.Kind, c.Seq, team, c.Root)
	}
	s := fmt.Sprintf("in %s %d", c.Kind, c.Seq)
	switch c.Kind {
	case "broadcast", "scatter":
		s += fmt.Sprintf(" from rank %d", c.Root)
	case "reduce", "gather":
		s += fmt.Sprintf(" to rank %d", c.Root)
	}
	return s
}

// CollKinds are the collectives of the whole job a rank reports
// (Coll.Kind), numbered together. Team collectives (InTeam)
// are numbered by team.
var CollKinds = map[string]bool{"barrier": true, "all-gather": true, "broadcast": true, "reduce": true, "all-reduce": true,
	"gather": true, "scatter": true, "all-to-all": true, "all-to-all-v": true, "split": true}

// ValidColl reports whether c names a collective a rank may report: one of
// CollKinds, or a team collective with a kind of at most 64 bytes.
func ValidColl(c Coll) bool { return CollKinds[c.Kind] || c.InTeam() && len(c.Kind) <= 64 }

// Code is the body of exit, finalize and terminate frames.
type Code struct {
	Code int
	// Why is, in an Exit frame, the reason a rank aborts the job (the
	// console reports it); empty for a plain Exit. In a Terminate frame it
	// says what ended the job when that was a rank's Exit(0) ("rank 3's
	// Exit(0)"), for the line of a rank ended inside a library call;
	// empty otherwise.
	Why string
}

// DecodeExit reads an Exit frame's body. A code outside a process's
// 0..255 (the library refuses them; a foreign client might not) is 1: it
// cannot be mistaken for success, nor for a job still running.
func DecodeExit(body []byte) Code {
	var c Code
	if DecodeBody(body, &c) != nil || c.Code < 0 || c.Code > 255 {
		c.Code = 1
	}
	return c
}

func WriteFrame(w io.Writer, typ byte, v Body) error {
	_, err := w.Write(EncodeFrame(typ, v))
	return err
}

// EncodeFrame returns the bytes of one frame.
func EncodeFrame(typ byte, v Body) []byte {
	f := v.AppendBody(make([]byte, 5, 64))
	f[0] = typ
	binary.LittleEndian.PutUint32(f[1:], uint32(len(f)-5))
	return f
}

func ReadFrame(r *bufio.Reader) (byte, []byte, error) { return ReadFrameMax(r, MaxFrame) }

// ReadFrameMax reads a frame whose body is at most limit bytes; a longer
// one is an error, and its body is not read.
func ReadFrameMax(r *bufio.Reader, limit uint32) (byte, []byte, error) {
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

// Output opens one routed output stream of a worker: after this frame, the
// connection carries the raw bytes of that stream.
type Output struct {
	Nonce  string // NonceLen random bytes
	Proof  string // of the job secret, the nonce and the rest (NewOutput)
	Stream int    // 1 stdout, 2 stderr
	Index  int    // spawn index, or -1
	PID    int
}

// Oversubscribed is the one rule by which udpconduit judges a host
// crowded: its ranks outnumber the CPUs they may run on together (cpus; 0:
// unknown, never crowded). package spawn documents it (spawn.Oversubscribed).
func Oversubscribed(ranks, cpus int) bool { return cpus > 0 && ranks > cpus }

// ShmRanksPerCPU is how many ranks per CPU a host may have and still
// share memory by default (SharesMemory).
const ShmRanksPerCPU = 512

// ShmCrowded reports whether a host of ranks ranks and cpus CPUs (0:
// unknown) is too crowded for shared memory by default: more than
// ShmRanksPerCPU ranks per CPU.
func ShmCrowded(ranks, cpus int) bool { return cpus > 0 && ranks > ShmRanksPerCPU*cpus }

// SharesMemory is the one rule by which the ranks of a host of ranks ranks
// and cpus CPUs exchange messages through shared memory: not with
// GASNET_SUPERNODE_MAXSIZE=1 (max), and on a host with more than
// ShmRanksPerCPU ranks per CPU only when that variable is set (set).
// package spawn documents it (spawn.SharesMemory).
func SharesMemory(max int, set bool, ranks, cpus int) bool {
	return max != 1 && (set || !ShmCrowded(ranks, cpus))
}
