package ctl

import (
	"errors"
	"maps"
	"slices"

	"github.com/udpconduit/udpconduit/internal/varenc"
)

// The bodies of control frames are binary: each type's fields in a fixed
// order, integers as varints (signed ones zig-zag), strings and lists as a
// uvarint length then their bytes or elements, maps as a list of key/value
// pairs sorted by key: one idiom, without reflection, for every frame (and
// the spawn tree's line, see launch.TreeInfo).

// Body is the body of a control frame, to send.
type Body interface{ AppendBody(b []byte) []byte }

// BodyReader is the body of a control frame, to receive.
type BodyReader interface{ ReadBody(d *varenc.Decoder) }

// NoBody is the body of frames that carry none (ping, pong, barrier).
type NoBody struct{}

func (NoBody) AppendBody(b []byte) []byte { return b }

var ErrMalformed = errors.New("spawn: malformed control frame")

// DecodeBody decodes a frame's body into v: it fails on a truncated body,
// on bytes left over, on an integer outside int32, on a list longer than
// the bytes left and on a bool other than 0 or 1.
func DecodeBody(b []byte, v BodyReader) error {
	d := varenc.Decoder{B: b}
	v.ReadBody(&d)
	if d.Bad || len(d.B) != 0 {
		return ErrMalformed
	}
	return nil
}

func (h Hello) AppendBody(b []byte) []byte {
	return varenc.AppendString(varenc.AppendString(varenc.AppendString(b, h.Secret), h.Nonce), h.Proof)
}
func (h *Hello) ReadBody(d *varenc.Decoder) {
	h.Secret, h.Nonce, h.Proof = d.String(), d.String(), d.String()
}

func (s Settings) AppendBody(b []byte) []byte  { return varenc.AppendBytes(b, s.Config) }
func (s *Settings) ReadBody(d *varenc.Decoder) { s.Config = d.Bytes() }

func (j Join) AppendBody(b []byte) []byte {
	b = varenc.AppendInt(varenc.AppendInt(b, j.Rank), j.Index)
	b = varenc.AppendString(varenc.AppendString(b, j.Host), j.Name)
	b = varenc.AppendString(varenc.AppendInt(varenc.AppendString(varenc.AppendInt(b, j.PID), j.UDP), j.CPUs), j.Mask)
	return appendNets(varenc.AppendString(b, j.Inbox), j.Nets)
}

func (j *Join) ReadBody(d *varenc.Decoder) {
	j.Rank, j.Index = d.Int(), d.Int()
	j.Host, j.Name = d.String(), d.String()
	j.PID, j.UDP, j.CPUs, j.Mask = d.Int(), d.String(), d.Int(), d.String()
	j.Inbox = d.String()
	j.Nets = readNets(d)
}

func (w Welcome) AppendBody(b []byte) []byte {
	b = varenc.AppendInt(varenc.AppendInt(b, w.Rank), w.Size)
	b = varenc.AppendBytes(b, w.Table)
	b = varenc.AppendUint(b, uint64(len(w.Peers)))
	for _, r := range slices.Sorted(maps.Keys(w.Peers)) {
		b = varenc.AppendString(varenc.AppendInt(b, r), w.Peers[r])
	}
	b = varenc.AppendUint(b, uint64(len(w.Env)))
	for _, k := range slices.Sorted(maps.Keys(w.Env)) {
		b = varenc.AppendString(varenc.AppendString(b, k), w.Env[k])
	}
	b = varenc.AppendBool(varenc.AppendInt(varenc.AppendInt(b, w.HostCount), w.HostCPUs), w.Crowded)
	return varenc.AppendInt(b, w.Protocol)
}

func (w *Welcome) ReadBody(d *varenc.Decoder) {
	w.Rank, w.Size = d.Int(), d.Int()
	w.Table = d.Bytes()
	w.Peers = nil
	if n := d.Count(); n > 0 {
		w.Peers = make(map[int]string, n)
		for range n {
			r := d.Int()
			w.Peers[r] = d.String()
		}
	}
	n := d.Count()
	w.Env = make(map[string]string, n)
	for range n {
		k := d.String()
		w.Env[k] = d.String()
	}
	w.HostCount, w.HostCPUs, w.Crowded = d.Int(), d.Int(), d.Bool()
	w.Protocol = d.Int()
}

func (c Coll) AppendBody(b []byte) []byte {
	b = varenc.AppendBool(varenc.AppendUint(varenc.AppendString(b, c.Kind), c.Seq), c.In)
	return varenc.AppendUint(varenc.AppendUint(varenc.AppendInt(varenc.AppendUint(b, c.Tree), c.Root), c.Index), c.Team)
}

func (c *Coll) ReadBody(d *varenc.Decoder) {
	c.Kind, c.Seq, c.In, c.Tree, c.Root, c.Index, c.Team = d.String(), d.Uint(), d.Bool(), d.Uint(), d.Int(), d.Uint(), d.Uint()
}

func (c Code) AppendBody(b []byte) []byte {
	return varenc.AppendString(varenc.AppendInt(b, c.Code), c.Why)
}
func (c *Code) ReadBody(d *varenc.Decoder) { c.Code, c.Why = d.Int(), d.String() }

func (o Output) AppendBody(b []byte) []byte {
	b = varenc.AppendString(varenc.AppendString(b, o.Nonce), o.Proof)
	return varenc.AppendInt(varenc.AppendInt(varenc.AppendInt(b, o.Stream), o.Index), o.PID)
}

func (o *Output) ReadBody(d *varenc.Decoder) {
	o.Nonce, o.Proof, o.Stream, o.Index, o.PID = d.String(), d.String(), d.Int(), d.Int(), d.Int()
}
