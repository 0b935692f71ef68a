package ctl

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/udpconduit/udpconduit/spawn/varenc"
)

// Table is what the relay carries: every rank's UDP address, host
// identity and shared-memory inbox ("" for none).
type Table struct {
	Addrs   []string
	Hosts   []string
	Inboxes []string
}

// The relay's wire form of a Table (DESIGN.md §7), encoded once by rank 0
// and forwarded unchanged by every other rank, so that each worker decodes
// it once and encodes nothing:
//
//	byte     tableVersion
//	uvarint  number of distinct hosts H, then H × (uvarint length, bytes)
//	uvarint  number of ranks N, then N × (uvarint host index < H,
//	         uvarint length, address bytes, inbox)
//
// where an inbox is a uvarint form: 0 none; 1 a /proc/PID/fd/FD path as
// uvarint PID, uvarint FD; 2 any other path as uvarint length, bytes.
// A job's ranks share a few hosts, so each rank costs its address and five
// to seven bytes; spelt out, the paths about doubled the table.
const tableVersion = 3

// The forms of an inbox in the table.
const (
	inboxNone = iota
	inboxProc
	inboxPath
)

// EncodeTable returns the relay's wire form of t, whose Addrs and Hosts
// have one entry per rank (package varenc's encoding).
func EncodeTable(t Table) []byte {
	index := map[string]int{}
	var hosts []string
	size := 1 + 2*binary.MaxVarintLen64
	for _, h := range t.Hosts {
		if _, ok := index[h]; !ok {
			index[h] = len(hosts)
			hosts = append(hosts, h)
			size += binary.MaxVarintLen64 + len(h)
		}
	}
	for r, a := range t.Addrs {
		size += 5*binary.MaxVarintLen64 + len(a) + len(inbox(t, r))
	}
	b := append(make([]byte, 0, size), tableVersion)
	b = varenc.AppendStrings(b, hosts)
	b = varenc.AppendUint(b, uint64(len(t.Addrs)))
	for r, a := range t.Addrs {
		b = varenc.AppendString(varenc.AppendUint(b, uint64(index[t.Hosts[r]])), a)
		b = appendInbox(b, inbox(t, r))
	}
	return b
}

// appendInbox appends path's form in the table.
func appendInbox(b []byte, path string) []byte {
	if path == "" {
		return varenc.AppendUint(b, inboxNone)
	}
	if pid, fd, ok := procPath(path); ok {
		return varenc.AppendUint(varenc.AppendUint(varenc.AppendUint(b, inboxProc), pid), fd)
	}
	return varenc.AppendString(varenc.AppendUint(b, inboxPath), path)
}

// readInbox reads an inbox that appendInbox wrote.
func readInbox(d *varenc.Decoder) string {
	switch d.Uint() {
	case inboxNone:
		return ""
	case inboxProc:
		pid, fd := d.Uint(), d.Uint()
		if d.Bad {
			return ""
		}
		return procFD(pid, fd)
	case inboxPath:
		if s := d.String(); s != "" {
			return s
		}
	}
	d.Bad = true
	return ""
}

// procFD is the path of descriptor fd of process pid.
func procFD(pid, fd uint64) string {
	return "/proc/" + strconv.FormatUint(pid, 10) + "/fd/" + strconv.FormatUint(fd, 10)
}

// procPath parses a path that procFD writes, and only those.
func procPath(path string) (pid, fd uint64, ok bool) {
	rest, found := strings.CutPrefix(path, "/proc/")
	if !found {
		return 0, 0, false
	}
	p, f, found := strings.Cut(rest, "/fd/")
	if !found {
		return 0, 0, false
	}
	pid, err1 := strconv.ParseUint(p, 10, 64)
	fd, err2 := strconv.ParseUint(f, 10, 64)
	if err1 != nil || err2 != nil || procFD(pid, fd) != path {
		return 0, 0, false
	}
	return pid, fd, true
}

// inbox is rank r's inbox in t, "" when t has none.
func inbox(t Table, r int) string {
	if r < len(t.Inboxes) {
		return t.Inboxes[r]
	}
	return ""
}

// DecodeTable parses a relayed table of n ranks. Its strings share one
// copy of b.
func DecodeTable(b []byte, n int) (Table, error) {
	bad := fmt.Errorf("relayed address table is malformed (%d bytes for %d ranks)", len(b), n)
	if len(b) == 0 || b[0] != tableVersion {
		return Table{}, bad
	}
	d := varenc.Shared(b[1:])
	hosts := d.Strings()
	if d.Bad || len(hosts) == 0 || len(hosts) > n { // distinct hosts of n >= 1 ranks
		return Table{}, bad
	}
	if nr := d.Uint(); d.Bad || nr != uint64(n) {
		return Table{}, bad
	}
	t := Table{Addrs: make([]string, n), Hosts: make([]string, n), Inboxes: make([]string, n)}
	for r := range n {
		h := d.Uint()
		if d.Bad || h >= uint64(len(hosts)) {
			return Table{}, bad
		}
		t.Hosts[r], t.Addrs[r] = hosts[h], d.String()
		t.Inboxes[r] = readInbox(&d)
	}
	if d.Bad || len(d.B) != 0 {
		return Table{}, bad
	}
	return t, nil
}
