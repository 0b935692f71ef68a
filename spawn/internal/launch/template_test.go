package launch

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/udpconduit/udpconduit/spawn/internal/ctl"
)

func TestSimpleCommand(t *testing.T) {
	for line, want := range map[string]bool{
		`srun -n 4 '/a b/prog' 'x;y' "q|r"`: true,
		`mpirun -np 4 prog 'it'\''s'`:       true,
		`srun -n 4 prog; echo done`:         false,
		`srun -n 4 prog && true`:            false,
		`srun -n 4 prog > log`:              false,
		`FOO=1 srun -n 4 prog`:              false,
		`srun -n $(nproc) prog`:             false,
		`srun -n "$(nproc)" prog`:           false,
		"srun -n 4 prog\necho":              false,
		`srun 'unterminated`:                false,
		`cd /tmp`:                           false,
		`exec sh -c "srun %C"`:              false,
		`command srun -n 4 prog`:            false,
		`eval srun -n 4 prog`:               false,
	} {
		if got := simpleCommand(line); got != want {
			t.Errorf("simpleCommand(%q) = %v, want %v", line, got, want)
		}
	}
}

func TestLauncherEnv(t *testing.T) {
	got := launcherEnv([]string{"PATH=/bin", "OMPI_MCA_mca_base_env_list=FOO"}, []string{"GASNET_SPAWN_MASTER=1.2.3.4:5", "GASNET_SPAWN_SECRET=s"})
	want := []string{"PATH=/bin", "OMPI_MCA_mca_base_env_list=FOO", "GASNET_SPAWN_MASTER=1.2.3.4:5", "GASNET_SPAWN_SECRET=s",
		"OMPI_MCA_mca_base_env_list=FOO;GASNET_SPAWN_MASTER;GASNET_SPAWN_SECRET", "SLURM_KILL_BAD_EXIT=1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if got := launcherEnv([]string{"SLURM_KILL_BAD_EXIT=0"}, nil); got[len(got)-1] != "OMPI_MCA_mca_base_env_list=" {
		// the user's SLURM_KILL_BAD_EXIT stays
		t.Errorf("user's SLURM_KILL_BAD_EXIT overridden: %q", got)
	}
}

func TestDirectLaunch(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, tc := range []struct {
		name      string
		getenv    func(string) string
		off       bool
		ok, speak bool
		contains  string
	}{
		{"srun task 0", env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "4"), false, true, true, "started by srun as task 0 of 4"},
		{"srun task 2", env("SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "4"), false, true, false, "task 2 of 4"},
		{"mpirun", env("OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "3"), false, true, true, "-np %N %C' ./prog N args"},
		{"mpiexec", env("PMI_RANK", "0", "PMI_SIZE", "2"), false, true, true, "GASNET_CSPAWN_CMD='mpiexec.hydra -n %N %C'"},
		{"PMI_FD alone is not GASNET_DIRECT_LAUNCH=0", env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "4", "PMI_FD", "5"), false, true, true, "srun --mpi=pmi2 -n 4"},
		{"srun, no PMI", env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "4"), false, true, true, "srun --mpi=pmi2 -n 4 ./prog args, or mpiexec.hydra -n 4 ./prog args"},
		{"srun with PMI, direct launch off", env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "4"), true, true, true, "or unset GASNET_DIRECT_LAUNCH"},
		{"console as a single srun task", env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "1"), false, false, false, ""},
		{"inside salloc", env("SLURM_JOB_ID", "7", "SLURM_NTASKS", "4"), false, false, false, ""},
		{"a worker", env(ctl.EnvMaster, "127.0.0.1:1", "SLURM_PROCID", "1", "SLURM_STEP_NUM_TASKS", "4"), false, false, false, ""},
	} {
		msg, speak, ok := DirectLaunch(tc.getenv, "./prog", tc.off)
		if ok != tc.ok || speak != tc.speak || !strings.Contains(msg, tc.contains) {
			t.Errorf("%s: DirectLaunch = %q, %v, %v", tc.name, msg, speak, ok)
		}
	}
	// srun passes ./prog as /cwd/./prog: the hint names it cleanly.
	if msg, _, _ := DirectLaunch(env("SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2"), "/cwd/./prog", false); !strings.Contains(msg, "'srun -n %N %C' /cwd/prog N args") {
		t.Errorf("srun's path: %q", msg)
	}
}

// TestCheckLauncher: a launcher that is not installed is named before
// anything starts; shell constructs, reserved words and builtins are left
// to /bin/sh, which runs the template.
func TestCheckLauncher(t *testing.T) {
	look := func(w string) (string, error) {
		if w == "srun" {
			return "/usr/bin/srun", nil
		}
		return "", exec.ErrNotFound
	}
	for tmpl, want := range map[string]string{
		"srun -n %N %C":                     "",
		"for i in 1 2; do %C & done; wait":  "",
		"while read h; do %C; done < hosts": "",
		"if true; then %C; fi":              "",
		"exec srun %C":                      "",
		"FOO=1 srun %C":                     "",
		"(cd /tmp && %C)":                   "",
		"exit 7; %C":                        "",
		"read h < hosts; %C":                "",
		"nosuchlauncher -np %N %C":          `GASNET_CSPAWN_CMD: the launcher "nosuchlauncher" is not installed or not in PATH`,
		"   ":                               "GASNET_CSPAWN_CMD is empty",
	} {
		err := checkLauncher(tmpl, look)
		if want == "" && err != nil || want != "" && (err == nil || !strings.HasPrefix(err.Error(), want)) {
			t.Errorf("%q: %v, want %q", tmpl, err, want)
		}
	}
}

// TestHintTemplate: the template a direct-launch hint gives has the
// switches Open MPI's mpirun needs on the machine it runs on.
func TestHintTemplate(t *testing.T) {
	for _, c := range []struct {
		template   string
		size, cpus int
		root       bool
		want       string
	}{
		{"mpirun -np %N %C", 2, 2, false, "mpirun -np %N %C"},
		{"mpirun -np %N %C", 3, 2, false, "mpirun --oversubscribe -np %N %C"},
		{"mpirun -np %N %C", 2, 2, true, "mpirun --allow-run-as-root -np %N %C"},
		{"mpirun -np %N %C", 4, 2, true, "mpirun --allow-run-as-root --oversubscribe -np %N %C"},
		{"srun -n %N %C", 4, 2, true, "srun -n %N %C"},
		{"mpiexec.hydra -n %N %C", 4, 2, true, "mpiexec.hydra -n %N %C"},
	} {
		if got := hintTemplate(c.template, c.size, c.root, c.cpus); got != c.want {
			t.Errorf("hintTemplate(%q, %d tasks, root %v, %d CPUs) = %q, want %q", c.template, c.size, c.root, c.cpus, got, c.want)
		}
	}
}
