#!/usr/bin/env bash
# loss-bench.sh [N] [MSGS]: udpconduit under packet loss, in a network
# namespace of this script's own (udpc-loss-$$, removed on exit) whose UDP
# datagrams (loopback included) nftables drops at random: at 0%, 1%, 10%
# and 30% loss, testcore on N workers (MSGS requests per rank, from 2
# goroutines per rank) with its time, requests per second, ratio to the 0%
# run and retransmissions (GASNET_STATS), then testam's medium bandwidth
# (65000-byte requests between 2 ranks) with its retransmissions. Needs
# root, iproute2 and nftables (make deps). Measured figures, not a test
# (the fault suite in tests/faults_test.go is the test).
set -euo pipefail
N=${1:-4}
MSGS=${2:-3000}
cd "$(dirname "$0")/.."
make -s build
NS=udpc-loss-$$
ip netns add "$NS"
trap 'ip netns del "$NS" 2>/dev/null || true; rm -f /tmp/loss-bench.$$' EXIT
ip -n "$NS" link set lo up
# sum KEY: the sum of a GASNET_STATS counter over the ranks' lines.
sum() { grep ' stats: ' /tmp/loss-bench.$$ | grep -o " $1 [0-9]*" | awk '{s += $2} END {print s + 0}'; }
base=""
printf '%5s %-26s %9s %6s %8s %8s %-22s %8s\n' loss testcore ms/run req/s ratio resent "testam medium" resent
for pct in 0 1 10 30; do
  ip netns exec "$NS" nft delete table inet udploss 2>/dev/null || true
  if [ "$pct" -gt 0 ]; then
    # input hook: every datagram delivered inside the namespace, loopback
    # included, so both directions of each exchange lose pct%.
    echo "table inet udploss { chain in { type filter hook input priority -10; policy accept; meta l4proto udp numgen random mod 100 < $pct counter drop; }; }" \
      | ip netns exec "$NS" nft -f -
  fi
  start=$(date +%s%N)
  code=0
  ip netns exec "$NS" env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=1 GASNET_STATS=1 ./bin/testcore "$N" -msgs "$MSGS" -threads 2 >/tmp/loss-bench.$$ 2>&1 || code=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  [ -z "$base" ] && base=$ms
  resent=$(sum retransmits)
  if [ "$code" -ne 0 ]; then echo "testcore at $pct% exited $code:"; tail -3 /tmp/loss-bench.$$; fi
  ip netns exec "$NS" env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=1 GASNET_STATS=1 ./bin/testam 2 -iters 300 -sizes 65000 >/tmp/loss-bench.$$ 2>&1 || echo "testam at $pct% failed"
  bw=$(awk '/^medium_flood/ {print $(NF-1), $NF}' /tmp/loss-bench.$$)
  printf '%4d%% %-26s %9d %6d %8s %8d %-22s %8d\n' "$pct" "exit $code" "$ms" \
    "$(( N * MSGS * 1000 / (ms > 0 ? ms : 1) ))" "$(awk -v a="$ms" -v b="$base" 'BEGIN{printf "%.2f", a/b}')" \
    "$resent" "${bw:-?}" "$(sum retransmits)"
done
