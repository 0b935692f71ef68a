//go:build !linux

package tests

import "testing"

// onOneCPU fails the test: only Linux sets a thread's CPUs here.
func onOneCPU(t *testing.T, _ func() result) result {
	t.Helper()
	t.Fatal("running a job on one CPU: Linux only")
	return result{}
}
