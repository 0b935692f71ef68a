//go:build !linux

package launch

// allowedCPUs returns nil: outside Linux the L spawner binds no worker.
func allowedCPUs() []int { return nil }

// startOn runs start: outside Linux no process starts bound.
func startOn(cpu int, start func() error) error { return start() }
