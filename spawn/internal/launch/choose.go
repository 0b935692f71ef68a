package launch

import (
	"fmt"
	"os"
	"strings"

	"github.com/udpconduit/udpconduit/spawn/internal/cmdtmpl"
	"github.com/udpconduit/udpconduit/spawn/internal/envconf"
)

// slurmTemplate is the launcher command used inside a SLURM allocation
// when no spawner is chosen.
const slurmTemplate = "srun -n %N %C"

// For returns the spawner of the given letter for a job of n
// workers. say prints the spawners' notes and command lines in verbose mode
// (nil: quiet).
func For(name string, cfg *envconf.Config, src map[string]envconf.Source, n int, say func(string, ...any)) (Spawner, error) {
	switch name {
	case "L":
		return Local{}, nil
	case "S":
		return NewSSH(cfg, src, n, say)
	case "C":
		c := Custom{Template: cfg.CSpawnCmd, Servers: cmdtmpl.SplitServers(cfg.CSpawnServers), Say: say}
		if c.Template == "" {
			if os.Getenv("SLURM_JOB_ID") == "" {
				return nil, fmt.Errorf("GASNET_SPAWNFN=C needs GASNET_CSPAWN_CMD, the launcher command: for example 'srun -n %%N %%C' or 'mpirun -np %%N %%C'")
			}
			c.Template = slurmTemplate
		}
		if c.Template == slurmTemplate && cfg.WorkerRank == "" {
			c.Env = []string{"GASNET_WORKER_RANK=SLURM_PROCID"} // rank = SLURM task rank
		}
		return c, nil
	}
	return nil, fmt.Errorf("GASNET_SPAWNFN=%s: accepted: L, S or C", name)
}

// ForwardEnv reads GASNET_FORWARD_ENV (name is the variable as set): NAME
// takes the console's value, NAME=VALUE sets one.
func ForwardEnv(list, name string, lookup func(string) (string, bool)) ([]string, error) {
	var out []string
	for _, w := range strings.FieldsFunc(list, func(r rune) bool { return r == ' ' || r == ',' || r == '\t' }) {
		k, v, set := strings.Cut(w, "=")
		if !envconf.ValidRankSpec(k) || k[0] >= '0' && k[0] <= '9' {
			return nil, fmt.Errorf("%s: %q is not a variable name; accepted: NAME or NAME=VALUE, separated by spaces or commas", name, k)
		}
		if !set {
			var ok bool
			if v, ok = lookup(k); !ok {
				return nil, fmt.Errorf("%s: %s is not set in the console's environment; accepted: the name of a set variable, or NAME=VALUE", name, k)
			}
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// Choose is Config.ChooseSpawner, except that inside a SLURM
// allocation (SLURM_JOB_ID set) with no spawner chosen it is C with srun.
func Choose(cfg *envconf.Config, getenv func(string) string) (name, why string) {
	name = cfg.ChooseSpawner()
	if name == "L" && cfg.SpawnFn == "" && getenv("SLURM_JOB_ID") != "" {
		return "C", fmt.Sprintf("inside SLURM allocation %s: workers started with %q, rank = SLURM_PROCID", getenv("SLURM_JOB_ID"), slurmTemplate)
	}
	return name, ""
}
