package console

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/udpconduit/udpconduit/spawn/internal/launch"
)

// slowSpawner starts a worker every 4 s, handing each its control
// connection, as the L spawner does for a job of thousands of ranks.
type slowSpawner struct{ control bool }

func (slowSpawner) Name() string { return "slow" }

func (s slowSpawner) Start(spec *launch.Spec) (launch.Launch, error) {
	for i := range spec.Count {
		time.Sleep(4 * time.Second)
		if s.control {
			a, b := net.Pipe()
			b.Close()
			spec.Control(i, a)
		}
	}
	return nil, nil
}

// TestStartSaying: while the spawner starts the workers, the console says
// every reportEvery how many it has started (or, for a spawner that does
// not hand it control connections, that it is starting them), and stops
// once Start returns.
func TestStartSaying(t *testing.T) {
	for _, c := range []struct {
		control bool
		want    []string
	}{
		{true, []string{"started 1 of 3 workers", "started 2 of 3 workers"}},
		{false, []string{"starting 3 workers", "starting 3 workers"}},
	} {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var said []string
			say := func(format string, a ...any) {
				mu.Lock()
				defer mu.Unlock()
				said = append(said, fmt.Sprintf(format, a...))
			}
			spec := &launch.Spec{Count: 3}
			if c.control {
				spec.Control = func(int, net.Conn) {}
			}
			if _, err := startSaying(slowSpawner{c.control}, spec, say); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute) // nothing more once started
			mu.Lock()
			defer mu.Unlock()
			if d := cmp.Diff(c.want, said); d != "" {
				t.Errorf("control %v: said (-want +got):\n%s", c.control, d)
			}
		})
	}
}
