#!/usr/bin/env bash
# net-bench.sh [ITERS] [ROUNDS]: the network path between two processes
# (testam 2 with GASNET_SUPERNODE_MAXSIZE=1, so that every message goes by
# UDP on loopback) in each protection mode -- header-only MAC
# (GASNET_AUTH_PAYLOAD=0), payload MAC (the default) and encryption
# (GASNET_ENCRYPT=1), the first two also with requests prepared in the
# conduit's buffer (testam -np-gb: no copy of the payload before the MAC
# or the send) -- next to the raw-UDP floors of scripts/netbench/udpfloor.c
# (ping-pong; streams without and with sendmmsg/recvmmsg batching), all in
# one run (make net-bench). The modes and the floors take turns, ROUNDS
# times, and each cell is the median of the rounds. Figures, not a test:
# each row gives udpconduit's figure and its ratio to the floor (round
# trips: time, lower is better; floods: rate, higher is better).
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-20000}
rounds=${2:-3}
sizes=64,1024,8192,65000
make -s build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -o "$tmp/udpfloor" scripts/netbench/udpfloor.c
echo "nproc $(nproc); $iters iterations, $rounds rounds"

modes=(header header-np payload payload-np encrypt)
declare -A menv=([header]=GASNET_AUTH_PAYLOAD=0 [header-np]=GASNET_AUTH_PAYLOAD=0 [payload]=GASNET_AUTH_PAYLOAD=1 [payload-np]=GASNET_AUTH_PAYLOAD=1 [encrypt]=GASNET_ENCRYPT=1)
declare -A margs=([header-np]=-np-gb [payload-np]=-np-gb)
window() { if [ "$1" -ge 8192 ]; then echo "64 16"; else echo "1024 64"; fi; }
for r in $(seq "$rounds"); do
  for m in "${modes[@]}"; do
    # testam's lines: "NAME SIZE B ITERS iters VALUE µs/... [MB/s]".
    env GASNET_SPAWNFN=L GASNET_SUPERNODE_MAXSIZE=1 "${menv[$m]}" \
      ./bin/testam 2 -sizes "$sizes" -iters "$iters" ${margs[$m]:-} |
      awk -v m="$m" '{ print m, $1, $2, $6 }' >>"$tmp/am"
  done
  "$tmp/udpfloor" pp 8 "$((iters * 5))" | awk '{ print "floor pp", $2, $3 }' >>"$tmp/floor"
  for s in ${sizes//,/ }; do
    read -r w e <<<"$(window "$s")"
    for batch in 1 32; do
      "$tmp/udpfloor" stream "$s" "$((iters * 5))" "$w" "$e" "$batch" |
        awk -v b="$batch" '{ print "floor stream" b, $2, $4 }' >>"$tmp/floor"
    done
  done
done
# med KEY FILE: the median of the last field of the lines starting with KEY.
med() {
  awk -v k="$1" 'index($0, k " ") == 1 { print $NF }' "$2" | sort -g |
    awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b == 0) print "-"; else printf "%.2f", a / b }'; }
rtt_floor=$(med "floor pp 8" "$tmp/floor")
echo
echo "| test | bytes | header-only MAC | header-only, prepared | payload MAC (default) | payload MAC, prepared | encrypted | raw floor | floor batched |"
echo "|---|---|---|---|---|---|---|---|---|"
row="| short round trip, µs (ratio to floor) | 0 |"
for m in "${modes[@]}"; do
  v=$(med "$m short_rtt 0" "$tmp/am")
  row="$row $v ($(ratio "$v" "$rtt_floor")) |"
done
echo "$row $rtt_floor | - |"
for kind in medium long; do
  for s in ${sizes//,/ }; do
    f1=$(med "floor stream1 $s" "$tmp/floor")
    f32=$(med "floor stream32 $s" "$tmp/floor")
    row="| $kind flood, µs/msg (rate ratio to floor; to batched) | $s |"
    for m in "${modes[@]}"; do
      v=$(med "$m ${kind}_flood $s" "$tmp/am")
      row="$row $v ($(ratio "$f1" "$v"); $(ratio "$f32" "$v")) |"
    done
    echo "$row $f1 | $f32 |"
  done
done
