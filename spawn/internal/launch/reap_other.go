//go:build unix && !linux

package launch

import (
	"os/exec"
	"syscall"
)

// watch returns a function that waits for the end of cmd's process and
// returns its wait status.
func watch(cmd *exec.Cmd) func() (syscall.WaitStatus, error) {
	return func() (syscall.WaitStatus, error) { return waitCmd(cmd) }
}
