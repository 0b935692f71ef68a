package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// The fault suite (DESIGN.md §5): jobs on real sockets inside a network
// namespace of the test's own (ucf-PID-K; the namespace hosts are uch*),
// whose datagrams nftables drops, duplicates or delays (an HTB class of
// 100 kbit/s on the loopback device reorders them), loopback included.
// Its jobs run with udpOnly: their ranks share a host, and shared memory
// would carry their messages past the faults.

// udpOnly turns shared memory off, so that every message takes UDP.
const udpOnly = "GASNET_SUPERNODE_MAXSIZE=1"

var faultSeq atomic.Int32

// faultNS makes a private network namespace with its loopback up, removed
// when the test ends.
func faultNS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("the fault suite needs root (network namespaces, nftables)")
	}
	needCommand("ip", "iproute2")(t)
	needCommand("nft", "nftables")(t)
	needCommand("tc", "iproute2")(t)
	name := fmt.Sprintf("ucf-%d-%d", os.Getpid(), faultSeq.Add(1))
	ip(t, "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ip(t, "-n", name, "link", "set", "lo", "up")
	return name
}

// inNS runs a command inside namespace ns and fails the test on error.
func inNS(t *testing.T, ns string, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in %s: %s: %v\n%s", ns, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nftRules loads rules (nft -f syntax) into namespace ns.
func nftRules(t *testing.T, ns, rules string) { inNS(t, ns, rules, "nft", "-f", "-") }

// nftCounted sums the packets every nft counter of namespace ns counted.
func nftCounted(t *testing.T, ns string) int {
	sum := 0
	for _, m := range regexp.MustCompile(`counter packets (\d+)`).FindAllStringSubmatch(inNS(t, ns, "", "nft", "list", "ruleset"), -1) {
		n, _ := strconv.Atoi(m[1])
		sum += n
	}
	return sum
}

// lossRules drops pct% of UDP datagrams on input (inet input hook) or on
// output (netdev egress hook of each device: a silent drop, as a network's)
// in a namespace whose devices are devs.
func lossRules(pct int, dir string, devs ...string) string {
	rule := fmt.Sprintf("meta l4proto udp numgen random mod 100 < %d counter drop", pct)
	if dir == "in" {
		return "table inet ucloss {\n chain in {\n  type filter hook input priority -10; policy accept;\n  " + rule + "\n }\n}\n"
	}
	var b strings.Builder
	b.WriteString("table netdev ucloss {\n")
	for _, d := range devs {
		fmt.Fprintf(&b, " chain out_%s {\n  type filter hook egress device %q priority 0; policy accept;\n  %s\n }\n", d, d, rule)
	}
	b.WriteString("}\n")
	return b.String()
}

// runInNS runs program prog of the job inside namespace ns, as run does.
func runInNS(t *testing.T, ns, marker string, env []string, prog string, args ...string) (result, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbound.For(t, 120*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, filepath.Join(bin, prog)}, args...)...)
	start := time.Now()
	res := runCmd(t, ctx, cmd, marker, append(env, udpOnly), prog, args)
	return res, time.Since(start)
}

// rankStats is one rank's GASNET_STATS line.
type rankStats map[string]int

var statsLine = regexp.MustCompile(`(?m)^\S+: rank (\d+) stats: (.*)$`)

// jobStats parses the GASNET_STATS lines of a job's stderr: one per rank,
// or the test fails.
func jobStats(t *testing.T, stderr string, n int) []rankStats {
	t.Helper()
	out := make([]rankStats, n)
	for _, m := range statsLine.FindAllStringSubmatch(stderr, -1) {
		r, _ := strconv.Atoi(m[1])
		if r < 0 || r >= n || out[r] != nil {
			t.Fatalf("stats line for rank %s: out of range or repeated\n%s", m[1], stderr)
		}
		s := rankStats{}
		f := strings.Fields(strings.NewReplacer(";", "", "dropped:", "").Replace(m[2]))
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.Atoi(f[i+1])
			if err != nil {
				t.Fatalf("stats line %q: %q is not a count", m[0], f[i+1])
			}
			s[f[i]] = v
		}
		out[r] = s
	}
	for r, s := range out {
		if s == nil {
			t.Fatalf("no stats line from rank %d\nstderr:\n%s", r, stderr)
		}
		for _, k := range []string{"sent", "received", "retransmits", "reply-resends", "dup-requests", "dup-replies", "malformed", "bad-mac", "bad-source", "bad-slot"} {
			if _, ok := s[k]; !ok {
				t.Fatalf("rank %d's stats line lacks %q", r, k)
			}
		}
	}
	return out
}

// total sums one counter over the ranks.
func total(st []rankStats, key string) int {
	n := 0
	for _, s := range st {
		n += s[key]
	}
	return n
}

// faultCore runs testcore on 4 workers in namespace ns with statistics on
// and checks its verdict: every request and reply ran exactly once with
// intact data. It returns the ranks' statistics.
func faultCore(t *testing.T, ns string, msgs int) []rankStats {
	t.Helper()
	r, took := runInNS(t, ns, t.Name(), []string{"GASNET_SPAWNFN=L", "GASNET_STATS=1"}, "testcore", "4", "-msgs", strconv.Itoa(msgs), "-threads", "2")
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "every request and reply ran exactly once, every checksum matched") {
		t.Fatalf("testcore: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	st := jobStats(t, r.stderr, 4)
	t.Logf("%v, %.0f requests/s; retransmits %d, reply resends %d, duplicate requests %d, duplicate replies %d",
		took.Round(time.Millisecond), float64(4*msgs)/took.Seconds(), total(st, "retransmits"), total(st, "reply-resends"), total(st, "dup-requests"), total(st, "dup-replies"))
	checkNoSurvivors(t, t.Name(), 2*time.Second)
	return st
}

// TestFaultLoss: testcore on 4 workers, every request and reply exactly
// once with intact payloads, while nftables drops 1%, 10% and 30% of the
// datagrams on input, and on output; the ranks' statistics show the
// retransmissions that recovered them.
func TestFaultLoss(t *testing.T) {
	for _, dir := range []string{"in", "out"} {
		for _, pct := range []int{1, 10, 30} {
			t.Run(fmt.Sprintf("%s-%d%%", dir, pct), func(t *testing.T) {
				ns := faultNS(t)
				nftRules(t, ns, lossRules(pct, dir, "lo"))
				st := faultCore(t, ns, 1000)
				dropped := nftCounted(t, ns)
				sent := total(st, "sent")
				t.Logf("nftables dropped %d of about %d datagrams", dropped, sent)
				if dropped == 0 {
					t.Fatalf("nftables dropped nothing: the rules did not apply")
				}
				if total(st, "retransmits")+total(st, "reply-resends") == 0 {
					t.Errorf("%d datagrams dropped, yet no rank retransmitted anything", dropped)
				}
			})
		}
	}
}

// TestFaultDuplication: nftables sends a second copy of 10% of the
// datagrams; duplicates are counted and discarded, and every handler runs
// once.
func TestFaultDuplication(t *testing.T) {
	ns := faultNS(t)
	nftRules(t, ns, "table netdev ucdup {\n chain out_lo {\n  type filter hook egress device \"lo\" priority 0; policy accept;\n  meta l4proto udp numgen random mod 100 < 10 counter dup to \"lo\"\n }\n}\n")
	st := faultCore(t, ns, 1000)
	copies := nftCounted(t, ns)
	if copies == 0 {
		t.Fatalf("nftables duplicated nothing: the rule did not apply")
	}
	if total(st, "dup-requests")+total(st, "dup-replies") == 0 {
		t.Errorf("%d datagrams duplicated, yet no rank saw a duplicate", copies)
	}
}

// TestFaultReordering: a random 10% of the datagrams go through an HTB
// class of 100 kbit/s on the loopback device, so they arrive after others
// sent later (netem is not in this kernel); every handler still runs once.
func TestFaultReordering(t *testing.T) {
	ns := faultNS(t)
	inNS(t, ns, "", "tc", "qdisc", "add", "dev", "lo", "root", "handle", "1:", "htb", "default", "1")
	inNS(t, ns, "", "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:1", "htb", "rate", "10gbit", "quantum", "60000")
	inNS(t, ns, "", "tc", "class", "add", "dev", "lo", "parent", "1:", "classid", "1:2", "htb", "rate", "100kbit", "burst", "100", "cburst", "100", "quantum", "1500")
	nftRules(t, ns, "table inet ucreorder {\n chain out {\n  type filter hook output priority 0; policy accept;\n  meta l4proto udp numgen random mod 100 < 10 counter meta priority set 1:2\n }\n}\n")
	faultCore(t, ns, 1000)
	delayed := nftCounted(t, ns)
	classes := inNS(t, ns, "", "tc", "-s", "class", "show", "dev", "lo")
	t.Logf("%d datagrams through the slow class:\n%s", delayed, classes)
	if delayed == 0 || !regexp.MustCompile(`class htb 1:2 [^\n]*\n\s*Sent [1-9]`).MatchString(classes) {
		t.Fatalf("no datagram went through the slow class")
	}
}

// TestStoppedPeerDuringTraffic: the rank that three others flood with
// requests is stopped (SIGSTOP) for 1.5 s, well within the give-up time,
// and continued: their retransmissions reach it, and the job ends as it
// says (Exit(0) on SIGUSR2), with nothing reported undeliverable.
func TestStoppedPeerDuringTraffic(t *testing.T) {
	cmd, out := startPrinter(t, t.Name(), 4, "flood", "ready rank", "LINES=0", "GASNET_STATS=1", udpOnly)
	pid := lastRankPID(t, out, 4)
	syscall.Kill(pid, syscall.SIGSTOP)
	time.Sleep(1500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGCONT)
	time.Sleep(500 * time.Millisecond)
	syscall.Kill(pid, syscall.SIGUSR2)
	waitEnd(t, cmd, out, 10*time.Second)
	s := out.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(s, "flood over") || strings.Contains(s, "unreachable") {
		t.Fatalf("exit %d, want 0 after \"flood over\" and nothing unreachable:\n%s", code, s)
	}
	st := jobStats(t, s, 4)
	t.Logf("retransmits %d, held back %d, while rank 3 was stopped", total(st, "retransmits"), total(st, "held-back"))
	if total(st, "retransmits") == 0 {
		t.Errorf("no rank retransmitted while rank 3 was stopped")
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestKilledWorkerDuringTraffic: kill -9 of a rank that floods another
// ends the job with a non-zero code and a line naming the rank, through
// its process's status, not the liveness check (30 s), and no process of
// the job is left: with every message on UDP, and with the ranks' messages
// in shared memory.
func TestKilledWorkerDuringTraffic(t *testing.T) {
	for _, mode := range []string{udpOnly, "GASNET_SUPERNODE_MAXSIZE=0"} {
		t.Run(mode, func(t *testing.T) {
			cmd, out := startPrinter(t, t.Name(), 4, "flood", "ready rank", "LINES=0", mode)
			pid := rankPID(t, out, 1)
			time.Sleep(200 * time.Millisecond) // traffic under way
			syscall.Kill(pid, syscall.SIGKILL)
			killed := time.Now()
			waitEnd(t, cmd, out, 10*time.Second)
			took := time.Since(killed)
			t.Logf("kill -9 of rank 1 to the console's exit: %v", took.Round(time.Millisecond))
			if code := cmd.ProcessState.ExitCode(); code == 0 {
				t.Errorf("exit 0 after a rank was killed:\n%s", out.String())
			}
			if want := fmt.Sprintf("rank 1 (pid %d on ", pid); !strings.Contains(out.String(), want) {
				t.Errorf("no line names %q:\n%s", want, out.String())
			}
			if strings.Contains(out.String(), "has not answered the console") {
				t.Errorf("the killed rank was found by the liveness check, not by its status:\n%s", out.String())
			}
			checkNoSurvivors(t, t.Name(), 2*time.Second)
		})
	}
}

// TestHostileDatagrams: while a job runs, a process of the same namespace
// sends every worker's port garbage, truncated and oversized copies of the
// job's datagrams, the job's own datagrams replayed from their original
// source addresses, and an earlier job's datagrams replayed the same way
// (tests/testdata/attacker): the job completes with every request and
// reply run exactly once, and its statistics show what was dropped.
func TestHostileDatagrams(t *testing.T) {
	ns := faultNS(t)
	capture := filepath.Join(t.TempDir(), "earlier-job")
	capDone := make(chan string, 1)
	go func() {
		out, _ := exec.Command("ip", "netns", "exec", ns, filepath.Join(bin, "attacker"), "capture", "3", capture).CombinedOutput()
		capDone <- string(out)
	}()
	time.Sleep(300 * time.Millisecond) // the sniffer is up
	if r, _ := runInNS(t, ns, t.Name()+"-earlier", []string{"GASNET_SPAWNFN=L"}, "testcore", "4", "-msgs", "300"); r.code != 0 {
		t.Fatalf("the earlier job: exit %d\n%s", r.code, r.stderr)
	}
	if out := <-capDone; !regexp.MustCompile(`captured [1-9]\d* datagrams`).MatchString(out) {
		t.Fatalf("nothing captured of the earlier job: %s", out)
	}
	attack := exec.Command("ip", "netns", "exec", ns, filepath.Join(bin, "attacker"), "attack", "4", capture)
	var attackOut bytes.Buffer
	attack.Stdout, attack.Stderr = &attackOut, &attackOut
	if err := attack.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { attack.Process.Kill(); attack.Wait() })
	time.Sleep(200 * time.Millisecond)
	st := faultCore(t, ns, 3000)
	attack.Wait()
	t.Logf("the attacker sent:\n%s", attackOut.String())
	for _, what := range []string{"garbage", "truncated", "oversized", "live replays", "earlier job's replays"} {
		if !regexp.MustCompile(`(?m)^` + what + ` [1-9]`).MatchString(attackOut.String()) {
			t.Errorf("the attacker sent no %s:\n%s", what, attackOut.String())
		}
	}
	t.Logf("dropped: malformed %d, bad MAC %d, bad source %d, bad slot %d; duplicates %d, stale %d",
		total(st, "malformed"), total(st, "bad-mac"), total(st, "bad-source"), total(st, "bad-slot"),
		total(st, "dup-requests")+total(st, "dup-replies"), total(st, "stale"))
	if total(st, "malformed") == 0 || total(st, "bad-mac") == 0 {
		t.Errorf("the ranks counted no malformed or no failed-MAC datagram under attack")
	}
}

// consoleAddr reads the console's address from the environment of a worker
// of the job with the given marker (L workers have it there).
func consoleAddr(t *testing.T, marker string) string {
	t.Helper()
	for _, dir := range marked(marker) {
		b, _ := os.ReadFile(dir + "/environ")
		for _, kv := range bytes.Split(b, []byte{0}) {
			if v, ok := bytes.CutPrefix(kv, []byte("GASNET_SPAWN_MASTER=")); ok {
				return string(v)
			}
		}
	}
	t.Fatalf("no worker of %s names its console", marker)
	return ""
}

// TestHostileConnections: while a job runs, 1000 connections at once reach
// its console: silent ones, ones with a wrong secret, garbage, and a frame
// header that announces 64 MiB. The console closes each within its 5 s
// window for the secret, having read a few bytes, and the job then ends
// as it would have, its output whole.
func TestHostileConnections(t *testing.T) {
	cmd, out := startPrinter(t, t.Name(), 4, "late", "ready rank", "LINES=0", udpOnly)
	addr := consoleAddr(t, t.Name())
	hello := append([]byte{64}, strings.Repeat("ab", 32)...) // a Hello body: the secret's length, then the secret
	payloads := [][]byte{
		nil, // silent
		append([]byte{8, byte(len(hello)), 0, 0, 0}, hello...), // a Hello with a wrong secret
		[]byte("GET / HTTP/1.0\r\n\r\n"),                       // garbage
		{8, 0, 0, 0, 4},                                        // a 64 MiB frame
	}
	const conns = 1000
	start := time.Now()
	var wg sync.WaitGroup
	var closed, failed atomic.Int32
	var slowest atomic.Int64
	for i := range conns {
		wg.Go(func() {
			c, err := net.DialTimeout("tcp", addr, 10*time.Second)
			if err != nil {
				failed.Add(1)
				return
			}
			defer c.Close()
			c.Write(payloads[i%len(payloads)])
			c.SetReadDeadline(time.Now().Add(15 * time.Second))
			if _, err := io.Copy(io.Discard, c); err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
				closed.Add(1)
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d)
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d of %d connections closed by the console, the last after %v; %d not made", closed.Load(), conns, time.Duration(slowest.Load()).Round(time.Millisecond), failed.Load())
	if closed.Load()+failed.Load() != conns {
		t.Errorf("%d connections were still open after 15 s", conns-closed.Load()-failed.Load())
	}
	syscall.Kill(lastRankPID(t, out, 4), syscall.SIGUSR2)
	waitEnd(t, cmd, out, 20*time.Second)
	if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Count(out.String(), "done rank") != 4 {
		t.Errorf("exit %d, want 0 and 4 ranks done:\n%s", code, out.String())
	}
	checkNoSurvivors(t, t.Name(), 2*time.Second)
}

// TestTwoJobsAtOnce: two jobs on the same host at once, each with its own
// secret and ports, do not disturb each other.
func TestTwoJobsAtOnce(t *testing.T) {
	var wg sync.WaitGroup
	res := make([]result, 2)
	for i := range res {
		wg.Go(func() {
			res[i] = run(t, fmt.Sprintf("%s-%d", t.Name(), i), []string{"GASNET_STATS=1", udpOnly}, "testcore", "4", "-msgs", "2000")
		})
	}
	wg.Wait()
	for i, r := range res {
		if r.code != 0 {
			t.Errorf("job %d: exit %d\n%s", i, r.code, r.stderr)
			continue
		}
		st := jobStats(t, r.stderr, 4)
		if n := total(st, "bad-mac") + total(st, "bad-source") + total(st, "malformed"); n != 0 {
			t.Errorf("job %d dropped %d datagrams: the other job's reached it", i, n)
		}
	}
}

// TestKilledLeaderWhileOthersWaitInBarrier: kill -9 of rank 0, which leads
// its host's ranks, while ranks 1 and 2 wait in a barrier that rank 3 has
// not entered (with shared memory, they wait on its words, not for a
// message): the job ends non-zero naming rank 0, and nothing of it is
// left; over UDP alone too.
func TestKilledLeaderWhileOthersWaitInBarrier(t *testing.T) {
	for _, mode := range []string{udpOnly, "GASNET_SUPERNODE_MAXSIZE=0"} {
		t.Run(mode, func(t *testing.T) {
			cmd, out := startPrinter(t, t.Name(), 4, "late", "ready rank", "LINES=0", mode, "GASNET_VERBOSEENV=1")
			pid := rankPID(t, out, 0)
			time.Sleep(300 * time.Millisecond) // ranks 0-2 wait in the barrier
			syscall.Kill(pid, syscall.SIGKILL)
			waitEnd(t, cmd, out, 10*time.Second)
			if code := cmd.ProcessState.ExitCode(); code == 0 {
				t.Errorf("exit 0 after rank 0 was killed:\n%s", out.String())
			}
			if want := fmt.Sprintf("rank 0 (pid %d on ", pid); !strings.Contains(out.String(), want) {
				t.Errorf("no line names %q:\n%s", want, out.String())
			}
			if words := strings.Contains(out.String(), "barrier on shared words"); words != (mode != udpOnly) {
				t.Errorf("%s: barrier on shared words: %v\n%s", mode, words, out.String())
			}
			checkNoSurvivors(t, t.Name(), 2*time.Second)
		})
	}
}
