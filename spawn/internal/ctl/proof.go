package ctl

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// A TCP connection of a worker shows the console that it knows the job
// secret without sending it (DESIGN.md §7.1): its first frame carries a
// random nonce and a proof, HMAC-SHA-256 keyed by the secret over what
// the frame is (Hello, or which Output stream) and the nonce. Someone who
// reads the connection learns neither the secret nor a proof that the
// console would take again (Nonces), and the connection's later bytes
// are sealed under keys drawn from the secret and that nonce (Seal).

// NonceLen is the size of a connection's nonce.
const NonceLen = 16

// prove returns the proof of a first frame whose purpose is what.
func prove(secret []byte, nonce string, what ...int) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("udpconduit ctl proof v1\x00"))
	m.Write([]byte(nonce))
	var b [8]byte
	for _, w := range what {
		binary.LittleEndian.PutUint64(b[:], uint64(w))
		m.Write(b[:])
	}
	return string(m.Sum(nil))
}

// newNonce returns a fresh random nonce.
func newNonce() string {
	var b [NonceLen]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return string(b[:])
}

// NewHello returns the Hello of a worker's TCP connection to the console
// of the job whose secret is secret.
func NewHello(secret []byte) Hello {
	n := newNonce()
	return Hello{Nonce: n, Proof: prove(secret, n, int(FrameHello))}
}

// Check reports whether h proves the job secret.
func (h Hello) Check(secret []byte) bool {
	return len(h.Nonce) == NonceLen && hmac.Equal([]byte(h.Proof), []byte(prove(secret, h.Nonce, int(FrameHello))))
}

// NewOutput returns the first frame of a routed output stream.
func NewOutput(secret []byte, stream, index, pid int) Output {
	o := Output{Nonce: newNonce(), Stream: stream, Index: index, PID: pid}
	o.Proof = prove(secret, o.Nonce, int(FrameOutput), stream, index, pid)
	return o
}

// Check reports whether o proves the job secret (for its stream, index
// and pid).
func (o Output) Check(secret []byte) bool {
	return len(o.Nonce) == NonceLen && hmac.Equal([]byte(o.Proof), []byte(prove(secret, o.Nonce, int(FrameOutput), o.Stream, o.Index, o.PID)))
}

// Nonces remembers the nonces of the first frames a console took, so that
// a recorded first frame sent again is refused.
type Nonces struct {
	mu   sync.Mutex
	seen map[string]struct{}
}

// Fresh records nonce and reports whether it was not seen before.
func (s *Nonces) Fresh(nonce string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.seen[nonce]; ok {
		return false
	}
	if s.seen == nil {
		s.seen = map[string]struct{}{}
	}
	s.seen[nonce] = struct{}{}
	return true
}
