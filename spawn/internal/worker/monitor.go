package worker

import "time"

// monitorTick bounds how long a program that computes on every one of
// its Ps keeps this rank's control goroutine (readLoop) from running
// (keepMonitorAwake).
const monitorTick = 100 * time.Millisecond

// keepMonitorAwake keeps a timer of this process due within monitorTick,
// for as long as the process lives.
//
// The Go runtime's monitor thread (sysmon) is what preempts a goroutine
// that computes and polls the network for the others when every P is
// busy. While every P is idle it sleeps until the next timer is due, and
// it is not woken when a goroutine then takes a P and computes without an
// ordinary system call (the library waits and polls with raw ones). A
// rank that slept in a barrier and then computes on its one P
// (GOMAXPROCS=1 on a crowded host) would run readLoop only when some
// timer came due: it would answer neither the console's pings (and be
// judged stopped after GASNET_LIVENESS_TIMEOUT) nor the job's Terminate
// (its grace period would not end it: rank 0's hub would kill it, and the
// launcher's code would be the job's). A timer always due soon bounds the
// monitor's sleep: once it wakes with a P busy, it preempts the
// computation within 10 ms and polls the network.
func keepMonitorAwake() {
	for {
		time.Sleep(monitorTick)
	}
}
