#!/usr/bin/env bash
# scale.sh [N...]: how udpconduit's cost grows with the number of workers,
# on this machine, in one run (make scale). Figures, not a test:
#  - the floor: starting N static Go programs that print a line, all at once,
#    against `hello N` (GASNET_SPAWNFN=L), with their ratio, as built by
#    make build and built with -tags udpconduit_nossh (no S spawner); with
#    SCALE_ROUNDS=R, R rounds of the three alternating for each N, and the
#    median of each ratio (a VM's runs of one program vary by 10-30%);
#  - barrier, 8-byte all-gather and broadcast, and one-element all-reduce
#    per operation over all ranks, in µs and
#    in short round trips (testam -coll), at N = 2, 8, 64, next to Open
#    MPI's MPI_Barrier and MPI_Allgather over TCP (scripts/mpicoll/coll.c).
set -euo pipefail
cd "$(dirname "$0")/.."
NS=("${@:-64 256 512 1024}")
read -r -a NS <<<"${NS[*]}"
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/floor" ./tests/testdata/floor
CGO_ENABLED=0 go build -tags udpconduit_nossh -o "$tmp/hello-nossh" ./cmd/hello

secs() { # secs CMD...: wall seconds of CMD, its output discarded
  local start end
  start=$(date +%s%N)
  "$@" >/dev/null 2>"$tmp/err" || { echo "failed: $*" >&2; tail -5 "$tmp/err" >&2; return 1; }
  end=$(date +%s%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}
floor() { # floor N: start N programs at once and wait for all
  local i
  for ((i = 0; i < $1; i++)); do "$tmp/floor" & done
  wait
}

rounds=${SCALE_ROUNDS:-1}
echo "nproc $(nproc), ulimit -n $(ulimit -n), $rounds round(s) per N"
ratio() { awk -v h="$1" -v f="$2" 'BEGIN { printf "%.2f", h / f }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%6s %10s %10s %7s %10s %7s\n' N floor_s hello_s ratio nossh_s ratio
for n in "${NS[@]}"; do
  hr= xr=
  for ((r = 0; r < rounds; r++)); do
    f=$(secs floor "$n")
    h=$(secs env GASNET_SPAWNFN=L ./bin/hello "$n")
    x=$(secs env GASNET_SPAWNFN=L "$tmp/hello-nossh" "$n")
    printf '%6s %10s %10s %7s %10s %7s\n' "$n" "$f" "$h" "$(ratio "$h" "$f")" "$x" "$(ratio "$x" "$f")"
    hr="$hr $(ratio "$h" "$f")" xr="$xr $(ratio "$x" "$f")"
  done
  [ "$rounds" -gt 1 ] && printf '%6s %10s %10s %7s %10s %7s\n' "$n" median "" "$(echo "$hr" | median)" "" "$(echo "$xr" | median)"
done
[ "${SCALE_COLL:-1}" = 0 ] && exit 0
# The reference: Open MPI's MPI_Barrier and MPI_Allgather over its TCP
# transport (no shared memory, as ours) on the same cores, oversubscribed
# alike: how much of the growth with N this machine imposes on any runtime.
mpi=
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null; then
  mpicc.openmpi -O2 -o "$tmp/coll" scripts/mpicoll/coll.c && mpi=1
else
  echo "no mpicc.openmpi/mpirun.openmpi (make deps installs them): no MPI reference"
fi
for n in 2 8 64; do
  iters=2000
  [ "$n" -gt 8 ] && iters=200
  # UDP, as Open MPI's TCP below: up to 4 ranks per CPU ours would share
  # memory (make shm-bench compares that with Open MPI's vader).
  GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=1 ./bin/testam "$n" -coll -iters "$iters" | grep -v '^short_rtt' || true
  if [ -n "$mpi" ]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
      timeout 300 mpirun.openmpi -np "$n" --mca btl tcp,self "$tmp/coll" "$iters" 2>/dev/null | grep '^mpi_' || true
  fi
done
