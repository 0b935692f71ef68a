#!/usr/bin/env bash
# loss-tail.sh PCT RUNS [N] [MSGS]: the tail of a job's time under packet
# loss. In a network namespace of this script's own (udpc-tail-$$, removed
# on exit) whose UDP datagrams nftables drops at random (PCT%, inbound,
# loopback included, so each direction of an exchange loses PCT%), it runs
# testcore on N workers (MSGS requests per rank from 2 goroutines) RUNS
# times and prints each run's time and exit code, then the median, the
# slowest and the slowest over the median. BIN (default bin/, as make
# build leaves it) chooses the build to measure. Needs root and nftables
# (make deps). Figures, not a test.
set -euo pipefail
PCT=${1:?loss percent}
RUNS=${2:?runs}
N=${3:-4}
MSGS=${4:-300}
cd "$(dirname "$0")/.."
BIN=${BIN:-bin}
[ "$BIN" = bin ] && make -s build
NS=udpc-tail-$$
ip netns add "$NS"
trap 'ip netns del "$NS" 2>/dev/null || true; rm -f /tmp/loss-tail.$$' EXIT
ip -n "$NS" link set lo up
echo "table inet udploss { chain in { type filter hook input priority -10; policy accept; meta l4proto udp numgen random mod 100 < $PCT counter drop; }; }" \
  | ip netns exec "$NS" nft -f -
times=()
for i in $(seq "$RUNS"); do
  start=$(date +%s%N)
  code=0
  ip netns exec "$NS" env GASNET_SPAWNFN=L timeout 300 "$BIN/testcore" "$N" -msgs "$MSGS" -threads 2 >/tmp/loss-tail.$$ 2>&1 || code=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  times+=("$ms")
  printf 'run %3d: %7d ms  exit %d\n' "$i" "$ms" "$code"
  [ "$code" -eq 0 ] || tail -2 /tmp/loss-tail.$$
done
printf '%s\n' "${times[@]}" | sort -n | awk -v pct="$PCT" '{t[NR]=$1} END {
  m = (NR % 2) ? t[(NR+1)/2] : (t[NR/2] + t[NR/2+1]) / 2
  printf "%d%% loss, %d runs: median %d ms, slowest %d ms, slowest/median %.2f\n", pct, NR, m, t[NR], t[NR]/m }'
