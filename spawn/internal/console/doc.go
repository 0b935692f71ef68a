// Package console is a job's console, the process the user runs as
// `./prog N args`: Run chooses and starts a spawner (package launch),
// accepts the workers' control connections and output streams (only those
// that carry the job's secret), assigns ranks and sends each worker its
// welcome, routes the workers' output to its own stdout and stderr, pings
// the workers and watches their collectives for hangs, forwards signals,
// and ends with the job's exit code. The rules that choose that code are
// the pure state machine of package verdict; this package feeds it events
// (exits, aborts, lost connections, launcher ends) and carries out its
// actions (DESIGN.md §7, §8, §12).
package console
