package launch

import "syscall"

// childAttr puts a worker in its own process group and has the kernel kill
// it when the console dies (PR_SET_PDEATHSIG), even by SIGKILL.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// launcherAttr puts a launcher (srun, mpirun) in its own process group and
// has the kernel send it SIGTERM when the console dies, so that it stops
// its tasks as it does on a user's Ctrl-C.
func launcherAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
