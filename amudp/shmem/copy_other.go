//go:build !amd64

package shmem

const minStrings = 0

const fastStrings = false

func movsb(dst, src *byte, n uintptr) { panic("shmem: no REP MOVSB here") }
