// Package tests holds udpconduit's end-to-end tests: real worker
// processes started by the programs in cmd/ and tests/testdata, through
// every spawner (L, S against a real sshd, C under srun, mpirun and
// mpiexec), in network namespaces with their own addresses and under real
// packet loss (nftables). `make test` runs them after installing what they
// need (`make deps`).
package tests
