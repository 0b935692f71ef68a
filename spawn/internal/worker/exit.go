package worker

import (
	"errors"
	"fmt"
	"os"
)

// EndedError is returned by Worker.Join when the console ended the job
// before this worker joined it (the job failed elsewhere, or was killed):
// the worker should end with Code, saying nothing.
type EndedError struct{ Code int }

func (e *EndedError) Error() string {
	return fmt.Sprintf("the job ended with code %d before this worker joined it", e.Code)
}

// ExitCode returns the code a process ends with after err, the error of
// starting a worker or a console: an EndedError's code, else 1.
func ExitCode(err error) int {
	if e := (*EndedError)(nil); errors.As(err, &e) {
		return e.Code
	}
	return 1
}

// exitProcess ends the process with code, after flushing stdout. It is
// the one place where the worker's side ends a process, for the ends that no
// caller can take: the console's word to end the job (Worker.ExitNow, and
// Exit or Abort, which report the code first), the loss of the console
// (no frame within GASNET_LIVENESS_TIMEOUT, or the end of the ssh session
// of a worker the S spawner started), and a spawn tree that could not
// start its children. Everything else returns an error to its caller
// (conduit.Init decides there).
func exitProcess(code int) {
	os.Stdout.Sync()
	os.Exit(code)
}
