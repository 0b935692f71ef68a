package conduit_test

import (
	"errors"
	"testing"

	"github.com/udpconduit/udpconduit/conduit"
)

// TestBeforeInit: before Init, the package-level functions that return an
// error return one wrapping ErrNotInitialized that names the call, and the
// others panic with it; none ends the process.
func TestBeforeInit(t *testing.T) {
	for name, call := range map[string]func() error{
		"Barrier":      conduit.Barrier,
		"Poll":         conduit.Poll,
		"RequestShort": func() error { return conduit.RequestShort(0, 128) },
		"Put":          func() error { return conduit.Put(0, 0, []byte{1}) },
		"Drain":        conduit.Drain,
	} {
		if err := call(); !errors.Is(err, conduit.ErrNotInitialized) || err.Error() != "conduit."+name+": conduit: Init has not run" {
			t.Errorf("%s before Init: %v, want conduit.%s: wrapping ErrNotInitialized", name, err, name)
		}
	}
	for name, call := range map[string]func(){"Rank": func() { conduit.Rank() }, "Exit": func() { conduit.Exit(0) }, "World": func() { conduit.World() }} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if !errors.Is(err, conduit.ErrNotInitialized) {
					t.Errorf("%s before Init panicked with %v, want ErrNotInitialized", name, err)
				}
			}()
			call()
		}()
	}
}

// TestSelfRequestToNoHandler: a rank's request to itself for an index
// where no handler is registered returns conduit.ErrBadHandler, so that no
// program needs package amudp to tell it.
func TestSelfRequestToNoHandler(t *testing.T) {
	var err error
	code, rerr := conduit.RunLocal(1, func(j *conduit.Job) {
		if _, err = j.Attach([]conduit.HandlerEntry{{Index: 130, Fn: func(*conduit.Token, []uint32, []byte) {}}}, 0); err != nil {
			return
		}
		err = j.RequestShort(0, 131)
	})
	if code != 0 || rerr != nil || !errors.Is(err, conduit.ErrBadHandler) {
		t.Errorf("RunLocal: %d, %v; the request: %v, want ErrBadHandler", code, rerr, err)
	}
}
