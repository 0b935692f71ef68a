package pmi

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client is a task's connection to its launcher's PMI server.
type Client struct {
	conn    io.ReadWriter
	r       *bufio.Reader
	v2      bool
	rank    int
	size    int
	kvs     string // PMI-1's key-value space, PMI-2's job id
	maxVal  int    // the longest value the server takes
	timeout time.Duration
	setDL   func(time.Time) error // the connection's deadline, when it has one
	// mu makes each exchange whole: the job's end may abort from one
	// goroutine while another finalizes.
	mu  sync.Mutex
	buf []byte
}

// Env is what a launcher that serves PMI puts in its tasks' environment.
type Env struct {
	FD         int    // PMI_FD: the task's end of its connection to the server
	Rank, Size int    // PMI_RANK, PMI_SIZE
	JobID      string // PMI_JOBID: SLURM's mpi_pmi2 sets it; its tasks speak PMI-2
}

// FromEnv reads a launcher's PMI variables; ok is false when the task was
// not started by one that serves PMI over a descriptor (Open MPI's
// mpirun speaks PMIx over a socket it names otherwise; a task started by
// hand has none). A variable set but malformed is an error naming it.
func FromEnv(getenv func(string) string) (e Env, ok bool, err error) {
	fd := getenv("PMI_FD")
	if fd == "" {
		return Env{}, false, nil
	}
	var errs []string
	num := func(name string, min int) int {
		n, err := strconv.Atoi(getenv(name))
		if err != nil || n < min {
			errs = append(errs, fmt.Sprintf("%s=%q", name, getenv(name)))
		}
		return n
	}
	e = Env{FD: num("PMI_FD", 0), Rank: num("PMI_RANK", 0), Size: num("PMI_SIZE", 1), JobID: getenv("PMI_JOBID")}
	if len(errs) == 0 && e.Rank >= e.Size {
		errs = append(errs, fmt.Sprintf("PMI_RANK=%d with PMI_SIZE=%d", e.Rank, e.Size))
	}
	if len(errs) > 0 {
		return Env{}, false, fmt.Errorf("the launcher's PMI variables are malformed: %s; accepted: PMI_FD a descriptor, 0 <= PMI_RANK < PMI_SIZE", strings.Join(errs, ", "))
	}
	return e, true, nil
}

// Dial connects to the server over e.FD and initialises the protocol:
// PMI-2 when e.JobID is set (srun --mpi=pmi2), else PMI-1 (Hydra). Each
// exchange with the server, a fence included, must end within timeout
// (0: no limit).
func Dial(e Env, timeout time.Duration) (*Client, error) {
	f := os.NewFile(uintptr(e.FD), "pmi")
	if f == nil {
		return nil, fmt.Errorf("pmi: PMI_FD=%d is not a descriptor", e.FD)
	}
	var conn io.ReadWriter = f
	var setDL func(time.Time) error
	if c, err := net.FileConn(f); err == nil {
		f.Close() // c holds a copy of the descriptor
		conn, setDL = c, c.SetDeadline
	}
	cl := &Client{conn: conn, r: bufio.NewReaderSize(conn, 4096), v2: e.JobID != "", rank: e.Rank, size: e.Size, timeout: timeout, setDL: setDL}
	if err := cl.init(e); err != nil {
		return nil, err
	}
	return cl, nil
}

// NewClient runs the protocol over conn (a test's, or a descriptor's).
func NewClient(conn io.ReadWriter, e Env) (*Client, error) {
	cl := &Client{conn: conn, r: bufio.NewReaderSize(conn, 4096), v2: e.JobID != "", rank: e.Rank, size: e.Size}
	if err := cl.init(e); err != nil {
		return nil, err
	}
	return cl, nil
}

// Rank and Size are the task's rank and the job's number of tasks, as the
// server confirmed them.
func (c *Client) Rank() int { return c.rank }

// Size is the job's number of tasks.
func (c *Client) Size() int { return c.size }

// Version is the protocol spoken: 1 or 2.
func (c *Client) Version() int {
	if c.v2 {
		return 2
	}
	return 1
}

// init opens the session. PMI-2 starts as PMI-1 does, with an init line
// asking for version 2 (SLURM's mpi_pmi2 reads that line first), and goes on
// in its own framing.
func (c *Client) init(e Env) error {
	if c.v2 {
		c.v2 = false
		_, err := c.call(Msg{Cmd: "init", Attrs: []Attr{{"pmi_version", "2"}, {"pmi_subversion", "0"}}}, "response_to_init")
		c.v2 = true
		if err != nil {
			return err
		}
		r, err := c.call(Msg{Cmd: "fullinit", Attrs: []Attr{{"pmijobid", e.JobID}, {"pmirank", strconv.Itoa(e.Rank)}, {"threaded", "FALSE"}}}, "fullinit-response")
		if err != nil {
			return err
		}
		rank, err1 := r.Int("rank")
		size, err2 := r.Int("size")
		if err1 != nil || err2 != nil || rank != e.Rank || size != e.Size {
			return fmt.Errorf("pmi: the server has this task as rank %v of %v, the environment as %d of %d", rank, size, e.Rank, e.Size)
		}
		c.kvs, c.maxVal = e.JobID, 1024
		return nil
	}
	if _, err := c.call(Msg{Cmd: "init", Attrs: []Attr{{"pmi_version", "1"}, {"pmi_subversion", "1"}}}, "response_to_init"); err != nil {
		return err
	}
	r, err := c.call(Msg{Cmd: "get_maxes"}, "maxes")
	if err != nil {
		return err
	}
	if c.maxVal, err = r.Int("vallen_max"); err != nil || c.maxVal < 64 {
		return fmt.Errorf("pmi: maxes reply %v: vallen_max below 64", r.Attrs)
	}
	r, err = c.call(Msg{Cmd: "get_my_kvsname"}, "my_kvsname")
	if err != nil {
		return err
	}
	if c.kvs, _ = r.Get("kvsname"); c.kvs == "" {
		return fmt.Errorf("pmi: my_kvsname reply without a name")
	}
	return nil
}

// call sends m and reads the reply, which must be want with rc=0 (or no
// rc).
func (c *Client) call(m Msg, want string) (Msg, error) {
	if err := c.send(m); err != nil {
		return Msg{}, err
	}
	r, err := c.read()
	if err != nil {
		return Msg{}, fmt.Errorf("pmi: %s: %w", m.Cmd, err)
	}
	if r.Cmd != want {
		return Msg{}, fmt.Errorf("pmi: %s answered by %s, not %s", m.Cmd, r.Cmd, want)
	}
	if rc, ok := r.Get("rc"); ok && rc != "0" {
		msg, _ := r.Get("msg")
		if m2, ok := r.Get("errmsg"); ok {
			msg = m2
		}
		return Msg{}, fmt.Errorf("pmi: %s failed: rc=%s %s", m.Cmd, rc, msg)
	}
	return r, nil
}

func (c *Client) send(m Msg) error {
	c.deadline()
	if c.v2 {
		c.buf = appendV2(c.buf[:0], m)
	} else {
		c.buf = appendV1(c.buf[:0], m)
	}
	if _, err := c.conn.Write(c.buf); err != nil {
		return fmt.Errorf("pmi: %s: %w", m.Cmd, err)
	}
	return nil
}

func (c *Client) deadline() {
	if c.setDL != nil && c.timeout > 0 {
		c.setDL(time.Now().Add(c.timeout))
	}
}

// read reads one message.
func (c *Client) read() (Msg, error) {
	if c.v2 {
		var head [6]byte
		if _, err := io.ReadFull(c.r, head[:]); err != nil {
			return Msg{}, err
		}
		n, err := v2Length(head[:])
		if errors.Is(err, ErrLong) {
			// Skipped, so that the next reply is read whole.
			if _, derr := io.CopyN(io.Discard, c.r, int64(n)); derr != nil {
				return Msg{}, derr
			}
		}
		if err != nil {
			return Msg{}, err
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(c.r, body); err != nil {
			return Msg{}, err
		}
		return parseV2(string(body))
	}
	line, err := c.r.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Skipped to its end, so that the next reply is read whole.
		for err == bufio.ErrBufferFull {
			_, err = c.r.ReadSlice('\n')
		}
		if err != nil {
			return Msg{}, err
		}
		return Msg{}, ErrLong
	}
	if err != nil {
		return Msg{}, err
	}
	return parseV1(strings.TrimRight(string(line), "\r\n"))
}

// Put stores value under key for every task to Get after the next Fence.
// Any bytes may be stored: values are encoded (base64, URL alphabet) and
// split over several keys when longer than the server takes.
func (c *Client) Put(key string, value []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	enc := base64.RawURLEncoding.EncodeToString(value)
	max := c.maxVal - 8 // room for the part count
	if len(enc) <= max {
		return c.put(key, "v"+enc)
	}
	parts := (len(enc) + max - 1) / max
	for i := range parts {
		if err := c.put(key+"."+strconv.Itoa(i), enc[i*max:min(len(enc), (i+1)*max)]); err != nil {
			return err
		}
	}
	return c.put(key, "p"+strconv.Itoa(parts))
}

func (c *Client) put(key, value string) error {
	if c.v2 {
		_, err := c.call(Msg{Cmd: "kvs-put", Attrs: []Attr{{"key", key}, {"value", value}}}, "kvs-put-response")
		return err
	}
	_, err := c.call(Msg{Cmd: "put", Attrs: []Attr{{"kvsname", c.kvs}, {"key", key}, {"value", value}}}, "put_result")
	return err
}

// Fence returns once every task has called it: every Put before it, by any
// task, is then visible to Get.
func (c *Client) Fence() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v2 {
		_, err := c.call(Msg{Cmd: "kvs-fence"}, "kvs-fence-response")
		return err
	}
	_, err := c.call(Msg{Cmd: "barrier_in"}, "barrier_out")
	return err
}

// Get returns the value a task put under key before the last Fence.
func (c *Client) Get(key string) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, err := c.get(key)
	if err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(v, "v"):
		v = v[1:]
	case strings.HasPrefix(v, "p"):
		parts, err := strconv.Atoi(v[1:])
		if err != nil || parts < 1 || parts > MaxLine {
			return nil, fmt.Errorf("pmi: key %s: malformed value %q", key, v)
		}
		var all strings.Builder
		for i := range parts {
			p, err := c.get(key + "." + strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			all.WriteString(p)
		}
		v = all.String()
	default:
		return nil, fmt.Errorf("pmi: key %s: malformed value %q", key, v)
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("pmi: key %s: %w", key, err)
	}
	return b, nil
}

func (c *Client) get(key string) (string, error) {
	var r Msg
	var err error
	if c.v2 {
		r, err = c.call(Msg{Cmd: "kvs-get", Attrs: []Attr{{"jobid", c.kvs}, {"srcid", "-1"}, {"key", key}}}, "kvs-get-response")
		if err == nil {
			if found, _ := r.Get("found"); found != "TRUE" {
				return "", fmt.Errorf("pmi: key %s: not found", key)
			}
		}
	} else {
		r, err = c.call(Msg{Cmd: "get", Attrs: []Attr{{"kvsname", c.kvs}, {"key", key}}}, "get_result")
	}
	if err != nil {
		return "", err
	}
	v, ok := r.Get("value")
	if !ok {
		return "", fmt.Errorf("pmi: key %s: reply without a value", key)
	}
	return v, nil
}

// Abort asks the launcher to end the whole job, with code where the
// protocol carries one (PMI-1; under PMI-2 the launcher chooses), and msg
// for its log (each ";" a "," under PMI-2). It does not wait for an answer.
func (c *Client) Abort(code int, msg string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v2 {
		// SLURM's mpi_pmi2 reads ";;" in a value as the end of the
		// value, not as an escaped ";".
		msg = strings.ReplaceAll(msg, ";", ",")
		return c.send(Msg{Cmd: "abort", Attrs: []Attr{{"isworld", "TRUE"}, {"msg", msg}}})
	}
	return c.send(Msg{Cmd: "abort", Attrs: []Attr{{"exitcode", strconv.Itoa(code)}}})
}

// Finalize ends the session: the launcher then takes the task's exit as
// its end, not as a failure.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v2 {
		_, err := c.call(Msg{Cmd: "finalize"}, "finalize-response")
		return err
	}
	_, err := c.call(Msg{Cmd: "finalize"}, "finalize_ack")
	return err
}

// SetTimeout bounds each exchange with the launcher from now on to d (0:
// unbounded), as Dial's timeout does.
func (c *Client) SetTimeout(d time.Duration) {
	c.mu.Lock()
	c.timeout = d
	c.mu.Unlock()
}

// NodeAttrs reports whether the session keeps attributes per node
// (PMI-2; PMI-1 has none): PutNodeAttr and NodeAttr work then, and
// their values are visible to the tasks of the node at once, without a
// fence.
func (c *Client) NodeAttrs() bool { return c.v2 }

// PutNodeAttr stores value (no ';' or '=') under key for the tasks of this
// task's node (PMI-2 info-putnodeattr).
func (c *Client) PutNodeAttr(key, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.v2 {
		return fmt.Errorf("pmi: node attributes need PMI-2")
	}
	_, err := c.call(Msg{Cmd: "info-putnodeattr", Attrs: []Attr{{"key", key}, {"value", value}}}, "info-putnodeattr-response")
	return err
}

// NodeAttr returns the value a task of this node stored under key, and
// whether one did, without waiting for it (PMI-2 info-getnodeattr).
func (c *Client) NodeAttr(key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.v2 {
		return "", false, fmt.Errorf("pmi: node attributes need PMI-2")
	}
	return c.found(c.call(Msg{Cmd: "info-getnodeattr", Attrs: []Attr{{"key", key}, {"wait", "FALSE"}}}, "info-getnodeattr-response"))
}

// JobAttr returns the launcher's job attribute key and whether it has one
// (PMI-2 info-getjobattr).
func (c *Client) JobAttr(key string) (string, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.v2 {
		return "", false, fmt.Errorf("pmi: job attributes need PMI-2")
	}
	return c.found(c.call(Msg{Cmd: "info-getjobattr", Attrs: []Attr{{"key", key}}}, "info-getjobattr-response"))
}

// found reads a PMI-2 reply with found=TRUE|FALSE and a value.
func (c *Client) found(r Msg, err error) (string, bool, error) {
	if err != nil {
		return "", false, err
	}
	if f, _ := r.Get("found"); f != "TRUE" {
		return "", false, nil
	}
	v, _ := r.Get("value")
	return v, true, nil
}

// ParseMapping returns the node index of each of size ranks from a
// PMI_process_mapping value: "(vector,(start,nodes,per),...)", each
// triple giving per ranks to each of nodes nodes from start on, the list
// repeated until every rank has a node (a cyclic placement), as MPICH
// reads it. SLURM and Hydra publish it.
func ParseMapping(s string, size int) ([]int, error) {
	bad := func() ([]int, error) {
		return nil, fmt.Errorf("pmi: process mapping %q: want (vector,(start,nodes,per),...)", s)
	}
	s = strings.ReplaceAll(s, " ", "")
	if !strings.HasPrefix(s, "(vector,") || !strings.HasSuffix(s, ")") {
		return bad()
	}
	var blocks [][3]int
	for _, t := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(s, "(vector,"), ")"), "),") {
		f := strings.Split(strings.Trim(t, "()"), ",")
		if len(f) != 3 {
			return bad()
		}
		var b [3]int
		for i, x := range f {
			v, err := strconv.Atoi(x)
			if err != nil || v < 0 || v > 1<<29 || (i > 0 && v == 0) {
				return bad()
			}
			b[i] = v
		}
		blocks = append(blocks, b)
	}
	if size < 0 || len(blocks) == 0 {
		return bad()
	}
	nodes := make([]int, 0, size)
	for len(nodes) < size {
		for _, b := range blocks {
			for n := b[0]; n < b[0]+b[1] && len(nodes) < size; n++ {
				for k := 0; k < b[2] && len(nodes) < size; k++ {
					nodes = append(nodes, n)
				}
			}
		}
	}
	return nodes, nil
}
