// Package spawn starts and serves a udpconduit job: in the console (the
// process the user runs as `./prog N args`), Console chooses a spawner (L
// fork/exec, S ssh, C a launcher command such as srun or mpirun), starts N
// workers, accepts their control connections, assigns ranks, sends each
// its welcome, routes their output, watches their liveness and
// collectives, and decides the job's exit code (spawn/internal/verdict);
// in a worker, Dial and Worker.Join bootstrap the rank and keep its link
// to the console until the job ends. Settings come from GASNET_*
// environment variables (Config, LoadConfig). Package conduit is its one
// user; programs use conduit, not this package (DESIGN.md §1, §7).
package spawn
