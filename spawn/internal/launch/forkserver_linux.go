package launch

// The fork server: a console that starts many workers on its own host does
// not fork them itself. Every fork copies the parent's descriptor table
// into the child and every exec closes the copies again, and the console
// holds four descriptors per worker already started (its output pipes,
// its control connection, its pidfd): starting N workers cost O(N²)
// descriptor copies and closes (BENCHMARKS.md, L spawner's fork server).
// Instead the console starts one process,
// the program itself marked ctl.EnvForkServer, whose package
// initialisation turns it into the server before the program's main runs:
// with a descriptor table that stays small it forks and execs every
// worker, hands the console the ends it keeps of each one's pipes and
// control socket over a socket pair (SCM_RIGHTS), reaps the workers (they
// are its children) and reports each one's wait status, and exits when the
// last has ended. Workers die with the server (Pdeathsig), which dies with
// the console.
//
// The server's messages to the console, one per SOCK_SEQPACKET datagram,
// in package varenc's encoding:
//
//	'S' index pid, with three descriptors: stdout's and stderr's read
//	    ends and the console's end of the control connection
//	'F' index error: the worker could not be started; nothing follows
//	'E' index pid status: the worker ended with this wait status

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/udpconduit/udpconduit/internal/varenc"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

// forkServerMin is the smallest job whose workers the fork server starts;
// smaller ones the console starts itself, without the server's own start.
var forkServerMin = 16

// ForkServed reports whether the L spawner starts a job of count workers
// through its fork server, when routed says that the console takes their
// output (Spec.Output).
func ForkServed(count int, routed bool) bool { return routed && count >= forkServerMin }

// The messages of the fork server.
const (
	msgStarted = 'S'
	msgFailed  = 'F'
	msgExited  = 'E'
)

// serverFD is the fork server's descriptor of its socket to the console.
const serverFD = 3

// maxWhy bounds the text of a failure message, and maxMsg any message.
const (
	maxWhy = 1024
	maxMsg = maxWhy + 64
)

func init() {
	v := os.Getenv(ctl.EnvForkServer)
	if v == "" {
		return
	}
	// This process is a fork server, not the program: it never returns to
	// the program's initialisation or main.
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "%s=%q: accepted: the number of workers to start (the console sets it)\n", ctl.EnvForkServer, v)
		os.Exit(1)
	}
	os.Exit(serveForks(n))
}

// serveForks is the fork server's life: it starts n workers running this
// program with its arguments and environment (without the server's
// marker, with each worker's index), reports them to the console, reaps
// them, and returns its exit code once the last has ended.
func serveForks(n int) int {
	sock := serverFD
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, ctl.EnvForkServer+"=") && !strings.HasPrefix(kv, ctl.EnvBind+"=") {
			env = append(env, kv)
		}
	}
	var order []int
	if v, ok := os.LookupEnv(ctl.EnvBind); ok {
		var err error
		if order, err = parseCPUs(v); err != nil {
			fmt.Fprintf(os.Stderr, "udpconduit fork server: %v\n", err)
			return 1
		}
	}
	devnull, err := syscall.Open(os.DevNull, syscall.O_RDWR|syscall.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintf(os.Stderr, "udpconduit fork server: %v\n", err)
		return 1
	}
	var mu sync.Mutex
	index := make(map[int]int, n) // worker index by pid, while it runs
	killAll := func() {
		mu.Lock()
		for pid := range index {
			syscall.Kill(-pid, syscall.SIGKILL)
		}
		mu.Unlock()
	}
	send := func(b []byte, rights []byte) error {
		return syscall.Sendmsg(sock, b, rights, nil, 0)
	}
	// Reaping: this process has no other children.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	ended := make(chan struct{}, n)
	go func() {
		for range chld {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if errors.Is(err, syscall.EINTR) {
					continue
				}
				if err != nil || pid <= 0 {
					break
				}
				mu.Lock()
				i, ok := index[pid]
				delete(index, pid)
				mu.Unlock()
				if ok {
					b := varenc.AppendUint(varenc.AppendUint(varenc.AppendUint([]byte{msgExited}, uint64(i)), uint64(pid)), uint64(uint32(ws)))
					send(b, nil)
					ended <- struct{}{}
				}
			}
		}
	}()
	// A console that goes away takes the workers with it.
	go func() {
		var b [1]byte
		for {
			if k, _, _, _, err := syscall.Recvmsg(sock, b[:], nil, 0); err == nil && k > 0 {
				continue // the console sends nothing
			} else if errors.Is(err, syscall.EINTR) {
				continue
			}
			killAll()
			os.Exit(1)
		}
	}()
	started := 0
	for i := range n {
		// Under the lock until its pid is recorded: a worker that ends at
		// once is reaped only then.
		mu.Lock()
		var pid int
		var fds [3]int
		err := startOn(cpuFor(order, i), func() (err error) {
			pid, fds, err = forkWorker(os.Args, append(env, ctl.EnvIndex+"="+strconv.Itoa(i)), devnull)
			return err
		})
		if err == nil {
			index[pid] = i
		}
		mu.Unlock()
		if err != nil {
			why := err.Error()
			send(varenc.AppendString(varenc.AppendUint([]byte{msgFailed}, uint64(i)), why[:min(len(why), maxWhy)]), nil)
			break
		}
		started++
		err = send(varenc.AppendUint(varenc.AppendUint([]byte{msgStarted}, uint64(i)), uint64(pid)), syscall.UnixRights(fds[:]...))
		for _, fd := range fds {
			syscall.Close(fd)
		}
		if err != nil {
			// The console is gone, or cannot be told: either way it will
			// not get this worker, so none may run.
			fmt.Fprintf(os.Stderr, "udpconduit fork server: handing worker %d to the console: %v\n", i, err)
			killAll()
			return 1
		}
	}
	for range started {
		<-ended
	}
	return 0
}

// forkWorker starts one worker: argv[0] with argv and env, its stdin
// devnull, its stdout and stderr pipes, and descriptor 3 its end of a
// control socket. It returns the worker's pid and the ends the console
// keeps: stdout's and stderr's read ends and the control socket's other
// end, which the caller closes once it has handed them on.
func forkWorker(argv, env []string, devnull int) (int, [3]int, error) {
	var out, in [3]int // the console's ends; the worker's
	closeAll := func() {
		for k := range 3 {
			if out[k] > 0 {
				syscall.Close(out[k])
			}
			if in[k] > 0 {
				syscall.Close(in[k])
			}
		}
	}
	for k := range 2 {
		var p [2]int
		if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
			closeAll()
			return 0, out, os.NewSyscallError("pipe2", err)
		}
		out[k], in[k] = p[0], p[1]
	}
	s, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		closeAll()
		return 0, out, os.NewSyscallError("socketpair", err)
	}
	out[2], in[2] = s[0], s[1]
	pid, err := syscall.ForkExec(argv[0], argv, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{uintptr(devnull), uintptr(in[0]), uintptr(in[1]), uintptr(in[2])},
		Sys:   childAttr(),
	})
	for k := range 3 {
		syscall.Close(in[k])
		in[k] = 0
	}
	if err != nil {
		closeAll()
		return 0, out, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	return pid, out, nil
}

// startServed starts spec's workers through a fork server (see above),
// whose environment env and procs complete; greeting is written on each
// worker's control connection before Control gets it.
func (l *localLaunch) startServed(spec *Spec, env, procs []string, greeting []byte) error {
	s, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("spawn L: a socket to the fork server: %w", os.NewSyscallError("socketpair", err))
	}
	mine, theirs := os.NewFile(uintptr(s[0]), "fork server"), os.NewFile(uintptr(s[1]), "fork server")
	cmd := exec.Command(spec.Program, spec.Args...)
	cmd.Dir = spec.Dir
	// The binding is the console's to give (local.go), not one found in
	// its own environment.
	own := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, ctl.EnvBind+"=") })
	cmd.Env = append(append(append(own, env...), procs...), ctl.EnvConnFD+"=3", ctl.EnvForkServer+"="+strconv.Itoa(spec.Count))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{theirs}
	cmd.SysProcAttr = childAttr()
	err = cmd.Start()
	theirs.Close()
	if err != nil {
		mine.Close()
		return fmt.Errorf("spawn L: starting the fork server (%s): %w", spec.Program, err)
	}
	host, _ := os.Hostname()
	started := make(chan error, 1)
	go func() {
		defer mine.Close()
		l.serve(spec, int(mine.Fd()), host, greeting, started)
		waitCmd(cmd)
	}()
	return <-started
}

// serve reads the fork server's messages on sock until it ends: it hands
// each started worker's descriptors to spec's Output and Control, reports
// on started once all are started or one could not be, and reports every
// worker's end on l.exits (those the server did not report as ended when
// it went away end with it), which it then closes.
func (l *localLaunch) serve(spec *Spec, sock int, host string, greeting []byte, started chan<- error) {
	count, said := 0, false
	say := func(err error) {
		if !said {
			said = true
			started <- err
		}
	}
	// fail ends the job's start: the workers recorded so far are
	// killed, and the server, whose socket closes, kills the rest and
	// exits; the loop below reads until then.
	fail := func(err error) {
		l.Kill(0)
		say(err)
		syscall.Shutdown(sock, syscall.SHUT_RDWR)
	}
	defer close(l.exits)
	buf, oob := make([]byte, maxMsg), make([]byte, syscall.CmsgSpace(3*4))
	for {
		k, oobn, _, _, err := syscall.Recvmsg(sock, buf, oob, syscall.MSG_CMSG_CLOEXEC)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil || k == 0 {
			break
		}
		d := varenc.Decoder{B: buf[1:k]}
		u := d.Uint()
		i := int(u)
		fds := rights(oob[:oobn])
		ok := !d.Bad && u < uint64(spec.Count)
		switch {
		case ok && buf[0] == msgStarted && len(fds) == 3:
			pid := d.Uint()
			if d.Bad || len(d.B) != 0 || pid == 0 || pid > 1<<31-1 {
				break
			}
			err := l.handOn(spec, i, int(pid), [3]int(fds), greeting)
			fds = nil // handed on, or closed
			if err != nil {
				fail(err)
			} else if count++; count == spec.Count {
				say(nil)
			}
		case ok && buf[0] == msgFailed && len(fds) == 0:
			if why := d.String(); !d.Bad {
				fail(fmt.Errorf("spawn L: worker %d: %s", i, why))
			}
		case ok && buf[0] == msgExited:
			pid, ws := d.Uint(), syscall.WaitStatus(uint32(d.Uint()))
			if !d.Bad && len(d.B) == 0 && l.end(i) {
				l.exits <- procExit(i, int(pid), host, ws, nil)
			}
		}
		for _, fd := range fds { // of a message that does not decode
			syscall.Close(fd)
		}
	}
	say(errors.New("spawn L: the fork server ended before starting every worker"))
	// The server is gone, and its workers with it (Pdeathsig).
	l.mu.Lock()
	pids, idx := slices.Clone(l.pids), slices.Clone(l.idx)
	l.mu.Unlock()
	for k, i := range idx {
		if l.end(i) {
			l.exits <- ProcExit{Index: i, PID: pids[k], Host: host, Code: 1, Status: "killed with its fork server, which ended"}
		}
	}
}

// handOn records worker i, process pid, started by the fork server, and
// hands its descriptors (stdout's and stderr's read ends, the console's
// end of its control connection) to spec's Output and Control, greeting
// it first. A worker that has ended already gets no Control: its exit,
// which the server reports next, says why.
func (l *localLaunch) handOn(spec *Spec, i, pid int, fds [3]int, greeting []byte) error {
	l.mu.Lock()
	l.pids, l.idx = append(l.pids, pid), append(l.idx, i)
	l.mu.Unlock()
	// Non-blocking, so that os.NewFile has the runtime's poller wait for
	// them, not a thread each.
	syscall.SetNonblock(fds[0], true)
	syscall.SetNonblock(fds[1], true)
	spec.Output(i, 1, os.NewFile(uintptr(fds[0]), "stdout"))
	spec.Output(i, 2, os.NewFile(uintptr(fds[1]), "stderr"))
	f := os.NewFile(uintptr(fds[2]), "control")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("spawn L: worker %d's control connection: %w", i, err)
	}
	if _, err := conn.Write(greeting); err != nil {
		conn.Close() // ended: its end of the socket is closed
		return nil
	}
	spec.Control(i, conn)
	return nil
}

// end marks worker i ended and reports whether it was running.
func (l *localLaunch) end(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done[i] {
		return false
	}
	l.done[i] = true
	return true
}

// rights returns the descriptors of the SCM_RIGHTS messages in oob.
func rights(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := syscall.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}
