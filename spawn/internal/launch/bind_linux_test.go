package launch

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestStartOn: a process started on a CPU starts bound to it, and the
// thread that started it runs where it did before; a CPU the kernel
// refuses starts it unbound.
func TestStartOn(t *testing.T) {
	cpus := allowedCPUs()
	if len(cpus) == 0 {
		t.Fatal("the kernel lists no CPU this process may run on")
	}
	last := cpus[len(cpus)-1]
	for _, cpu := range []int{last, maxCPUs - 1} { // the second: no such CPU here
		runtime.LockOSThread()
		before := cpuList(t, "thread-self")
		cmd := exec.Command("grep", "-m1", "Cpus_allowed_list", "/proc/self/status")
		var out strings.Builder
		cmd.Stdout = &out
		err := startOn(cpu, cmd.Start)
		after := cpuList(t, "thread-self")
		runtime.UnlockOSThread()
		if err != nil {
			t.Fatalf("startOn(%d): %v", cpu, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("startOn(%d): grep: %v", cpu, err)
		}
		want := strconv.Itoa(cpu)
		if cpu != last {
			want = before
		}
		if got := strings.TrimSpace(strings.TrimPrefix(out.String(), "Cpus_allowed_list:")); got != want {
			t.Errorf("startOn(%d): the process may run on %q, want %q", cpu, got, want)
		}
		if after != before {
			t.Errorf("startOn(%d): the thread may run on %q after, on %q before", cpu, after, before)
		}
	}
}

// cpuList returns the CPUs task (self, thread-self) may run on, as the
// kernel lists them.
func cpuList(t *testing.T, task string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + task + "/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^Cpus_allowed_list:\s*(\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("no Cpus_allowed_list in /proc/%s/status", task)
	}
	return string(m[1])
}
