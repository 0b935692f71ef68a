package main

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// rseqState says whether the calling thread has a restartable-sequences
// area registered with the kernel, as glibc registers one for each thread
// of a program linked with it unless GLIBC_TUNABLES says
// glibc.pthread.rseq=0: "registered", "none", or "no glibc" where the
// program is not linked with glibc (built without cgo). It asks the
// kernel to register an area of its own: refused (EINVAL) where the
// thread has one elsewhere; accepted where it has none, and then taken
// back at once.
func rseqState() string {
	if maps, err := os.ReadFile("/proc/self/maps"); err != nil || !bytes.Contains(maps, []byte("/libc.so")) {
		return "no glibc"
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	// struct rseq: 32 bytes, aligned to 32, on the heap, which Go does
	// not move.
	buf := make([]byte, 64)
	p := uintptr(unsafe.Pointer(&buf[0]))
	p = (p + 31) &^ 31
	const sig = 0x53053053
	_, _, e := unix.RawSyscall6(unix.SYS_RSEQ, p, 32, 0, sig, 0, 0)
	switch e {
	case 0:
		if _, _, e := unix.RawSyscall6(unix.SYS_RSEQ, p, 32, 1, sig, 0, 0); e != 0 { // RSEQ_FLAG_UNREGISTER
			return "unregistering the probe: " + e.Error()
		}
		runtime.KeepAlive(buf)
		return "none"
	case unix.EINVAL, unix.EBUSY:
		return "registered"
	}
	return "unknown: " + e.Error()
}

// startEnv returns the value of the variable k in the environment this
// process was started with (/proc/self/environ), which os.Unsetenv does
// not change, or "(unset)".
func startEnv(k string) string {
	env, err := os.ReadFile("/proc/self/environ")
	if err != nil {
		return "unknown: " + err.Error()
	}
	for _, kv := range strings.Split(string(env), "\x00") {
		if v, ok := strings.CutPrefix(kv, k+"="); ok {
			return v
		}
	}
	return "(unset)"
}
