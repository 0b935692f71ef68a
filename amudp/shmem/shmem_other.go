//go:build !linux

package shmem

// Region is shared memory that this process created; there is none on
// this system.
type Region struct{}

// Create returns ErrUnsupported.
func Create(string, int) (*Region, error) { return nil, ErrUnsupported }

// Bytes returns nil.
func (r *Region) Bytes() []byte { return nil }

// Path returns "".
func (r *Region) Path() string { return "" }

// CloseFD does nothing.
func (r *Region) CloseFD() {}

// Release does nothing.
func (r *Region) Release() {}

// Map returns ErrUnsupported.
func Map(string, int, int) ([]byte, error) { return nil, ErrUnsupported }

// Unmap does nothing.
func Unmap([]byte) error { return nil }
