// Package launch starts a job's workers: the Spawner interface and its
// three kinds, L (Local: fork/exec on this host), C (Custom: a launcher
// command such as srun or mpirun, from a template) and S (SSH: one ssh
// session per worker, or a spawn tree in which workers start the next
// level), with the reaping of their processes. Choose and For pick the
// spawner from the settings. Programs built with -tags udpconduit_nossh
// have no S spawner and do not link the ssh libraries (DESIGN.md §9).
package launch
