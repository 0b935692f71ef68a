#!/bin/sh
# GASNET_RCV_THREAD's cost: testam N -coll with and without the background
# progress thread, alternating, RUNS times each; prints each operation's
# median latency both ways and their ratio (thread / no thread).
# Usage: scripts/rcv-thread.sh [N] [RUNS]   (after make build)
set -eu
n=${1:-2}
runs=${2:-5}
bin=$(dirname "$0")/../bin
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
	for t in 0 1; do
		GASNET_SPAWNFN=L GASNET_RCV_THREAD=$t "$bin/testam" "$n" -coll -iters 3000 -json >>"$out/$t"
	done
	i=$((i + 1))
done
python3 - "$out/0" "$out/1" <<'PY'
import json, statistics, sys
def load(p):
    d = {}
    for line in open(p):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            d.setdefault(r["test"], []).append(r["us"])
    return d
a, b = load(sys.argv[1]), load(sys.argv[2])
print("%-12s %12s %12s %8s" % ("operation", "no thread µs", "thread µs", "ratio"))
for k in a:
    x, y = statistics.median(a[k]), statistics.median(b.get(k, [float("nan")]))
    print("%-12s %12.2f %12.2f %8.2f" % (k, x, y, y / x))
PY
