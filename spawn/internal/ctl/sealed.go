package ctl

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// maxRecord is the largest plaintext of one sealed record.
const maxRecord = 16 << 10

// ErrSealed is what reading a sealed connection returns for a record that
// does not open: altered, cut, replayed, or not sealed by the other end.
var ErrSealed = errors.New("ctl: a sealed record of the connection does not open")

// sealed is a connection whose bytes travel in records sealed with
// AES-128-GCM: a 4-byte little-endian length, then the ciphertext and its
// tag. Each direction has its own key, drawn from the job secret and the
// connection's nonce, and numbers its records from 0 as their nonces.
type sealed struct {
	net.Conn
	r io.Reader

	wmu    sync.Mutex
	out    cipher.AEAD
	outCtr uint64
	wbuf   []byte

	in      cipher.AEAD
	inCtr   uint64
	rbuf    []byte
	pending []byte
	err     error
}

// Seal returns c with the bytes after its first frame sealed, as both ends
// call it once the worker's first frame (nonce, its Hello's) is written or
// checked. r reads c: a reader that may hold bytes read past the first
// frame, or c itself. console says which end calls it.
func Seal(c net.Conn, r io.Reader, secret []byte, nonce string, console bool) net.Conn {
	w2c, c2w := sealKey(secret, nonce, "worker to console"), sealKey(secret, nonce, "console to worker")
	s := &sealed{Conn: c, r: r, out: w2c, in: c2w}
	if console {
		s.out, s.in = c2w, w2c
	}
	return s
}

func sealKey(secret []byte, nonce, dir string) cipher.AEAD {
	h := sha256.New()
	h.Write([]byte("udpconduit ctl seal v1\x00" + dir + "\x00"))
	h.Write([]byte(nonce))
	h.Write(secret)
	block, err := aes.NewCipher(h.Sum(nil)[:16])
	if err != nil { // a 16-byte key is always valid
		panic(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic(err)
	}
	return aead
}

func recordNonce(ctr uint64) []byte {
	var n [12]byte
	binary.LittleEndian.PutUint64(n[:], ctr)
	return n[:]
}

// Write seals p in records of at most maxRecord bytes and writes them.
func (s *sealed) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	done := 0
	for done < len(p) {
		chunk := p[done:min(len(p), done+maxRecord)]
		b := binary.LittleEndian.AppendUint32(s.wbuf[:0], uint32(len(chunk)+s.out.Overhead()))
		b = s.out.Seal(b, recordNonce(s.outCtr), chunk, nil)
		s.wbuf = b
		s.outCtr++
		if _, err := s.Conn.Write(b); err != nil {
			return done, err
		}
		done += len(chunk)
	}
	return done, nil
}

// Read returns bytes of the records that opened.
func (s *sealed) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		s.pending, s.err = s.record()
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// record reads and opens the next record.
func (s *sealed) record() ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(s.r, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:]))
	if n < s.in.Overhead() || n > maxRecord+s.in.Overhead() {
		return nil, fmt.Errorf("%w (a record of %d bytes)", ErrSealed, n)
	}
	if cap(s.rbuf) < n {
		s.rbuf = make([]byte, n)
	}
	b := s.rbuf[:n]
	if _, err := io.ReadFull(s.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	pt, err := s.in.Open(b[:0], recordNonce(s.inCtr), b, nil)
	if err != nil {
		return nil, ErrSealed
	}
	s.inCtr++
	return pt, nil
}
