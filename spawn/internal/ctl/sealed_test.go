package ctl

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
)

// TestProofs: a Hello or an Output proves the secret it was made with,
// for the stream, index and pid it names, and does not carry the secret;
// Nonces takes each nonce once.
func TestProofs(t *testing.T) {
	secret := []byte("00ff00ff")
	h := NewHello(secret)
	if !h.Check(secret) || h.Check([]byte("00ff00fe")) {
		t.Error("a Hello proves the wrong secret or not its own")
	}
	if bytes.Contains(EncodeFrame(FrameHello, h), secret) {
		t.Error("a Hello carries the secret")
	}
	o := NewOutput(secret, 1, 4, 99)
	if !o.Check(secret) {
		t.Error("an Output does not prove its secret")
	}
	for _, moved := range []Output{{Stream: 2, Index: 4, PID: 99}, {Stream: 1, Index: 5, PID: 99}, {Stream: 1, Index: 4, PID: 98}} {
		moved.Nonce, moved.Proof = o.Nonce, o.Proof
		if moved.Check(secret) {
			t.Errorf("an Output's proof holds for %+v", moved)
		}
	}
	short := h
	short.Nonce = h.Nonce[:NonceLen-1]
	short.Proof = prove(secret, short.Nonce, int(FrameHello))
	if short.Check(secret) {
		t.Error("a Hello with a short nonce passes")
	}
	var n Nonces
	if !n.Fresh(h.Nonce) || n.Fresh(h.Nonce) || !n.Fresh(o.Nonce) {
		t.Error("Nonces does not take each nonce exactly once")
	}
}

// sealedPair returns the two ends of a sealed pipe: a worker's and the
// console's.
func sealedPair(secret []byte, nonce string) (worker, console net.Conn, wraw, craw net.Conn) {
	a, b := net.Pipe()
	return Seal(a, a, secret, nonce, false), Seal(b, b, secret, nonce, true), a, b
}

// TestSealedConn: bytes written on a sealed connection, in records of any
// size, arrive intact both ways and are not on the wire in clear; a
// record altered, repeated, or sealed under another nonce or secret
// makes the reader fail with ErrSealed.
func TestSealedConn(t *testing.T) {
	secret := []byte("job secret")
	w, c, _, _ := sealedPair(secret, "nonce-0123456789")
	msg := bytes.Repeat([]byte("frame bytes "), 10000) // several records
	for _, dir := range []struct{ from, to net.Conn }{{w, c}, {c, w}} {
		go func() { dir.from.Write(msg); dir.from.Write([]byte("end")) }()
		got := make([]byte, len(msg)+3)
		if _, err := io.ReadFull(dir.to, got); err != nil || !bytes.Equal(got, append(msg, "end"...)) {
			t.Fatalf("the bytes did not arrive intact: %v", err)
		}
	}

	// What goes on the wire, record by record.
	capture := func(writes ...string) []byte {
		a, b := net.Pipe()
		s := Seal(a, a, secret, "nonce-0123456789", false)
		go func() {
			for _, m := range writes {
				s.Write([]byte(m))
			}
			a.Close()
		}()
		wire, _ := io.ReadAll(b)
		return wire
	}
	wire := capture("first record", "second record")
	if bytes.Contains(wire, []byte("record")) {
		t.Error("the records are on the wire in clear")
	}
	rec := 4 + len("first record") + 16 // the first record's length
	read := func(wire []byte, secret []byte, nonce string) error {
		a, b := net.Pipe()
		go func() { a.Write(wire); a.Close() }()
		s := Seal(b, b, secret, nonce, true)
		_, err := io.ReadAll(s)
		return err
	}
	if err := read(wire, secret, "nonce-0123456789"); err != nil {
		t.Fatalf("the captured records do not read back: %v", err)
	}
	altered := bytes.Clone(wire)
	altered[rec+6] ^= 1
	repeated := append(bytes.Clone(wire[:rec]), wire[:rec]...)
	for name, tc := range map[string]struct {
		wire   []byte
		secret string
		nonce  string
	}{
		"an altered record":         {altered, "job secret", "nonce-0123456789"},
		"a repeated record":         {repeated, "job secret", "nonce-0123456789"},
		"the second record first":   {append(bytes.Clone(wire[rec:]), wire[:rec]...), "job secret", "nonce-0123456789"},
		"another connection's":      {wire, "job secret", "nonce-9876543210"},
		"another job's":             {wire, "other secret", "nonce-0123456789"},
		"a record of 1 GiB claimed": {[]byte{0, 0, 0, 0x40}, "job secret", "nonce-0123456789"},
	} {
		if err := read(tc.wire, []byte(tc.secret), tc.nonce); !errors.Is(err, ErrSealed) {
			t.Errorf("%s: %v, want ErrSealed", name, err)
		}
	}
}
