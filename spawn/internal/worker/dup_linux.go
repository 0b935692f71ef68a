package worker

import "syscall"

// dupOnto makes fd newfd a copy of oldfd.
func dupOnto(oldfd, newfd int) error { return syscall.Dup3(oldfd, newfd, 0) }
