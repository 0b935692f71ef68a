package console

// This file is what Run sets up before it starts the workers: the verbose
// description, warnings, the console's port and the local workers'
// control connections.

import (
	"cmp"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
	"github.com/udpconduit/udpconduit/spawn/internal/launch"
)

// describe prints, in verbose mode (GASNET_VERBOSEENV), the spawner
// chosen and every setting, and returns the function that prints the
// spawner's own verbose lines (nil outside verbose mode).
func describe(cfg *envconf.Config, src map[string]envconf.Source, name, why string, say func(string, ...any)) func(string, ...any) {
	if !cfg.VerboseEnv {
		return nil
	}
	if why != "" {
		say("spawner %s (%s); settings:", name, why)
	} else {
		say("spawner %s; settings:", name)
	}
	for _, l := range cfg.Describe(src) {
		fmt.Fprintln(os.Stderr, "  "+l)
	}
	return say
}

// warnSettings warns of variables of ours that no setting reads, and of
// settings that have no effect.
func warnSettings(cfg *envconf.Config, src map[string]envconf.Source, routed bool, say func(string, ...any)) {
	for _, w := range envconf.UnknownVars(os.Environ(), ctl.MarkerVars) {
		say("%s", w)
	}
	if cfg.OutputLabel && !routed {
		why := envconf.DisplayName(src, "GASNET_ROUTE_OUTPUT") + "=0"
		if cfg.RouteOutput {
			why = "the C spawner without " + envconf.DisplayName(src, "GASNET_CSPAWN_ROUTE_OUTPUT") + "=1"
		}
		say("warning: %s=1 has no effect: the workers' output does not go through the console (%s)", envconf.DisplayName(src, "GASNET_OUTPUT_LABEL"), why)
	}
}

// listen opens the console's port, where the workers of other hosts
// connect: on GASNET_MASTERIP, or for remote workers the address they
// reach (never a name to resolve), else loopback.
func listen(cfg *envconf.Config, sp launch.Spawner, name string, verbose bool, say func(string, ...any)) (net.Listener, error) {
	host := cfg.MasterIP
	if r, ok := sp.(launch.Remote); ok && host == "" {
		var err error
		if host, err = r.ConsoleAddr(); err != nil {
			return nil, err
		}
		if verbose {
			say("S spawner: workers reach the console at %s", cmp.Or(host, "the address of the interface that routes to each host"))
		}
	}
	if host == "" && name != "S" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("GASNET_MASTERIP=%s: cannot listen: %v", host, err)
	}
	return ln, nil
}

// localControl returns how the console serves the control connection of
// a worker of this host, a socket it inherits: the settings written on it
// at once (their environment is the console's and the forwarded
// variables fwd, so the console reads their configuration once, for all
// of them), then its Join, read into joins.
func localControl(cfg *envconf.Config, src map[string]envconf.Source, fwd []string, joins chan<- *peerConn) (func(int, net.Conn), error) {
	wcfg, wsrc, err := envconf.LoadEnv(append(os.Environ(), fwd...))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", envconf.DisplayName(src, "GASNET_FORWARD_ENV"), err)
	}
	settings := ctl.EncodeFrame(ctl.FrameSettings, ctl.Settings{Config: envconf.AppendBinary(nil, wcfg, wsrc)})
	return func(_ int, c net.Conn) {
		go func() {
			_, err := c.Write(settings)
			if err != nil || !readJoin(c, cfg.ConnectTimeout, joins) {
				c.Close()
			}
		}()
	}, nil
}

// startSaying starts the workers with sp, and while that takes longer
// than reportEvery (a local job of thousands of ranks) says every
// reportEvery how many a spawner that starts them here has started.
func startSaying(sp launch.Spawner, spec *launch.Spec, say func(string, ...any)) (launch.Launch, error) {
	var n atomic.Int64
	if control := spec.Control; control != nil {
		spec.Control = func(i int, c net.Conn) {
			n.Add(1)
			control(i, c)
		}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(reportEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if spec.Control != nil {
					say("started %d of %d workers", n.Load(), spec.Count)
				} else {
					say("starting %d workers", spec.Count)
				}
			}
		}
	}()
	return sp.Start(spec)
}
