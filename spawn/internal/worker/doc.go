// Package worker is a worker's side of the control link: Dial reaches the
// console named by the worker marker (package ctl's Env* variables) and
// routes this process's output to it when asked, Worker.Join sends the
// rank's Join and takes its Welcome, and afterwards the Worker answers
// pings, reports collectives, and ends the process when the console ends
// the job or is lost (DESIGN.md §7, §12). A worker that the S spawner
// started reads its secret from its ssh session as the process starts
// (the package's init, guarded by both markers), so that the end of the
// session ends the worker even before the program calls conduit.Init.
package worker
