package conduit

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"unicode"
)

// Finalize ends the job collectively, as MPI_Finalize does, but does not
// return: the job ends once every rank has called it, with the highest code
// passed; until then the rank answers requests. Not from a handler.
func (j *Job) Finalize(code int) {
	j.enter()
	if j.ep.InHandler() {
		j.abortJob("conduit.Finalize called from inside a handler: accepted from the program's goroutines only (handlers may only reply)")
		return // RunLocal: the rank ends at its next call
	}
	if code < 0 || code > MaxExitCode {
		fmt.Fprintf(os.Stderr, "%s: rank %d: conduit.Finalize(%d): accepted: 0..%d; finalizing with 1\n", progName(), j.rank, code, MaxExitCode)
		code = 1
	}
	if err := j.ep.Drain(); err != nil {
		j.done(err)
		j.abortJob(fmt.Sprintf("Finalize: %v", err))
		j.abort() // RunLocal: Abort returned
	}
	if err := j.ctl.Finalize(code); err != nil {
		j.abortJob(err.Error())
		j.abort()
	}
	for {
		// Ends the rank when the console says the job has ended.
		if err := j.wait(func() bool { return false }); err != nil {
			j.abortJob(fmt.Sprintf("Finalize: %v", err))
			j.abort()
		}
	}
}

// exitNow ends a rank whose job ended elsewhere (Terminating), from inside
// a call of the API, which it names (apiCall) when another rank's Exit
// ended the job.
func (j *Job) exitNow() { j.ctl.ExitNow(apiCall()) }

// pkgPrefix is this package's prefix in the names of its functions
// ("github.com/…/conduit.").
var pkgPrefix = sync.OnceValue(func() string { return reflect.TypeFor[Job]().PkgPath() + "." })

// apiCall names the outermost call of this package's API on the calling
// goroutine's stack, the one the program made ("Get", "Team.Barrier"): ""
// when there is none, or when it is one that ends the rank (Exit,
// Finalize). It walks the stack: only a rank that is ending calls it.
func apiCall() string {
	var pcs [64]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	call := ""
	for {
		f, more := frames.Next()
		if name, ok := exported(f.Function); ok {
			call = name
		}
		if !more {
			break
		}
	}
	switch call {
	case "Exit", "Job.Exit", "Finalize", "Job.Finalize":
		return ""
	}
	return call
}

// exported returns the name of fn, a function's full name, without the
// package's path when it is an exported function or method of this
// package ("Get", "Job.Get", "Reduce"), and ok false otherwise (another
// package's, an unexported one, a closure).
func exported(fn string) (string, bool) {
	rest, ok := strings.CutPrefix(fn, pkgPrefix())
	if !ok {
		return "", false
	}
	rest = strings.NewReplacer("(*", "", ")", "").Replace(dropTypeArgs(rest))
	parts := strings.Split(rest, ".")
	if len(parts) > 2 {
		return "", false
	}
	for _, p := range parts {
		if p == "" || !unicode.IsUpper(rune(p[0])) {
			return "", false
		}
	}
	return strings.Join(parts, "."), true
}

// dropTypeArgs removes the type arguments of generic functions and types
// from a function's name ("Reduce[...]", "(*Handle[...]).Wait").
func dropTypeArgs(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '[':
			depth++
		case r == ']' && depth > 0:
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}
