package conduit

import "github.com/udpconduit/udpconduit/amudp"

// Prepared is a request or reply whose payload the program writes into
// the conduit's own buffer (Payload) before it sends it (Commit):
// GASNet-EX's negotiated-payload messages with a GASNet-provided buffer
// (gex_AM_PrepareRequestMedium, gex_AM_CommitRequestMedium and the
// Reply and Long forms). Over UDP the buffer is the datagram the conduit
// keeps for retransmission, so a
// payload the program builds there is not copied again before it goes;
// a Long to a rank whose segment this rank maps (LocalView) is written at
// its destination. Elsewhere it is a buffer of the conduit's, copied at
// Commit as RequestMedium copies the program's.
//
// A prepared request holds one of the destination's credits until
// Commit: commit each one once, from the goroutine that prepared it,
// before that goroutine prepares or sends another request (GASNet-EX asks
// the same). A prepared reply (Token.PrepareReplyMedium,
// Token.PrepareReplyLong) is the handler's reply, committed before the
// handler returns.
type Prepared struct {
	j  *Job // a request's; nil for a reply
	pr amudp.Prepared
}

// PrepareRequestMedium prepares a Medium request to dest of up to n
// payload bytes (0..MaxMedium) with nargs arguments, waiting for credit
// as RequestMedium does.
func (j *Job) PrepareRequestMedium(dest, n, nargs int) (Prepared, error) {
	return j.prepare(dest, amudp.Medium, n, nargs, 0)
}

// PrepareRequestLong prepares a Long request to dest of up to n payload
// bytes, written at offset of dest's segment, with nargs arguments.
func (j *Job) PrepareRequestLong(dest, n, nargs int, offset uint64) (Prepared, error) {
	return j.prepare(dest, amudp.Long, n, nargs, offset)
}

func (j *Job) prepare(dest int, cat amudp.Category, n, nargs int, offset uint64) (Prepared, error) {
	ep := j.enter()
	if !j.attached.Load() {
		return Prepared{}, ErrNotAttached
	}
	if cat == amudp.Long {
		if err := j.checkRemote(dest, offset, n); err != nil {
			return Prepared{}, err
		}
	}
	pr, err := ep.PrepareRequest(dest, cat, n, nargs, offset)
	if err != nil {
		return Prepared{}, j.done(err)
	}
	return Prepared{j: j, pr: pr}, nil
}

// Payload returns the buffer to write the payload into: the n bytes
// prepared (PrepareRequestMedium, PrepareRequestLong, or a Token's
// PrepareReplyMedium or PrepareReplyLong). It is the conduit's after
// Commit and must not be used then.
func (p *Prepared) Payload() []byte { return p.pr.Payload() }

// Commit sends the request or reply to handler (128..255) with the first
// n bytes of Payload and args, as many as prepared. A second Commit, or
// one of a Prepared that no Prepare returned, is an error; so is a bad
// handler, n or number of arguments, and then nothing is sent: a
// request's credit returns, and a reply's handler sends the automatic
// reply when it returns.
func (p *Prepared) Commit(handler, n int, args ...uint32) error {
	j := p.j
	if j == nil {
		return p.pr.Commit(handler, n, args...) // a reply's, or ErrNotPrepared
	}
	p.j = nil
	if _, err := j.clientCall(handler); err != nil {
		if rerr := p.pr.Release(); rerr != nil {
			return rerr
		}
		return err
	}
	return j.done(p.pr.Commit(handler, n, args...))
}

// PrepareReplyMedium prepares the handler's reply as a Medium one of up
// to n payload bytes (0..MaxMedium) with nargs arguments
// (gex_AM_PrepareReplyMedium): over UDP its Payload is the reply datagram
// the conduit keeps for a retransmitted request. Commit it before the
// handler returns; one left prepared is not sent, and the automatic reply
// goes instead. While it is prepared the token sends no other reply.
func (t *Token) PrepareReplyMedium(n, nargs int) (Prepared, error) {
	pr, err := (*amudp.Token)(t).PrepareReply(amudp.Medium, n, nargs, 0)
	return Prepared{pr: pr}, err
}

// PrepareReplyLong is PrepareReplyMedium of a Long reply written at
// offset of the requester's segment; to a rank whose segment this rank
// maps, Payload is the destination itself.
func (t *Token) PrepareReplyLong(n, nargs int, offset uint64) (Prepared, error) {
	pr, err := (*amudp.Token)(t).PrepareReply(amudp.Long, n, nargs, offset)
	return Prepared{pr: pr}, err
}
