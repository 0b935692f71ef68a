package pmi

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/internal/testbound"
)

// fakeServer serves either protocol to n tasks over pipes, as Hydra
// (PMI-1) and SLURM's mpi_pmi2 (PMI-2) answer: a key-value store whose
// puts are visible after a fence that every task entered.
type fakeServer struct {
	v2     bool
	n      int
	maxVal int
	mu     sync.Mutex
	cond   *sync.Cond
	kvs    map[string]string
	staged map[string]string
	in     int // tasks in the current fence
	gen    int
	puts   int
	attrs  map[string]string // node attributes: every task on one node
	abort  chan string       // the body of a PMI-2 abort, as it came
}

func newFakeServer(n int, v2 bool) *fakeServer {
	s := &fakeServer{v2: v2, n: n, maxVal: 256, kvs: map[string]string{}, staged: map[string]string{}, attrs: map[string]string{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// serve answers task rank on c until it finalizes or c closes.
func (s *fakeServer) serve(c io.ReadWriter, rank int) {
	r := bufio.NewReader(c)
	write := func(m Msg) {
		if s.v2 {
			c.Write(appendV2(nil, m))
		} else {
			c.Write(appendV1(nil, m))
		}
	}
	inited := false
	for {
		var m Msg
		var err error
		if s.v2 && inited {
			var head [6]byte
			if _, err = io.ReadFull(r, head[:]); err != nil {
				return
			}
			n, err := v2Length(head[:])
			if err != nil {
				return
			}
			body := make([]byte, n)
			if _, err = io.ReadFull(r, body); err != nil {
				return
			}
			if strings.HasPrefix(string(body), "cmd=abort;") && s.abort != nil {
				s.abort <- string(body)
				return
			}
			m, err = parseV2(string(body))
			if err != nil {
				return
			}
		} else {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			if m, err = parseV1(strings.TrimSuffix(line, "\n")); err != nil {
				return
			}
		}
		rc := func(cmd string, a ...Attr) Msg { return Msg{Cmd: cmd, Attrs: append([]Attr{{"rc", "0"}}, a...)} }
		switch m.Cmd {
		case "init":
			inited = true
			if want, _ := m.Get("pmi_version"); want != map[bool]string{false: "1", true: "2"}[s.v2] {
				return
			}
			// The answer to the init line is in PMI-1's form, as SLURM's.
			c.Write(appendV1(nil, rc("response_to_init", Attr{"pmi_version", m.Attrs[0].Value}, Attr{"pmi_subversion", "0"})))
		case "get_maxes":
			write(Msg{Cmd: "maxes", Attrs: []Attr{{"kvsname_max", "256"}, {"keylen_max", "64"}, {"vallen_max", strconv.Itoa(s.maxVal)}}})
		case "get_my_kvsname":
			write(Msg{Cmd: "my_kvsname", Attrs: []Attr{{"kvsname", "kvs_7_0"}}})
		case "fullinit":
			if id, _ := m.Get("pmijobid"); id == "" { // SLURM's refusal
				write(Msg{Cmd: "fullinit-response", Attrs: []Attr{{"rc", "3"}}})
				return
			}
			write(rc("fullinit-response", Attr{"pmi-version", "2"}, Attr{"pmi-subversion", "0"}, Attr{"rank", strconv.Itoa(rank)}, Attr{"size", strconv.Itoa(s.n)}, Attr{"appnum", "0"}))
		case "put", "kvs-put":
			k, _ := m.Get("key")
			v, _ := m.Get("value")
			s.mu.Lock()
			s.staged[k] = v
			s.puts++
			s.mu.Unlock()
			if s.v2 {
				write(rc("kvs-put-response"))
			} else {
				write(rc("put_result", Attr{"msg", "success"}))
			}
		case "barrier_in", "kvs-fence":
			s.mu.Lock()
			gen := s.gen
			if s.in++; s.in == s.n {
				for k, v := range s.staged {
					s.kvs[k] = v
				}
				s.in, s.gen = 0, s.gen+1
				s.cond.Broadcast()
			}
			for s.gen == gen {
				s.cond.Wait()
			}
			s.mu.Unlock()
			if s.v2 {
				write(rc("kvs-fence-response"))
			} else {
				write(Msg{Cmd: "barrier_out"})
			}
		case "get", "kvs-get":
			k, _ := m.Get("key")
			s.mu.Lock()
			v, ok := s.kvs[k]
			s.mu.Unlock()
			switch {
			case s.v2 && ok:
				write(rc("kvs-get-response", Attr{"found", "TRUE"}, Attr{"value", v}))
			case s.v2:
				write(rc("kvs-get-response", Attr{"found", "FALSE"}))
			case ok:
				write(rc("get_result", Attr{"msg", "success"}, Attr{"value", v}))
			default:
				write(Msg{Cmd: "get_result", Attrs: []Attr{{"rc", "-1"}, {"msg", "key_" + k + "_not_found"}}})
			}
		case "info-putnodeattr":
			k, _ := m.Get("key")
			v, _ := m.Get("value")
			s.mu.Lock()
			s.attrs[k] = v
			s.mu.Unlock()
			write(rc("info-putnodeattr-response"))
		case "info-getnodeattr", "info-getjobattr":
			k, _ := m.Get("key")
			s.mu.Lock()
			v, ok := s.attrs[k]
			s.mu.Unlock()
			if m.Cmd == "info-getjobattr" {
				v, ok = map[string]string{"PMI_process_mapping": fmt.Sprintf("(vector,(0,1,%d))", s.n), "long": strings.Repeat("x", MaxLine+10)}[k]
			}
			if ok {
				write(rc(m.Cmd+"-response", Attr{"found", "TRUE"}, Attr{"value", v}))
			} else {
				write(rc(m.Cmd+"-response", Attr{"found", "FALSE"}))
			}
		case "finalize":
			if s.v2 {
				write(rc("finalize-response"))
			} else {
				write(Msg{Cmd: "finalize_ack"})
			}
			return
		}
	}
}

// TestExchange: tasks put values, short and longer than the server takes,
// with any bytes; after a fence each reads every task's, under both
// protocols.
func TestExchange(t *testing.T) {
	for _, v2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("PMI-%d", map[bool]int{false: 1, true: 2}[v2]), func(t *testing.T) {
			const n = 4
			s := newFakeServer(n, v2)
			value := func(r int) []byte {
				return bytes.Repeat([]byte(fmt.Sprintf("rank %d; = \n\x00 ", r)), 1+r*30) // rank 3: past 256 bytes encoded
			}
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for r := range n {
				a, b := net.Pipe()
				go s.serve(b, r)
				wg.Add(1)
				go func() {
					defer wg.Done()
					env := Env{Rank: r, Size: n}
					if v2 {
						env.JobID = "7.0"
					}
					c, err := NewClient(a, env)
					if err != nil {
						errs <- err
						return
					}
					if err := c.Put("addr-"+strconv.Itoa(r), value(r)); err != nil {
						errs <- err
						return
					}
					if err := c.Fence(); err != nil {
						errs <- err
						return
					}
					for o := range n {
						got, err := c.Get("addr-" + strconv.Itoa(o))
						if err != nil {
							errs <- err
							return
						}
						if !bytes.Equal(got, value(o)) {
							errs <- fmt.Errorf("rank %d reads rank %d's value as %q", r, o, got)
							return
						}
					}
					if _, err := c.Get("nobody"); err == nil {
						errs <- errors.New("a key nobody put was found")
					}
					errs <- c.Finalize()
				}()
			}
			wg.Wait()
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			if s.puts <= n {
				t.Errorf("%d puts for %d tasks: the long value was not split", s.puts, n)
			}
		})
	}
}

// TestFraming: each protocol's messages as they appear on the wire, and
// back.
func TestFraming(t *testing.T) {
	m := Msg{Cmd: "kvs-put", Attrs: []Attr{{"key", "a;b"}, {"value", "x=y;;z"}}}
	v2 := string(appendV2(nil, m))
	if want := "36    cmd=kvs-put;key=a;;b;value=x=y;;;;z;"; v2 != want {
		t.Errorf("PMI-2: %q, want %q", v2, want)
	}
	n, err := v2Length([]byte(v2[:6]))
	if err != nil || n != len(v2)-6 {
		t.Fatalf("length %d, %v", n, err)
	}
	if got, err := parseV2(v2[6:]); err != nil || !cmp.Equal(got, m) {
		t.Errorf("PMI-2 parsed back: %+v, %v", got, err)
	}
	m1 := Msg{Cmd: "put", Attrs: []Attr{{"kvsname", "kvs_1"}, {"key", "k"}, {"value", "vAbc-_"}}}
	v1 := string(appendV1(nil, m1))
	if want := "cmd=put kvsname=kvs_1 key=k value=vAbc-_\n"; v1 != want {
		t.Errorf("PMI-1: %q, want %q", v1, want)
	}
	if got, err := parseV1(strings.TrimSuffix(v1, "\n")); err != nil || !cmp.Equal(got, m1) {
		t.Errorf("PMI-1 parsed back: %+v, %v", got, err)
	}
}

// TestMalformed: what a broken or hostile launcher could send is an error,
// never a panic or a hang.
func TestMalformed(t *testing.T) {
	for _, s := range []string{"", "cmd=", "key=v", "cmd=x novalue", "=x"} {
		if _, err := parseV1(s); err == nil {
			t.Errorf("PMI-1 %q accepted", s)
		}
	}
	for _, s := range []string{"", "cmd=x", "cmd=x;key", "key=v;", "cmd=;", "=v;"} {
		if _, err := parseV2(s); err == nil {
			t.Errorf("PMI-2 %q accepted", s)
		}
	}
	for _, h := range []string{"      ", "abcdef", "-5    ", "0     ", "999999"} {
		if _, err := v2Length([]byte(h)); err == nil {
			t.Errorf("PMI-2 length %q accepted", h)
		}
	}
	// Replies that break the exchange: the wrong command, a failure code,
	// a line past MaxLine, the connection closing.
	for _, tc := range []struct {
		v2    bool
		reply string
		want  string
	}{
		{false, "cmd=barrier_out\n", "answered by barrier_out"},
		{false, "cmd=response_to_init rc=-1 msg=bad\n", "rc=-1"},
		{false, strings.Repeat("x", 5000) + "\n", "too long"},
		{false, "cmd=resp", "EOF"},
		{true, "cmd=response_to_init rc=0\n40    cmd=x;", "EOF"},
		{true, "cmd=response_to_init rc=0\n" + v2("cmd=fullinit-response"), "lacks its final"},
		{true, "cmd=response_to_init rc=0\n" + v2("rc=0;"), "does not start"},
		{true, "cmd=response_to_init rc=0\n" + v2("cmd=fullinit-response;rc=0;"), "the server has this task as rank"},
		{true, "cmd=response_to_init rc=0\n" + v2("cmd=fullinit-response;rc=0;rank=1;size=2;"), "the server has this task as rank 1 of 2"},
		{true, "cmd=response_to_init rc=-2\n", "rc=-2"},
	} {
		env := Env{Rank: 0, Size: 2}
		if tc.v2 {
			env.JobID = "1.0"
		}
		_, err := NewClient(replay{strings.NewReader(tc.reply)}, env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reply %.40q: %v, want an error with %q", tc.reply, err, tc.want)
		}
	}
}

// v2 frames a PMI-2 body.
func v2(body string) string { return fmt.Sprintf("%-6d%s", len(body), body) }

// TestFromEnv: the launcher's variables, absent, valid and malformed.
func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	if _, ok, err := FromEnv(env()); ok || err != nil {
		t.Errorf("no PMI_FD: %v, %v", ok, err)
	}
	e, ok, err := FromEnv(env("PMI_FD", "6", "PMI_RANK", "1", "PMI_SIZE", "4", "PMI_JOBID", "3.0"))
	if !ok || err != nil || e != (Env{FD: 6, Rank: 1, Size: 4, JobID: "3.0"}) {
		t.Errorf("srun's: %+v, %v, %v", e, ok, err)
	}
	for _, bad := range [][]string{{"PMI_FD", "x", "PMI_RANK", "0", "PMI_SIZE", "2"}, {"PMI_FD", "6", "PMI_RANK", "2", "PMI_SIZE", "2"}, {"PMI_FD", "6", "PMI_SIZE", "2"}} {
		if _, ok, err := FromEnv(env(bad...)); ok || err == nil || !strings.Contains(err.Error(), "accepted") {
			t.Errorf("%v: %v, %v", bad, ok, err)
		}
	}
}

// FuzzParse: any message either protocol could receive parses or is an
// error, and what parses goes round its form.
func FuzzParse(f *testing.F) {
	f.Add("cmd=put kvsname=k key=a value=b")
	f.Add("cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b;")
	f.Fuzz(func(t *testing.T, s string) {
		if m, err := parseV1(s); err == nil {
			back, err := parseV1(strings.TrimSuffix(string(appendV1(nil, m)), "\n"))
			if err != nil || !cmp.Equal(back, m) {
				t.Fatalf("PMI-1 %q: %+v, then %+v, %v", s, m, back, err)
			}
		}
		if m, err := parseV2(s); err == nil {
			out := appendV2(nil, m)
			back, err := parseV2(string(out[6:]))
			if err != nil || !cmp.Equal(back, m) {
				t.Fatalf("PMI-2 %q: %+v, then %+v, %v", s, m, back, err)
			}
		}
		v2Length([]byte(s))
	})
}

// replay is a connection that answers with fixed bytes and takes any
// write.
type replay struct{ r io.Reader }

func (c replay) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c replay) Write(b []byte) (int, error) { return len(b), nil }

// FuzzClientReplies: whatever a launcher answers, a session and an
// exchange over it end with an error or succeed, never panic or read past
// what came.
func FuzzClientReplies(f *testing.F) {
	f.Add([]byte("cmd=response_to_init rc=0\ncmd=maxes vallen_max=1024\ncmd=my_kvsname kvsname=k\ncmd=put_result rc=0\ncmd=barrier_out\ncmd=get_result rc=0 value=p2\n"), false)
	f.Add([]byte("cmd=response_to_init rc=0\n"+v2("cmd=fullinit-response;rc=0;rank=0;size=2;")+v2("cmd=kvs-get-response;rc=0;found=TRUE;value=vAA;")), true)
	f.Fuzz(func(t *testing.T, b []byte, useV2 bool) {
		env := Env{Rank: 0, Size: 2}
		if useV2 {
			env.JobID = "1.0"
		}
		c, err := NewClient(replay{bytes.NewReader(b)}, env)
		if err != nil {
			return
		}
		if c.Put("k", bytes.Repeat([]byte{7}, 2000)) != nil || c.Fence() != nil {
			return
		}
		c.Get("k")
	})
}

// TestNodeAttrs: under PMI-2 a task's node attribute is visible to the
// others at once, with no fence, and a missing one is reported as such;
// the job's process mapping is the launcher's. PMI-1 has none.
func TestNodeAttrs(t *testing.T) {
	s := newFakeServer(2, true)
	var cs [2]*Client
	for r := range cs {
		a, b := net.Pipe()
		a.SetDeadline(time.Now().Add(testbound.For(t, 10*time.Second))) // a client out of step fails, not hangs
		go s.serve(b, r)
		c, err := NewClient(a, Env{Rank: r, Size: 2, JobID: "7.0"})
		if err != nil {
			t.Fatal(err)
		}
		cs[r] = c
	}
	if !cs[0].NodeAttrs() {
		t.Fatal("a PMI-2 client says it has no node attributes")
	}
	if _, ok, err := cs[1].NodeAttr("up0"); ok || err != nil {
		t.Fatalf("an attribute nobody stored: found %v, %v", ok, err)
	}
	if err := cs[0].PutNodeAttr("up0", "12"); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := cs[1].NodeAttr("up0"); !ok || err != nil || v != "12" {
		t.Fatalf("rank 0's attribute read by rank 1: %q, %v, %v", v, ok, err)
	}
	if v, ok, err := cs[1].JobAttr("PMI_process_mapping"); !ok || err != nil || v != "(vector,(0,1,2))" {
		t.Fatalf("the process mapping: %q, %v, %v", v, ok, err)
	}
	// A reply longer than MaxLine is an error, skipped whole: the
	// next exchange reads its own reply.
	if _, _, err := cs[1].JobAttr("long"); !errors.Is(err, ErrLong) {
		t.Errorf("a reply of %d bytes: %v, want ErrLong", MaxLine+10, err)
	}
	if v, ok, err := cs[1].NodeAttr("up0"); !ok || err != nil || v != "12" {
		t.Fatalf("after a long reply: %q, %v, %v", v, ok, err)
	}
	s1 := newFakeServer(1, false)
	s1.kvs["long"] = strings.Repeat("y", 5000) // past the reader's 4096 bytes
	s1.kvs["short"] = "vc2hvcnQ"
	a, b := net.Pipe()
	a.SetDeadline(time.Now().Add(testbound.For(t, 10*time.Second)))
	go s1.serve(b, 0)
	c, err := NewClient(a, Env{Rank: 0, Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeAttrs() || c.PutNodeAttr("k", "v") == nil {
		t.Error("a PMI-1 client offers node attributes")
	}
	if _, err := c.Get("long"); !errors.Is(err, ErrLong) {
		t.Errorf("a PMI-1 reply of 5000 bytes: %v, want ErrLong", err)
	}
	if v, err := c.Get("short"); err != nil || string(v) != "short" {
		t.Errorf("after a long PMI-1 reply: %q, %v", v, err)
	}
}

// TestAbortMessage: a PMI-2 abort's message carries no semicolon, which
// SLURM's mpi_pmi2 does not unescape (";;" made slurmstepd say "no value
// for key ; aborting the job; in req").
func TestAbortMessage(t *testing.T) {
	s := newFakeServer(1, true)
	s.abort = make(chan string, 1)
	a, b := net.Pipe()
	a.SetDeadline(time.Now().Add(testbound.For(t, 10*time.Second)))
	go s.serve(b, 0)
	c, err := NewClient(a, Env{Rank: 0, Size: 1, JobID: "7.0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Abort(1, "rank 2 did not start; aborting the job"); err != nil {
		t.Fatal(err)
	}
	select {
	case body := <-s.abort:
		if want := "cmd=abort;isworld=TRUE;msg=rank 2 did not start, aborting the job;"; body != want {
			t.Errorf("abort sent %q, want %q", body, want)
		}
	case <-time.After(testbound.For(t, 10*time.Second)):
		t.Fatal("no abort reached the server")
	}
}

// TestParseMapping: SLURM's and Hydra's placements as MPICH reads them.
func TestParseMapping(t *testing.T) {
	for _, c := range []struct {
		in   string
		size int
		want []int
	}{
		{"(vector,(0,1,4))", 4, []int{0, 0, 0, 0}},
		{"(vector,(0,2,2))", 4, []int{0, 0, 1, 1}},
		{"(vector,(0,2,1))", 5, []int{0, 1, 0, 1, 0}},         // cyclic: the list repeats
		{"(vector,(0,2,2),(2,1,1))", 5, []int{0, 0, 1, 1, 2}}, // uneven
		{"(vector, (0,3,1))", 2, []int{0, 1}},                 // more room than ranks
		{"(vector,(1,1,2),(0,1,2))", 4, []int{1, 1, 0, 0}},    // nodes out of order
		{"(vector,(0,1,536870912))", 3, []int{0, 0, 0}},       // large counts stop at size
	} {
		got, err := ParseMapping(c.in, c.size)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("%q, %d ranks (-want +got):\n%s", c.in, c.size, d)
		}
	}
	for _, in := range []string{"", "(vector)", "(vector,(0,0,1))", "(vector,(0,1,0))", "(vector,(0,1))", "(vector,(-1,1,1))", "(vector,(0,1,x))", "vector,(0,1,1)", "(vector,(0,1,1073741825))"} {
		if got, err := ParseMapping(in, 4); err == nil {
			t.Errorf("%q: %v, want an error", in, got)
		}
	}
}

// FuzzParseMapping: any value gives size nodes or an error, at once.
func FuzzParseMapping(f *testing.F) {
	f.Add("(vector,(0,2,2))", 4)
	f.Add("(vector,(0,2,1),(3,1,5))", 9)
	f.Fuzz(func(t *testing.T, s string, size int) {
		size = size & 0xffff
		got, err := ParseMapping(s, size)
		if err == nil && len(got) != size {
			t.Fatalf("%q: %d nodes for %d ranks", s, len(got), size)
		}
	})
}
