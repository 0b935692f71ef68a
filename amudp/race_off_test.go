//go:build !race

package amudp

const raceEnabled = false
