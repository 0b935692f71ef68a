// Package spawn starts and serves a udpconduit job, for package conduit,
// its one user (programs use conduit, not this package). In the console,
// the process the user runs as `./prog N args`, Console runs the job
// (spawn/internal/console, which starts the workers through
// spawn/internal/launch and decides the exit code by the rules of
// spawn/internal/verdict). In a worker, Dial and Worker.Join bootstrap
// the rank and keep its link to the console until the job ends
// (spawn/internal/worker). Settings come from GASNET_* environment
// variables (Config, LoadConfig; spawn/internal/envconf). DESIGN.md §2
// lists the packages, §7 the control protocol.
package spawn
