// Package pmi is a client of the process-management interfaces that
// launchers serve to the tasks they start (DESIGN.md §9, direct launch):
// the PMI-1 wire protocol of MPICH's Hydra (mpiexec.hydra) and the PMI-2
// wire protocol of SLURM's mpi_pmi2 plugin (srun --mpi=pmi2), both over the
// descriptor the launcher names in PMI_FD. It gives a task its rank and the
// job's size, and a key-value store whose fence makes every task's puts
// visible to every task: what a job needs to exchange its addresses
// without a console. It is written from the protocols' text forms; no
// libpmi.
//
// The framing of each protocol is pure (this file): messages are built and
// parsed here and tested without a launcher; client.go runs them over a
// connection.
package pmi

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Msg is one message of either protocol: its command and its attributes,
// in order.
type Msg struct {
	Cmd   string
	Attrs []Attr
}

// Attr is a key and its value.
type Attr struct{ Key, Value string }

// Get returns the value of key, and whether the message has it.
func (m Msg) Get(key string) (string, bool) {
	for _, a := range m.Attrs {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// Int returns the value of key as an integer.
func (m Msg) Int(key string) (int, error) {
	v, ok := m.Get(key)
	if !ok {
		return 0, fmt.Errorf("pmi: %s reply without %s", m.Cmd, key)
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("pmi: %s reply: %s=%q is not an integer", m.Cmd, key, v)
	}
	return n, nil
}

// MaxLine bounds one message of either protocol, as the launchers' own
// buffers do (PMI-1's 1024-byte lines, PMI-2's 6-digit length).
const MaxLine = 1 << 16

// Errors of parsing.
var (
	ErrFormat = errors.New("pmi: malformed message")
	ErrLong   = errors.New("pmi: message too long")
)

// v1 is the PMI-1 wire form: "cmd=NAME key=value ...\n", attributes
// separated by spaces; a value holds no space, '=' or newline (values of
// this package are encoded so, see Encode).

// appendV1 appends m in PMI-1's form.
func appendV1(b []byte, m Msg) []byte {
	b = append(append(b, "cmd="...), m.Cmd...)
	for _, a := range m.Attrs {
		b = append(append(append(append(b, ' '), a.Key...), '='), a.Value...)
	}
	return append(b, '\n')
}

// parseV1 parses one PMI-1 line, without its newline. Hydra also answers
// in the "mcmd=" form of spawn requests, which nothing here sends.
func parseV1(line string) (Msg, error) {
	var m Msg
	for i, f := range strings.Fields(line) {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return Msg{}, fmt.Errorf("%w: %q", ErrFormat, line)
		}
		if i == 0 {
			if k != "cmd" || v == "" {
				return Msg{}, fmt.Errorf("%w: %q does not start with cmd=", ErrFormat, line)
			}
			m.Cmd = v
			continue
		}
		m.Attrs = append(m.Attrs, Attr{k, v})
	}
	if m.Cmd == "" {
		return Msg{}, fmt.Errorf("%w: empty line", ErrFormat)
	}
	return m, nil
}

// v2 is the PMI-2 wire form: a 6-character decimal length, padded with
// spaces, then that many bytes "cmd=NAME;key=value;...;", where a ';' in a
// key or value is doubled.

// appendV2 appends m in PMI-2's form.
func appendV2(b []byte, m Msg) []byte {
	var body strings.Builder
	body.WriteString("cmd=")
	body.WriteString(escapeV2(m.Cmd))
	body.WriteByte(';')
	for _, a := range m.Attrs {
		body.WriteString(escapeV2(a.Key))
		body.WriteByte('=')
		body.WriteString(escapeV2(a.Value))
		body.WriteByte(';')
	}
	b = append(b, fmt.Sprintf("%-6d", body.Len())...)
	return append(b, body.String()...)
}

func escapeV2(s string) string { return strings.ReplaceAll(s, ";", ";;") }

// v2Length parses the 6-character length of a PMI-2 message. Past
// MaxLine it returns the length with ErrLong, for the reader to skip the
// body and stay in step with the stream.
func v2Length(head []byte) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(string(head)))
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%w: length %q", ErrFormat, head)
	}
	if n > MaxLine {
		return n, fmt.Errorf("%w: %d bytes", ErrLong, n)
	}
	return n, nil
}

// parseV2 parses the body of a PMI-2 message.
func parseV2(body string) (Msg, error) {
	var m Msg
	first := true
	for len(body) > 0 {
		// A field ends at a ';' that is not doubled.
		var f strings.Builder
		i := 0
		for ; i < len(body); i++ {
			if body[i] == ';' {
				if i+1 < len(body) && body[i+1] == ';' {
					f.WriteByte(';')
					i++
					continue
				}
				break
			}
			f.WriteByte(body[i])
		}
		if i == len(body) {
			return Msg{}, fmt.Errorf("%w: %q lacks its final ';'", ErrFormat, body)
		}
		body = body[i+1:]
		k, v, ok := strings.Cut(f.String(), "=")
		if !ok || k == "" {
			return Msg{}, fmt.Errorf("%w: field %q", ErrFormat, f.String())
		}
		if first {
			if k != "cmd" || v == "" {
				return Msg{}, fmt.Errorf("%w: %q does not start with cmd=", ErrFormat, f.String())
			}
			m.Cmd, first = v, false
			continue
		}
		m.Attrs = append(m.Attrs, Attr{k, v})
	}
	if first {
		return Msg{}, fmt.Errorf("%w: empty message", ErrFormat)
	}
	return m, nil
}
