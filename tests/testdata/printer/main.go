// Command printer is a test job: every rank prints LINES long lines from 4
// goroutines at once (to check that routed lines never tear), then either
// exits 0 or, with the argument "wait", waits forever in the network. With
// HOSTRANKS set, each rank first prints the ranks on its host. With "late",
// the last rank enters a final barrier only on SIGUSR2 (see lateBarrier);
// with "flood", the others send it requests until it gets SIGUSR2 (see
// flood); with
// "slowjoin", worker 2 sleeps a minute before conduit.Init. With PRINT_ENV
// set to variable names, each rank first prints their values; with
// PRINT_PROCS set, the GOMAXPROCS it runs with; with PRINT_CPUS set, the
// CPUs its threads may run on (threadCPUs); with PRINT_RSEQ set, whether
// glibc registered a restartable-sequences area for its thread (rseqState)
// and the GLIBC_TUNABLES it was started with.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "slowjoin" && os.Getenv("GASNET_SPAWN_INDEX") == "2" {
		// A worker still busy before conduit.Init when the job ends.
		fmt.Println("worker 2 sleeps before Init")
		time.Sleep(time.Minute)
	}
	conduit.Init()
	lines, _ := strconv.Atoi(os.Getenv("LINES"))
	r := conduit.Rank()
	if names := os.Getenv("PRINT_ENV"); names != "" {
		var vs []string
		for _, n := range strings.Fields(names) {
			vs = append(vs, fmt.Sprintf("%s=%q", n, os.Getenv(n)))
		}
		fmt.Printf("rank %d: %s\n", r, strings.Join(vs, " "))
	}
	if os.Getenv("PRINT_PROCS") != "" {
		fmt.Printf("rank %d: GOMAXPROCS %d\n", r, runtime.GOMAXPROCS(0))
	}
	if os.Getenv("PRINT_CPUS") != "" {
		fmt.Printf("rank %d: CPUs %s\n", r, threadCPUs())
	}
	if os.Getenv("PRINT_RSEQ") != "" {
		fmt.Printf("rank %d: rseq %s; started with GLIBC_TUNABLES=%q\n", r, rseqState(), startEnv("GLIBC_TUNABLES"))
	}
	if os.Getenv("HOSTRANKS") != "" {
		fmt.Printf("rank %d shares its host with %v\n", r, conduit.HostRanks())
	}
	putGetRing(r)
	pad := strings.Repeat("x", 300)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < lines; i++ {
				fmt.Printf("rank %d goroutine %d line %d %s end\n", r, g, i, pad)
			}
		}()
	}
	wg.Wait()
	conduit.Barrier()
	if len(os.Args) > 1 && os.Args[1] == "late" {
		lateBarrier(r)
	}
	if len(os.Args) > 1 && os.Args[1] == "flood" {
		flood(r)
	}
	if len(os.Args) > 1 && os.Args[1] == "wait" {
		usr1 := make(chan os.Signal, 1)
		signal.Notify(usr1, syscall.SIGUSR1)
		go func() {
			<-usr1
			fmt.Printf("rank %d got SIGUSR1\n", r)
		}()
		fmt.Println("waiting")
		conduit.WaitUntil(func() bool { return false })
	}
	conduit.Exit(0)
}

// hNop is a request handler that does nothing.
const hNop = 200

// flood: every rank says it is ready, with its pid; the last rank polls
// until it gets SIGUSR2, then calls Exit(0); the others send it requests
// until the job ends.
func flood(r int) {
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	fmt.Printf("ready rank %d pid %d\n", r, os.Getpid())
	last := conduit.Size() - 1
	for {
		if r == last {
			select {
			case <-usr2:
				fmt.Println("flood over")
				conduit.Exit(0)
			default:
			}
			conduit.Poll()
			time.Sleep(time.Millisecond)
			continue
		}
		conduit.RequestShort(last, hNop)
	}
}

// lateBarrier: every rank says it is ready, with its pid; the last rank
// enters the barrier only once it gets SIGUSR2, the others at once; all
// then say done.
func lateBarrier(r int) {
	go2 := make(chan os.Signal, 1)
	signal.Notify(go2, syscall.SIGUSR2)
	fmt.Printf("ready rank %d pid %d\n", r, os.Getpid())
	if r == conduit.Size()-1 {
		<-go2
	}
	conduit.Barrier()
	fmt.Printf("done rank %d\n", r)
	conduit.Exit(0)
}

// putGetRing writes a 150000-byte pattern (three Long chunks) into the next
// rank's segment, reads the previous rank's back (three Medium chunks) and
// exits 3 on any wrong byte.
func putGetRing(r int) {
	const size = 150000
	seg, err := conduit.Attach([]conduit.HandlerEntry{{Index: hNop, Fn: func(*conduit.Token, []uint32, []byte) {}}}, size)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		conduit.Exit(3)
	}
	n := conduit.Size()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + r)
	}
	if err := conduit.Put((r+1)%n, 0, data); err != nil {
		fmt.Fprintln(os.Stderr, err)
		conduit.Exit(3)
	}
	conduit.Barrier()
	prev := (r + n - 1) % n
	for i := range seg {
		if seg[i] != byte(i*7+prev) {
			fmt.Fprintf(os.Stderr, "rank %d: put byte %d wrong\n", r, i)
			conduit.Exit(3)
		}
	}
	buf := make([]byte, size)
	if err := conduit.Get((r+1)%n, 0, buf); err != nil {
		fmt.Fprintln(os.Stderr, err)
		conduit.Exit(3)
	}
	for i := range buf {
		if buf[i] != byte(i*7+r) {
			fmt.Fprintf(os.Stderr, "rank %d: get byte %d wrong\n", r, i)
			conduit.Exit(3)
		}
	}
	if err := conduit.Put((r+1)%n, size-1, data[:2]); err == nil {
		fmt.Fprintln(os.Stderr, "put past the segment accepted")
		conduit.Exit(3)
	}
	conduit.Barrier()
}

// threadCPUs returns the CPUs every thread of this process may run on, as
// the kernel lists them (Cpus_allowed_list), or "differ:" and each
// thread's where they differ.
func threadCPUs() string {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return "unknown: " + err.Error()
	}
	seen := map[string]bool{}
	var all []string
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue // the thread has ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				v = strings.TrimSpace(v)
				if !seen[v] {
					seen[v] = true
					all = append(all, v)
				}
			}
		}
	}
	if len(all) == 1 {
		return all[0]
	}
	return "differ: " + strings.Join(all, " ")
}
