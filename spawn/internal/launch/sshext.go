//go:build !udpconduit_nossh

package launch

import (
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/cmdtmpl"
	"github.com/udpconduit/udpconduit/spawn/internal/sshc"
)

// startExternal starts the workers through an external client
// (GASNET_SSH_CMD: ssh, rsh or a wrapper), the way the reference does: one
// client process per worker, `CMD OPTIONS [-p PORT] [USER@]HOST COMMAND`,
// with GASNET_SSH_OPTIONS passed as they are. For OpenSSH's ssh the
// console adds -T, -o BatchMode=yes (a password prompt fails at once
// instead of hanging the job) and -o LogLevel=ERROR (no login banner in
// the job's output) unless the options set them. The secret goes down the
// client's stdin, as with the built-in client; staging needs the built-in
// client.
func (s *SSH) startExternal(spec *Spec) (Launch, error) {
	_, secret := withoutSecret(spec.Env)
	l := &localLaunch{exits: make(chan ProcExit, spec.Count), done: make([]bool, spec.Count)}
	var wg sync.WaitGroup
	for i := 0; i < spec.Count; i++ {
		argv := s.externalArgv(i, s.remoteCommand(i, spec, spec.Program))
		if s.Say != nil {
			s.Say("S spawner: worker %d: %s", i, cmdtmpl.Join(argv))
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Dir = spec.Dir
		cmd.Stdout, cmd.Stderr = s.Stdout, s.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			l.Kill(0)
			return nil, fmt.Errorf("spawn S: worker %d: %w", i, err)
		}
		// The client dies with the console (even by kill -9), which closes
		// the session, and so the worker's stdin.
		cmd.SysProcAttr = childAttr()
		cmd.WaitDelay = time.Second
		if err := cmd.Start(); err != nil {
			l.Kill(0)
			return nil, fmt.Errorf("spawn S: starting %s for worker %d on %s: %w", argv[0], i, s.Servers[i], err)
		}
		// The client holds the secret until it has a session to give it to.
		if _, err := io.WriteString(stdin, secret+"\n"); err != nil {
			l.Kill(0)
			return nil, fmt.Errorf("spawn S: worker %d on %s: sending the job secret to %s: %w", i, s.Servers[i], argv[0], err)
		}
		l.add(i, cmd, s.Servers[i].Host, &wg, func() { stdin.Close() })
	}
	go func() { wg.Wait(); close(l.exits) }()
	return extLaunch{l}, nil
}

// extLaunch is the clients of an external-client job. Ending a client ends
// its worker (its stdin closes), but a client does not pass signals on.
type extLaunch struct{ *localLaunch }

func (l extLaunch) SignalsThroughConsole() bool { return true }

// Signal ends the clients for the signals that end a job, and passes no
// other: SIGUSR1 would only kill a client.
func (l extLaunch) Signal(sig syscall.Signal) {
	switch sig {
	case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGKILL:
		l.localLaunch.Signal(sig)
	}
}

// externalArgv is the client's command line for worker i.
func (s *SSH) externalArgv(i int, remote string) []string {
	argv := append([]string(nil), s.Command...)
	if filepath.Base(argv[0]) == "ssh" {
		argv = append(argv, "-T")
		for _, o := range []struct{ key, val string }{{"batchmode", "yes"}, {"loglevel", "ERROR"}} {
			if _, set := s.Options.Set[o.key]; !set {
				argv = append(argv, "-o", o.key+"="+o.val)
			}
		}
	}
	argv = append(argv, s.Options.Words...)
	sv := s.Servers[i]
	if sv.Port != 0 {
		argv = append(argv, "-p", strconv.Itoa(sv.Port))
	}
	dest := sv.Host
	if sv.User != "" {
		dest = sv.User + "@" + dest
	}
	return append(argv, dest, remote)
}

// externalCommand splits GASNET_SSH_CMD into words.
func externalCommand(name, v string) ([]string, error) {
	w, err := sshc.SplitWords(v)
	if err == nil && len(w) == 0 {
		err = fmt.Errorf("empty")
	}
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %v; accepted: a command such as ssh, rsh or a wrapper script, with its arguments", name, v, err)
	}
	if _, err := exec.LookPath(w[0]); err != nil {
		return nil, fmt.Errorf("%s=%s: %q is not installed or not in PATH", name, v, w[0])
	}
	return w, nil
}
