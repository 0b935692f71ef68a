#!/usr/bin/env bash
# shm-bench.sh [ITERS]: two ranks of one host exchanging messages through
# shared memory (testam 2, GASNET_SUPERNODE_MAXSIZE=0), next to the same
# job over UDP (GASNET_SUPERNODE_MAXSIZE=1), Open MPI's shared-memory
# transport (vader, scripts/shmbench/mpipp.c) and a C floor of two
# processes sharing a cache line and a 64 KiB buffer
# (scripts/shmbench/floor.c), all in one run (make shm-bench). Figures, not
# a test: each row gives the ratio of udpconduit's figure to each peer's
# (round trips: time, lower is better; streams: MB/s, higher is better).
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-20000}
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/floor" scripts/shmbench/floor.c
echo "nproc $(nproc); $iters iterations"

# testam's text lines: "NAME SIZE B ITERS iters VALUE µs/... [MB/s]".
testam() {
  env GASNET_SPAWNFN=L "$@" ./bin/testam 2 -sizes 8,65000 -iters "$iters" >"$tmp/out"
  awk '{ print $1 "_" $2, $6, ($8 == "" ? "-" : $8) }' "$tmp/out"
}
testam GASNET_SUPERNODE_MAXSIZE=0 >"$tmp/shm"
testam GASNET_SUPERNODE_MAXSIZE=1 >"$tmp/udp"
"$tmp/floor" "$((iters * 5))" >"$tmp/floor.out"
mpi=
if command -v mpicc.openmpi >/dev/null && command -v mpirun.openmpi >/dev/null &&
  mpicc.openmpi -O2 -o "$tmp/mpipp" scripts/shmbench/mpipp.c; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 \
    mpirun.openmpi -np 2 --mca btl vader,self "$tmp/mpipp" "$iters" >"$tmp/mpi.out" 2>/dev/null && mpi=1
fi
[ -n "$mpi" ] || echo "no Open MPI (make deps installs it): no vader column"
val() { awk -v k="$1" '$1 == k { print $2 }' "$2"; }
col() { awk -v k="$1" -v c="$2" '$1 == k { print $c }' "$3"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
mpi_rtt=$( [ -n "$mpi" ] && val mpi_rtt_us "$tmp/mpi.out" || true)
mpi_bw=$( [ -n "$mpi" ] && val mpi_stream_MBps "$tmp/mpi.out" || true)
floor_rtt=$(val floor_rtt_us "$tmp/floor.out")
floor_bw=$(val floor_copy_MBps "$tmp/floor.out")
printf '%-20s %10s %10s %8s %10s %8s %10s %8s\n' test shm udp shm/udp vader shm/vader floor shm/floor
for t in short_rtt_0 medium_rtt_8 long_rtt_8 long_rtt_65000; do
  s=$(col "$t" 2 "$tmp/shm"); u=$(col "$t" 2 "$tmp/udp")
  m=; f=
  [ "${t%_*}" = short_rtt ] || [ "$t" = medium_rtt_8 ] && m=$mpi_rtt && f=$floor_rtt
  printf '%-20s %10s %10s %8s %10s %8s %10s %8s\n' "$t (µs)" "$s" "$u" "$(ratio "$s" "$u")" "${m:--}" "$(ratio "$s" "$m")" "${f:--}" "$(ratio "$s" "$f")"
done
for t in medium_flood_8 medium_flood_65000 long_flood_65000; do
  s=$(col "$t" 3 "$tmp/shm"); u=$(col "$t" 3 "$tmp/udp")
  m=; f=
  [ "${t##*_}" = 65000 ] && m=$mpi_bw && f=$floor_bw
  printf '%-20s %10s %10s %8s %10s %8s %10s %8s\n' "$t (MB/s)" "$s" "$u" "$(ratio "$s" "$u")" "${m:--}" "$(ratio "$s" "$m")" "${f:--}" "$(ratio "$s" "$f")"
done

# Collectives: barrier, 8-byte all-gather, 8-byte broadcast and
# one-element all-reduce over N ranks sharing memory (testam N -coll,
# GASNET_SUPERNODE_MAXSIZE=0), next to Open MPI's MPI_Barrier,
# MPI_Allgather, MPI_Bcast and MPI_Allreduce with vader
# (scripts/mpicoll/coll.c), in µs per operation. With more ranks than CPUs
# ours yield their CPU while they wait, then sleep; Open MPI, told that the
# host is oversubscribed, yields.
coll=
if [ -n "$mpi" ] && mpicc.openmpi -O2 -o "$tmp/coll" scripts/mpicoll/coll.c; then coll=1; fi
printf '%-12s %4s %12s %12s %9s\n' collective N shm_us vader_us shm/vader
for n in ${SHM_BENCH_COLL_N:-2 8}; do
  it=2000
  [ "$n" -gt 8 ] && it=200
  env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=0 ./bin/testam "$n" -coll -iters "$it" >"$tmp/coll.out"
  : >"$tmp/mcoll.out"
  [ -n "$coll" ] && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    timeout 300 mpirun.openmpi -np "$n" --mca btl vader,self "$tmp/coll" "$it" >"$tmp/mcoll.out" 2>/dev/null || true
  for c in barrier allgather broadcast allreduce gather alltoall; do
    u=$(awk -v k="$c" '$1 == k { print $6 }' "$tmp/coll.out")
    m=$(awk -v k="mpi_$c" '$1 == k { print $6 }' "$tmp/mcoll.out")
    printf '%-12s %4s %12s %12s %9s\n' "$c" "$n" "${u:--}" "${m:--}" "$(ratio "$u" "$m")"
  done
done

# Memory: the peak of the host's shared memory (Shmem in /proc/meminfo,
# sampled every 50 ms) above what it was before, while N ranks that all
# share memory run hello, and while 8 run testcore's traffic. An inbox is
# touched only as far as traffic reaches; GASNET_PSHM_NETWORK_DEPTH bounds
# it (4 MiB per rank at the default).
shmem_kib() { awk '$1 == "Shmem:" { print $2 }' /proc/meminfo; }
peak() { # peak CMD...: prints the peak rise of Shmem in MiB while CMD runs
  local base top cur pid
  base=$(shmem_kib); top=$base
  "$@" >/dev/null 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    cur=$(shmem_kib); [ "$cur" -gt "$top" ] && top=$cur
    sleep 0.05
  done
  wait "$pid" || echo "failed: $*" >&2
  awk -v a="$base" -v b="$top" 'BEGIN { printf "%.1f", (b - a) / 1024 }'
}
for n in ${SHM_BENCH_N:-64 256}; do
  echo "hello $n, every rank sharing memory: peak shared memory $(peak env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=0 ./bin/hello "$n") MiB (inboxes of $((n * 4)) MiB at most)"
done
echo "testcore 8 -msgs 4000, sharing memory: peak shared memory $(peak env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=0 ./bin/testcore 8 -msgs 4000) MiB (inboxes of 32 MiB at most, and the segments)"
