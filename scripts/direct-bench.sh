#!/usr/bin/env bash
# direct-bench.sh [ROUNDS] [NS]: startup and exit of hello at N tasks under
# srun --mpi=pmi2 and mpiexec.hydra, five ways in turn each round: the
# launcher running `true` alone (the floor), the launcher running a Go
# program that prints a line (tests/testdata/floor: what starting N Go
# processes costs), MPICH's hello (scripts/mpihello/hello.c: the MPI peer,
# started by the same launcher), hello launched directly (the default,
# DESIGN.md §9.1), and hello through the console with the C spawner and
# the same launcher. Prints the median of each, in ms, and the ratios to
# the floor. Needs SLURM up (scripts/slurm-local.sh up)
# and MPICH with its compiler (make deps). Figures, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
ns=${2:-"4 16 64"}
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/gofloor" ./tests/testdata/floor
mpi=0
if command -v mpicc.mpich >/dev/null && mpicc.mpich -O2 -o "$tmp/mpihello" scripts/mpihello/hello.c; then mpi=1; else
  echo "no mpicc.mpich (make deps installs libmpich-dev): no MPICH column" >&2; fi
ms() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
declare -A cmd=([srun]="srun --mpi=pmi2 -O -s -n" [hydra]="mpiexec.hydra -n")
declare -A tmpl=([srun]="srun -O -s -n %N %C" [hydra]="mpiexec.hydra -n %N %C")
for r in $(seq "$rounds"); do
  for l in srun hydra; do
    for n in $ns; do
      echo "$l $n floor $(ms ${cmd[$l]} "$n" true)" >>"$tmp/t"
      echo "$l $n go $(ms ${cmd[$l]} "$n" "$tmp/gofloor")" >>"$tmp/t"
      if [ "$mpi" = 1 ]; then echo "$l $n mpi $(ms ${cmd[$l]} "$n" "$tmp/mpihello")" >>"$tmp/t"; fi
      echo "$l $n direct $(ms ${cmd[$l]} "$n" ./bin/hello)" >>"$tmp/t"
      echo "$l $n console $(GASNET_SPAWNFN=C GASNET_CSPAWN_CMD="${tmpl[$l]}" ms ./bin/hello "$n")" >>"$tmp/t"
    done
  done
done
med() { awk -v k="$1" 'index($0, k " ") == 1 { print $NF }' "$tmp/t" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "nproc $(nproc); $rounds rounds; medians in ms (ratio to the launcher alone)"
echo "| launcher | N | launcher running true | a Go program | MPICH's hello | hello, direct | hello, through the console |"
echo "|---|---|---|---|---|---|---|"
for l in srun hydra; do
  for n in $ns; do
    f=$(med "$l $n floor"); g=$(med "$l $n go"); d=$(med "$l $n direct"); c=$(med "$l $n console")
    m="-"
    if [ "$mpi" = 1 ]; then m=$(med "$l $n mpi"); m=$(printf '%s (%.2f)' "$m" "$(echo "$m / $f" | bc -l)"); fi
    printf '| %s | %s | %s | %s (%.2f) | %s | %s (%.2f) | %s (%.2f) |\n' "$l" "$n" "$f" "$g" "$(echo "$g / $f" | bc -l)" "$m" "$d" "$(echo "$d / $f" | bc -l)" "$c" "$(echo "$c / $f" | bc -l)"
  done
done
