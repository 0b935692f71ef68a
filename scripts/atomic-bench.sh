#!/usr/bin/env bash
# atomic-bench.sh [ITERS]: remote atomics' throughput on this machine, in
# one run (make atomic-bench). Figures, not a test: ranks 1..N-1 each
# fetch-and-add to one word of rank 0 (one at a time), then to random words
# of random other ranks, at N = 2, 4, 8 (ATOMIC_BENCH_N), as
#  - testam N -atomics over UDP (GASNET_SUPERNODE_MAXSIZE=1) and with every
#    rank sharing memory (=0: processor atomics on the mappings);
#  - Open MPI 4.1's MPI_Fetch_and_op with MPI_Win_flush after each
#    (scripts/mpiamo/fao.c), one-sided by messages over TCP (--mca osc
#    pt2pt --mca btl tcp,self) and in a shared-memory window (its default
#    on one node, osc sm: processor atomics on the mapping, as ours).
# Each row gives operations per second over all ranks and the ratio of ours
# to Open MPI's over the same kind of path (higher is better).
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-5000}
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mpi=
if command -v mpicc.openmpi >/dev/null && mpicc.openmpi -O2 -o "$tmp/fao" scripts/mpiamo/fao.c; then mpi=1; fi
[ -n "$mpi" ] || echo "no Open MPI (make deps installs it): no MPI columns"
echo "nproc $(nproc); $iters operations per rank and phase"
ours() { # ours N MAXSIZE: "phase ops/s" lines
  env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE="$2" ./bin/testam "$1" -atomics -iters "$iters" | awk '{ print $1, $8 }'
}
theirs() { # theirs N MCA-OPTIONS...
  [ -n "$mpi" ] || return 0
  local n=$1
  shift
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    timeout 300 mpirun.openmpi -np "$n" "$@" "$tmp/fao" "$iters" 2>/dev/null | awk '{ sub(/^mpi_fao/, "atomic"); print $1, $6 }' || true
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
printf '%-14s %3s %12s %12s %8s %12s %12s %8s\n' phase N udp mpi_tcp udp/tcp shm mpi_sm shm/sm
for n in ${ATOMIC_BENCH_N:-2 4 8}; do
  ours "$n" 1 >"$tmp/udp"
  ours "$n" 0 >"$tmp/shm"
  theirs "$n" --mca osc pt2pt --mca btl tcp,self >"$tmp/tcp"
  theirs "$n" --mca btl vader,self >"$tmp/vader"
  for p in atomic_one atomic_random; do
    get() { awk -v k="$p" '$1 == k { print $2 }' "$1"; }
    u=$(get "$tmp/udp"); t=$(get "$tmp/tcp"); s=$(get "$tmp/shm"); v=$(get "$tmp/vader")
    printf '%-14s %3s %12s %12s %8s %12s %12s %8s\n' "$p" "$n" "$u" "${t:--}" "$(ratio "$u" "$t")" "$s" "${v:--}" "$(ratio "$s" "$v")"
  done
done
