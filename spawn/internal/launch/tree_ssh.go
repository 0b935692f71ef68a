//go:build !udpconduit_nossh

package launch

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/sshc"
)

// treeLaunch is the console's view of a spawn tree: it starts only the
// first level, so it sees only those workers' ends, and like a launcher
// (PerWorker false) the console judges every rank by its connection. A
// first-level worker that fails is reported (its subtree fails with it);
// once the whole first level has ended, a clean launcher end closes Exits.
type treeLaunch struct {
	*sshLaunch
	exits chan ProcExit
}

func newTreeLaunch(l *sshLaunch) *treeLaunch {
	t := &treeLaunch{sshLaunch: l, exits: make(chan ProcExit, cap(l.exits)+1)}
	go func() {
		for e := range l.exits {
			if !e.Clean {
				t.exits <- e
			}
		}
		t.exits <- ProcExit{Index: -1, Host: "the spawn tree", Code: 0, Status: "exit status 0", Clean: true}
		close(t.exits)
	}()
	return t
}

func (t *treeLaunch) Exits() <-chan ProcExit { return t.exits }
func (t *treeLaunch) PerWorker() bool        { return false }

// StartSubtree starts this worker's children in a spawn tree, in the
// background: a failure to start one, or a child's end before the job has
// started, ends this worker with 1 (and so its parent's subtree, up to the
// console, which names the worker) after one line saying why, by calling
// exit(1).
func StartSubtree(cfg *envconf.Config, tree *TreeInfo, secret []byte, exit func(int)) (*Subtree, error) {
	i, err := strconv.Atoi(os.Getenv(ctl.EnvIndex))
	if err != nil {
		return nil, nil
	}
	first, count := spawnChildren(i, tree.Degree, len(tree.Servers))
	if count == 0 {
		return nil, nil
	}
	st := &Subtree{done: make(chan struct{}), welcome: make(chan struct{}), wait: cfg.ExitTimeout}
	prog := filepath.Base(os.Args[0])
	die := func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "%s: worker %d (spawn tree): "+format+"\n", append([]any{prog, i}, a...)...)
		exit(1)
	}
	go func() {
		var list []sshc.Server
		for _, e := range tree.Servers[first : first+count] {
			sv, err := sshc.ParseServers("the spawn tree's host list", e)
			if err != nil || len(sv) != 1 {
				die("host %q: %v", e, err)
			}
			list = append(list, sv[0])
		}
		s, err := sshFor(cfg, nil, list, nil)
		if err != nil {
			die("%v", err)
		}
		s.First, s.Tree, s.Stdout, s.Stderr = first, tree, os.Stdout, os.Stderr
		if exe, err := os.Executable(); err == nil {
			s.Local = exe
		}
		// The children reach the console as this worker does.
		env := []string{ctl.EnvMaster + "=" + os.Getenv(ctl.EnvMaster), ctl.EnvSecret + "=" + hex.EncodeToString(secret)}
		if os.Getenv(ctl.EnvRoute) != "" {
			env = append(env, ctl.EnvRoute+"=1")
		}
		fwd, err := ForwardEnv(cfg.ForwardEnv, "GASNET_FORWARD_ENV", os.LookupEnv)
		if err != nil {
			die("%v", err)
		}
		l, err := s.Start(&Spec{Count: count, Program: tree.Program, Args: tree.Args, Dir: tree.Dir, Env: append(env, fwd...)})
		if err != nil {
			die("%v", err)
		}
		for e := range l.Exits() {
			select {
			case <-st.welcome:
			default:
				die("worker %d on %s ended before joining: %s", e.Index, e.Host, e.Status)
			}
		}
		close(st.done)
	}()
	return st, nil
}
