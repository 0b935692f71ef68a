#!/usr/bin/env bash
# pgo.sh: testam and hello built with Go's profile-guided optimization
# into bin/pgo (make pgo; BENCHMARKS.md), from CPU profiles of testam's own
# measurements on this machine: active messages and Put/Get through shared
# memory and over UDP, and collectives at N = 8. With the profile the
# compiler inlines what the measured loops call most, Job.Put and Job.Get
# among them, across packages (https://go.dev/doc/pgo). A program of yours
# gets the same from a profile of its own runs: go build -pgo=FILE.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s build
out=bin/pgo
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GASNET_SPAWNFN=L
# profile NAME ARGS...: testam ARGS with rank 0's profile in NAME.
profile() {
  local name=$1
  shift
  bin/testam "$@" -cpuprofile "$tmp/$name.pprof" >/dev/null
}
profile am-shm 2 -iters 20000 -sizes 8,65000
GASNET_SUPERNODE_MAXSIZE=1 profile am-udp 2 -iters 20000 -sizes 8,65000
profile rma-shm-small 2 -rma -iters 5000000 -sizes 8
profile rma-shm-large 2 -rma -iters 2000 -sizes 1048576
GASNET_SUPERNODE_MAXSIZE=1 profile rma-udp 2 -rma -iters 20000 -sizes 8,1048576
profile coll 8 -coll -iters 2000
go tool pprof -proto "$tmp"/*.pprof >"$out/default.pgo" 2>"$tmp/merge.log" ||
  { cat "$tmp/merge.log" >&2; exit 1; }
CGO_ENABLED=0 go build -pgo="$out/default.pgo" -o "$out/" ./cmd/testam ./cmd/hello
echo "pgo: $out/testam and $out/hello, built with the profile $out/default.pgo" >&2
