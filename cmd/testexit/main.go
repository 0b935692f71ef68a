// Command testexit runs exit scenario K on N workers; the console's exit
// code is the scenario's expectation and no process of the job survives
// (DESIGN.md §11, after GASNet's testexit).
//
//	./testexit N K
//	./testexit -list
package main

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"time"

	"github.com/udpconduit/udpconduit/conduit"
)

// Scenario is one exit test; Want is the console's expected exit code
// (-1: any of the codes the ranks pass to Exit; WantPanic: 2 when a panic
// trace reached the console, else 0).
type Scenario struct {
	Name string
	Want int
	Run  func(rank, n int)
}

// WantPanic marks a scenario whose code depends on whether its panic ran
// before the job ended: 2 (a Go panic) if its trace is printed, else 0.
const WantPanic = -2

const (
	hExit  = 130 // request handler: Exit(args[0])
	hReply = 131 // request handler that replies to hExitR
	hExitR = 132 // reply handler: Exit(args[0])
	hNop   = 133
	hPanic = 134 // request handler that panics
	// hUnregistered is a client index no rank registers.
	hUnregistered = 200
)

// spin computes forever without polling: Exit must still reach this rank.
func spin() {
	//lint:ignore SA5002 the scenario needs a rank that never polls
	for {
	}
}

func barrier() { conduit.Barrier() }

func attach() { conduit.Attach(handlers, 1024) }

var handlers = []conduit.HandlerEntry{
	{Index: hExit, Fn: func(_ *conduit.Token, a []uint32, _ []byte) { conduit.Exit(int(a[0])) }},
	{Index: hReply, Fn: func(t *conduit.Token, a []uint32, _ []byte) { t.ReplyShort(hExitR, a...) }},
	{Index: hExitR, Fn: func(_ *conduit.Token, a []uint32, _ []byte) { conduit.Exit(int(a[0])) }},
	{Index: hNop, Fn: func(*conduit.Token, []uint32, []byte) {}},
	{Index: hPanic, Fn: func(*conduit.Token, []uint32, []byte) { panic("testexit: panic in a handler") }},
}

// Scenarios is the table; K counts from 1.
var Scenarios = []Scenario{
	{"collective exit(1) on all ranks", 1, func(r, n int) { attach(); conduit.Exit(1) }},
	{"all ranks return from main", 0, func(r, n int) { attach(); barrier() }},
	{"exit(3) on rank 0 while others wait in a barrier", 3, func(r, n int) {
		attach()
		if r == 0 {
			time.Sleep(100 * time.Millisecond)
			conduit.Exit(3)
		}
		barrier()
	}},
	{"SIGINT to the last rank while others wait in a barrier", 128 + 2, func(r, n int) {
		attach()
		if r == n-1 {
			time.Sleep(100 * time.Millisecond)
			syscall.Kill(os.Getpid(), syscall.SIGINT)
			time.Sleep(time.Second)
		}
		barrier()
	}},
	{"exit(5) on rank 0 while others compute without polling", 5, func(r, n int) {
		attach()
		if r == 0 {
			time.Sleep(200 * time.Millisecond)
			conduit.Exit(5)
		}
		spin()
	}},
	{"collective exit(6) between Init and Attach", 6, func(r, n int) { conduit.Exit(6) }},
	{"exit(7) on rank 0 between Init and Attach, others attaching", 7, func(r, n int) {
		if r == 0 {
			conduit.Exit(7)
		}
		attach()
		barrier()
	}},
	{"rank 0 returns from main while others wait in a barrier (an abnormal end)", 1, func(r, n int) {
		attach()
		if r != 0 {
			barrier()
		}
	}},
	{"rank 0 returns from main while others compute without polling (an abnormal end)", 1, func(r, n int) {
		attach()
		if r != 0 {
			spin()
		}
	}},
	{"collective exit(10) from request handlers on all ranks", 10, func(r, n int) {
		attach()
		barrier()
		conduit.RequestShort((r+1)%n, hExit, 10)
		conduit.WaitUntil(func() bool { return false })
	}},
	{"exit(11) from a remote request handler", 11, func(r, n int) {
		attach()
		if r == 0 {
			conduit.RequestShort(n-1, hExit, 11)
		}
		conduit.WaitUntil(func() bool { return false })
	}},
	{"exit(12) from a reply handler", 12, func(r, n int) {
		attach()
		if r == 0 {
			conduit.RequestShort(n-1, hReply, 12)
		}
		conduit.WaitUntil(func() bool { return false })
	}},
	{"exit(13) from a loopback request handler", 13, func(r, n int) {
		attach()
		if r == 0 {
			conduit.RequestShort(0, hExit, 13)
		}
		barrier()
	}},
	{"exit(14) on rank 0 while peers are blocked in requests to it", 14, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			time.Sleep(300 * time.Millisecond) // no polling: the others run out of credit
			conduit.Exit(14)
		}
		for {
			conduit.RequestShort(0, hNop)
		}
	}},
	{"a Go panic on rank 0 while others wait in a barrier", 2, func(r, n int) {
		attach()
		if r == 0 {
			panic("testexit: deliberate panic")
		}
		barrier()
	}},
	{"os.Exit(16) on rank 0 without conduit.Exit", 16, func(r, n int) {
		attach()
		if r == 0 {
			os.Exit(16)
		}
		barrier()
	}},
	{"kill -9 of rank 0 while others wait in a barrier", 128 + 9, func(r, n int) {
		attach()
		if r == 0 {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
		barrier()
	}},
	{"collective exit with differing codes (20+rank)", -1, func(r, n int) {
		attach()
		barrier()
		conduit.Exit(20 + r)
	}},
	{"rank 0 prints a summary after the final barrier, then every rank calls Exit(0)", 0, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			time.Sleep(20 * time.Millisecond) // the others' Exit(0) comes first
		}
		// The usual SPMD ending: a rank asks who it is, then prints.
		// Rank, Size and HostRanks only read: the job's end elsewhere
		// does not stop it there.
		if conduit.Rank() == 0 {
			fmt.Printf("summary: %d ranks done (%d on this host)\n", conduit.Size(), len(conduit.HostRanks()))
		}
		conduit.Exit(0)
	}},
	{"a panic in a handler on the last rank while the others call Exit(0)", WantPanic, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			conduit.RequestShort(n-1, hPanic)
		}
		if r != n-1 {
			time.Sleep(time.Millisecond) // usually after the panic, sometimes not
			conduit.Exit(0)
		}
		conduit.WaitUntil(func() bool { return false })
	}},
	{"os.Exit(0) on rank 0 without conduit.Exit while others wait in a barrier", 1, func(r, n int) {
		attach()
		if r == 0 {
			os.Exit(0)
		}
		barrier()
	}},
	{"conduit.Exit(-1) on rank 0: outside 0..255, the job ends with 1", 1, func(r, n int) {
		attach()
		if r == 0 {
			conduit.Exit(-1)
		}
		barrier()
	}},
	{"conduit.Exit(256) on rank 0: not 0, the job ends with 1", 1, func(r, n int) {
		attach()
		if r == 0 {
			conduit.Exit(256)
		}
		barrier()
	}},
	{"exit(24) from a handler on rank 0 while every other rank floods it with requests", 24, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			conduit.RequestShort(0, hExit, 24) // runs among the others' requests
			conduit.WaitUntil(func() bool { return false })
		}
		for {
			conduit.RequestShort(0, hNop)
		}
	}},
	// GASNet's testexit 51-55: one thread exits while the others of its
	// process are busy in the library, or not.
	{"exit(25) from one goroutine while another of the rank waits in a barrier", 25, func(r, n int) {
		attach()
		if r == 0 {
			go barrier()
			time.Sleep(50 * time.Millisecond)
			conduit.Exit(25)
		}
		barrier()
	}},
	{"exit(26) from one goroutine while another of the rank spins without polling", 26, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			go spin()
			time.Sleep(50 * time.Millisecond)
			conduit.Exit(26)
		}
		barrier()
	}},
	{"exit(27) from one goroutine while another of the rank polls", 27, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			go func() {
				for {
					conduit.Poll()
				}
			}()
			time.Sleep(50 * time.Millisecond)
			conduit.Exit(27)
		}
		barrier()
	}},
	{"exit(28) from one goroutine while another of the rank sends requests", 28, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			go func() {
				for {
					conduit.RequestShort(n-1, hNop)
				}
			}()
			time.Sleep(50 * time.Millisecond)
			conduit.Exit(28)
		}
		conduit.WaitUntil(func() bool { return false })
	}},
	// Crashes: the console reports each by rank with the status the OS
	// gives (a Go crash exits 2 with its trace on stderr).
	{"SIGQUIT to rank 0 (goroutine dump) while others wait in a barrier", 2, func(r, n int) {
		attach()
		if r == 0 {
			syscall.Kill(os.Getpid(), syscall.SIGQUIT)
			select {}
		}
		barrier()
	}},
	{"SIGABRT to rank 0 (abort) while others wait in a barrier", 2, func(r, n int) {
		attach()
		if r == 0 {
			syscall.Kill(os.Getpid(), syscall.SIGABRT)
			select {}
		}
		barrier()
	}},
	{"fatal error on rank 0: concurrent map writes", 2, func(r, n int) {
		attach()
		if r == 0 {
			// The runtime catches concurrent writes only when they run in
			// parallel: a rank of a crowded host has one P (see conduit's
			// procsMode), so take two.
			runtime.GOMAXPROCS(2)
			m := map[int]int{}
			for g := 0; g < 4; g++ {
				go func() {
					for i := 0; ; i++ {
						m[i%64] = i
					}
				}()
			}
			select {}
		}
		barrier()
	}},
	{"segmentation fault on rank 0 (nil pointer write)", 2, func(r, n int) {
		attach()
		if r == 0 {
			var p *[1 << 10]int
			p[len(os.Args)] = 1
		}
		barrier()
	}},
	{"bus error on rank 0 (a mapped page past the end of its file)", 2, func(r, n int) {
		attach()
		if r == 0 {
			busError()
		}
		barrier()
	}},
	{"floating-point exception on rank 0 (integer division by zero)", 2, func(r, n int) {
		attach()
		if r == 0 {
			zero, _ := strconv.Atoi(os.Getenv("TESTEXIT_ZERO")) // 0, unknown to the compiler
			fmt.Println(n / zero)
		}
		barrier()
	}},
	{"a panic in another goroutine of rank 0 while its main goroutine waits in a barrier", 2, func(r, n int) {
		attach()
		if r == 0 {
			go func() { panic("testexit: panic in a goroutine") }()
		} else {
			// Rank 0 must still wait in the barrier when its goroutine
			// panics: a barrier over active messages can complete in
			// microseconds.
			time.Sleep(500 * time.Millisecond)
		}
		barrier()
	}},
	{"rank 0 requests a handler rank 1 never registered, then every rank calls Barrier and Exit(0): the abort wins", 1, func(r, n int) {
		attach()
		if r == 0 {
			conduit.RequestShort(1%n, hUnregistered)
		}
		barrier()
		fmt.Printf("rank %d left the barrier\n", r)
		conduit.Exit(0)
	}},
	{"non-blocking barrier at the end: BarrierNB, print, Wait, print, Exit(0)", 0, func(r, n int) {
		attach()
		if r == 0 {
			// The others' first message waits here, and BarrierNB's polling
			// answers it: their barrier completes while this rank sleeps,
			// and their Exit(0) comes first.
			time.Sleep(10 * time.Millisecond)
		}
		h := conduit.World().BarrierNB()
		fmt.Printf("rank %d notified\n", r)
		if r == 0 {
			time.Sleep(50 * time.Millisecond)
		}
		h.Wait()
		fmt.Printf("rank %d waited\n", r)
		conduit.Exit(0)
	}},
	{"exit(5) on rank 0 while others compute, the last one starved (stopped) across the job's end for 1.25 GASNET_EXIT_TIMEOUT", 5, func(r, n int) {
		attach()
		barrier()
		if r == 0 {
			time.Sleep(200 * time.Millisecond)
			conduit.Exit(5)
		}
		if r == n-1 && n > 1 {
			// Stopped at rank 0's hub's first look at the ranks left
			// (GASNET_EXIT_TIMEOUT after the end), it runs again well
			// before the next (one more after): it answers the hub's
			// ping, and its grace period ends it with the job's code.
			time.Sleep(250 * time.Millisecond)
			starve(exitTimeout() * 5 / 4)
		}
		spin()
	}},
	{"ranks 0 and 1 compute (no library call, one P) for 4 s after a barrier they slept in, the others wait in a barrier", 0, func(r, n int) {
		attach()
		if r > 1 {
			time.Sleep(100 * time.Millisecond)
		}
		barrier()
		if r <= 1 {
			// The tests run it with GOMAXPROCS=1,
			// GASNET_POLL_SPIN=0 and GASNET_LIVENESS_TIMEOUT=2s: the
			// ranks must go on answering the pings while they
			// compute, and rank 0 of a job a launcher started must go
			// on sending its hub's.
			for start := time.Now(); time.Since(start) < 4*time.Second; {
			}
		}
		barrier()
		conduit.Exit(0)
	}},
}

// exitTimeout is GASNET_EXIT_TIMEOUT as this process reads it (2s by
// default).
func exitTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("GASNET_EXIT_TIMEOUT")); err == nil {
		return d
	}
	return 2 * time.Second
}

// starve stops this process for d, as a host too loaded to run it would:
// a child process sends it SIGCONT.
func starve(d time.Duration) {
	cont := exec.Command("sh", "-c", fmt.Sprintf("sleep %.3f; kill -CONT %d", d.Seconds(), os.Getpid()))
	if err := cont.Start(); err != nil {
		panic(err)
	}
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	go cont.Wait()
}

// busError touches a mapped page that lies past the end of its (empty)
// file: the kernel sends SIGBUS.
func busError() {
	f, err := os.CreateTemp("", "testexit-bus")
	if err != nil {
		panic(err)
	}
	os.Remove(f.Name())
	b, err := syscall.Mmap(int(f.Fd()), 0, 4096, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		panic(err)
	}
	fmt.Println(b[0])
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "-list" {
		for i, s := range Scenarios {
			fmt.Printf("%2d %4d  %s\n", i+1, s.Want, s.Name)
		}
		// The legend goes to stderr: stdout is the table alone, which
		// the tests read.
		fmt.Fprintln(os.Stderr, "columns: K, the exit code the job must end with, the scenario; code -1: any of the codes the ranks pass to Exit; -2: 2 when a panic trace reached the console, else 0")
		return
	}
	conduit.Usage = fmt.Sprintf("K  (K: the scenario, 1..%d; -list shows them)", len(Scenarios))
	conduit.Init()
	// Every rank checks K; rank 0 alone says what is wrong.
	var k int
	var bad string
	if len(os.Args) != 2 {
		bad = fmt.Sprintf("usage: testexit N K (K = 1..%d; -list shows them)", len(Scenarios))
	} else if v, err := strconv.Atoi(os.Args[1]); err != nil || v < 1 || v > len(Scenarios) {
		bad = fmt.Sprintf("testexit: K=%q: accepted 1..%d", os.Args[1], len(Scenarios))
	} else {
		k = v
	}
	if bad != "" {
		// Rank 0 says it and ends the job; the others wait to be told, so
		// that no Exit of theirs ends rank 0 before it speaks.
		if conduit.Rank() == 0 {
			fmt.Fprintln(os.Stderr, bad)
			conduit.Exit(1)
		}
		conduit.WaitUntil(func() bool { return false })
	}
	Scenarios[k-1].Run(conduit.Rank(), conduit.Size())
}
