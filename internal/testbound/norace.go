//go:build !race

package testbound

const race = false
