package tests

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/udpconduit/udpconduit/internal/testbound"
)

// The SLURM the srun tests run their jobs in. A SLURM that answers
// (scontrol ping) is used as it is: never reconfigured, restarted or
// stopped, and no job of it cancelled, however busy it is. Only when none
// answers do the tests start one (scripts/slurm-local.sh up), and after
// them they stop that one (scripts/slurm-local.sh down), unless it then
// runs jobs that are not theirs. The tests' jobs are named
// slurmJobName(), which is how they tell their jobs from the others.

var slurm struct {
	once    sync.Once
	err     error
	started bool // scripts/slurm-local.sh up, by these tests
	busy    bool // a wait for free CPUs has timed out once
}

// slurmJobName is the name of this run's SLURM jobs: SLURM_JOB_NAME, which
// srun reads, is set to it for every job the tests start, and salloc is
// given it (-J).
func slurmJobName() string { return "udpconduit-test-" + runID }

// slurmWait is how long a test waits for SLURM to free CPUs that other
// jobs hold before it fails saying so (scaled with the load).
const slurmWait = time.Minute

// needSlurm makes sure a SLURM answers, as described above, with a free
// CPU for the test's job (whose srun -O takes one CPU however many tasks
// it has).
func needSlurm(t *testing.T) {
	t.Helper()
	needSlurmCPUs(t, 1)
}

// needSlurmCPUs is needSlurm for a job that needs cpus CPUs.
func needSlurmCPUs(t *testing.T, cpus int) {
	t.Helper()
	for _, c := range []string{"srun", "salloc", "sinfo", "squeue", "scontrol"} {
		needCommand(c, "slurm-client")(t)
	}
	slurm.once.Do(startSlurm)
	if slurm.err != nil {
		t.Fatal(slurm.err)
	}
	slurmRoom(t, cpus)
}

// slurmAnswers reports whether a slurmctld answers (scontrol ping). A busy
// SLURM answers: whether a job starts at once is no test of it.
func slurmAnswers() bool {
	out, err := exec.Command("scontrol", "ping").CombinedOutput()
	return err == nil && strings.Contains(string(out), "is UP")
}

func startSlurm() {
	os.Setenv("SLURM_JOB_NAME", slurmJobName())
	if slurmAnswers() {
		return
	}
	out, err := exec.Command("../scripts/slurm-local.sh", "up").CombinedOutput()
	if err != nil {
		slurm.err = fmt.Errorf("no SLURM answers (scontrol ping), and starting one with scripts/slurm-local.sh up failed: %v\n%s", err, out)
		return
	}
	slurm.started = true
	cleanups = append(cleanups, stopSlurm)
}

// stopSlurm stops the SLURM the tests started, unless it runs a job that
// is not theirs (someone's, submitted while the tests ran): then it says
// so and leaves it running.
func stopSlurm() {
	if others := slurmOthers(); len(others) > 0 {
		fmt.Fprintf(os.Stderr, "tests: the SLURM they started (scripts/slurm-local.sh up) is left running: it has jobs that are not theirs:\n%s\nscripts/slurm-local.sh down stops it and cancels them\n", strings.Join(others, "\n"))
		return
	}
	if out, err := exec.Command("../scripts/slurm-local.sh", "down").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "tests: scripts/slurm-local.sh down: %v\n%s", err, out)
	}
}

// slurmJob is a job in SLURM's queue.
type slurmJob struct {
	id, name, user, state string
	cpus                  int
}

func (j slurmJob) String() string {
	return fmt.Sprintf("job %s %q of %s, %s, %d CPUs", j.id, j.name, j.user, j.state, j.cpus)
}

// slurmJobs lists the jobs in SLURM's queue (all users', all states squeue
// shows by default: pending, running, completing).
func slurmJobs() ([]slurmJob, error) {
	out, err := exec.Command("squeue", "-h", "-o", "%i|%j|%u|%t|%C").Output()
	if err != nil {
		return nil, fmt.Errorf("squeue: %v", err)
	}
	var jobs []slurmJob
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 5 {
			continue
		}
		cpus, _ := strconv.Atoi(f[4])
		jobs = append(jobs, slurmJob{id: f[0], name: f[1], user: f[2], state: f[3], cpus: cpus})
	}
	return jobs, nil
}

// slurmOthers lists the jobs in SLURM that are not this run's.
func slurmOthers() []string {
	jobs, err := slurmJobs()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, j := range jobs {
		if j.name != slurmJobName() {
			out = append(out, j.String())
		}
	}
	return out
}

// slurmRoom waits until SLURM's CPUs less those that jobs hold (running or
// completing: the tests' own earlier jobs, which end soon, and others')
// are at least cpus, and no job is completing: SLURM starts no job on a
// node that is completing one (a step killed or cancelled stays so for
// seconds, longer on a loaded machine), so an srun would queue behind it
// (the tests used srun -s, which shares the node, for that; but -s never
// shares it with a user's job). After slurmWait (scaled), or sooner after
// one such wait has timed out, the test fails naming the jobs that are
// not the tests'; the tests never cancel them.
func slurmRoom(t *testing.T, cpus int) {
	t.Helper()
	wait := testbound.For(t, slurmWait)
	if slurm.busy {
		wait = testbound.For(t, 5*time.Second)
	}
	var why string
	for deadline := time.Now().Add(wait); ; time.Sleep(200 * time.Millisecond) {
		total, state, err := slurmNode()
		jobs, err2 := slurmJobs()
		if err == nil && err2 == nil {
			free, completing := total, 0
			var holding []string
			for _, j := range jobs {
				if j.state != "R" && j.state != "CG" {
					continue
				}
				free -= j.cpus
				if j.state == "CG" {
					completing++
				}
				if j.name != slurmJobName() {
					holding = append(holding, j.String())
				}
			}
			responding := !strings.HasSuffix(state, "*") && !strings.HasPrefix(state, "down") && !strings.HasPrefix(state, "drain")
			if free >= cpus && completing == 0 && responding {
				return
			}
			why = fmt.Sprintf("SLURM's node is %s with %d CPUs, %d of them free, %d jobs completing; the test needs %d. Jobs that are not the tests':\n%s", state, total, free, completing, cpus, strings.Join(holding, "\n"))
		} else {
			why = fmt.Sprint(err, err2)
		}
		if time.Now().After(deadline) {
			slurm.busy = true
			t.Fatalf("SLURM has no room for the test's job after %v (the tests never cancel a job they did not start, nor reconfigure a SLURM they did not start; run them when it has room): %s", wait.Round(time.Second), why)
		}
	}
}

// slurmReady is slurmRoom for a job of srun -O (one CPU): the tests call
// it before each.
func slurmReady(t *testing.T) {
	t.Helper()
	slurmRoom(t, 1)
}

// slurmNode returns the CPUs of SLURM's nodes and their state (sinfo).
func slurmNode() (cpus int, state string, err error) {
	out, err := exec.Command("sinfo", "-h", "-o", "%C|%T").Output()
	if err != nil {
		return 0, "", fmt.Errorf("sinfo: %v", err)
	}
	// %C is allocated/idle/other/total.
	l, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	f := strings.Split(l, "|")
	if c := strings.Split(f[0], "/"); len(f) == 2 && len(c) == 4 {
		cpus, err = strconv.Atoi(c[3])
		return cpus, f[1], err
	}
	return 0, "", fmt.Errorf("sinfo -o '%%C|%%T': %q", out)
}

// slurmIdle waits until SLURM runs none of the tests' jobs: the node of a
// cancelled job stays COMPLETING for a while, and a new srun could queue
// behind it. Other jobs are none of its business.
func slurmIdle(t *testing.T) {
	t.Helper()
	bound := testbound.For(t, 30*time.Second)
	for deadline := time.Now().Add(bound); ; time.Sleep(100 * time.Millisecond) {
		out, err := exec.Command("squeue", "-h", "-n", slurmJobName()).CombinedOutput()
		if err == nil && len(strings.TrimSpace(string(out))) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("SLURM still has the tests' jobs after %v: %v\n%s", bound, err, out)
		}
	}
}
