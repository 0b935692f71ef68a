// Package shmem creates memory that the processes of one user on one host
// share, and maps it in those processes, with no name in any file system:
// a Region is an anonymous memory file (memfd, mode 0600) that its creator
// keeps open, and the others open through /proc/PID/fd/N (Region.Path)
// while the creator lives. The kernel frees the memory when the last
// process that maps it ends, however the job ends. Only a process that may
// ptrace the creator (the same user, by default) can open that path.
//
// amudp's inboxes (amudp.Shared) and conduit's cross-mapped segments are
// Regions. On a system without memfd, Create and Map return ErrUnsupported.
package shmem

import "errors"

// ErrUnsupported is returned where the system has no memfd.
var ErrUnsupported = errors.New("shmem: this system has no anonymous shared memory (memfd)")
