package launch

import (
	"errors"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// watch returns a function that waits for the end of cmd's process (just
// started) and returns its wait status. It waits in the runtime's poller on
// a pidfd, not in a blocking wait4, so a console with a thousand local
// workers holds no thread per worker, and it releases os/exec's own handle,
// so a worker costs the console one descriptor here, not two. Where pidfds
// are missing (Linux before 5.3) it is cmd.Wait.
func watch(cmd *exec.Cmd) func() (syscall.WaitStatus, error) {
	pid := cmd.Process.Pid
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return func() (syscall.WaitStatus, error) { return waitCmd(cmd) }
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return func() (syscall.WaitStatus, error) { return waitCmd(cmd) }
	}
	cmd.Process.Release()
	return func() (syscall.WaitStatus, error) {
		defer f.Close()
		var ws syscall.WaitStatus
		var werr error
		reaped := func() bool {
			for {
				got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
				switch {
				case errors.Is(err, syscall.EINTR):
					continue
				case err != nil:
					werr = err
					return true
				}
				return got == pid // 0: still running
			}
		}
		if err := rc.Read(func(uintptr) bool { return reaped() }); err != nil {
			// The pidfd is not pollable here (Read calls the function
			// before it waits, so the process is not reaped yet): wait in
			// the kernel.
			for {
				_, err := syscall.Wait4(pid, &ws, 0, nil)
				if !errors.Is(err, syscall.EINTR) {
					return ws, err
				}
			}
		}
		return ws, werr
	}
}
