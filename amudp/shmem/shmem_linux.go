package shmem

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Region is shared memory that this process created.
type Region struct {
	fd   int
	mem  []byte
	path string
}

// Create makes a Region of size bytes (1 or more), zeroed, mapped read and
// write; name shows in /proc/PID/maps.
func Create(name string, size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("shmem: %s of %d bytes: accepted: 1 or more", name, size)
	}
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("shmem: %s: memfd_create: %w", name, err)
	}
	fail := func(what string, err error) (*Region, error) {
		unix.Close(fd)
		return nil, fmt.Errorf("shmem: %s of %d bytes: %s: %w", name, size, what, err)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		return fail("fchmod", err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	mem, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return &Region{fd: fd, mem: mem, path: fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), fd)}, nil
}

// Bytes returns the Region's memory; nil after Release.
func (r *Region) Bytes() []byte { return r.mem }

// Path returns the path by which another process of this host maps the
// Region (Map), until CloseFD.
func (r *Region) Path() string { return r.path }

// CloseFD closes the Region's descriptor: no process maps it from then on,
// and those that did keep their mappings, as this one does.
func (r *Region) CloseFD() {
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// Release closes the descriptor and unmaps the memory, which nobody may
// use afterwards.
func (r *Region) Release() {
	r.CloseFD()
	if r.mem != nil {
		unix.Munmap(r.mem)
		r.mem = nil
	}
}

// Map maps the Region at path, another process's Region.Path, read and
// write, if it is a regular file of min to max bytes. The mapping lasts
// until Unmap or the end of the process.
func Map(path string, min, max int) ([]byte, error) {
	if !strings.HasPrefix(path, "/proc/") {
		return nil, fmt.Errorf("shmem: %q: not a /proc path", path)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("shmem: %s: %w", path, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("shmem: %s: %w", path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size < int64(min) || st.Size > int64(max) || st.Size == 0 {
		return nil, fmt.Errorf("shmem: %s: a file of %d bytes, not a region of %d to %d", path, st.Size, min, max)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("shmem: %s: mmap: %w", path, err)
	}
	return mem, nil
}

// Unmap unmaps memory that Map returned.
func Unmap(mem []byte) error { return unix.Munmap(mem) }
