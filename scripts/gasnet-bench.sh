#!/usr/bin/env bash
# gasnet-bench.sh: GASNet-EX's udp-conduit and its own test programs (testam,
# testsmall, testlarge, testbarrier, testhello, testcollperf) next to
# udpconduit's, in alternating rounds in one run (make gasnet-bench;
# BENCHMARKS.md).
#
#   GASNET_TARBALL=/path/to/GASNet-2025.8.0.tar.gz make gasnet-bench [ROUNDS=5] [ITERS=10000] [ONLY=LIST] [PGO=0]
#
# The tarball is GASNet-EX's release as https://gasnet.lbl.gov/ serves it.
# Its udp-conduit (PSHM on, as it ships) is built once, about 5-8 minutes
# on 2 CPUs, into GASNET_CACHE (default ~/.cache/udpconduit/gasnet-VERSION)
# and reused by later runs. Ours are built with Go's profile-guided
# optimization (scripts/pgo.sh), as GASNet's test programs are compiled
# with its calls inlined; PGO=0 measures the default build (make build).
# Figures, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."
tarball=${GASNET_TARBALL:-}
if [ -z "$tarball" ] || [ ! -f "$tarball" ]; then
  echo "gasnet-bench: GASNET_TARBALL=\"$tarball\": accepted: the path of a GASNet-EX release tarball (GASNet-VERSION.tar.gz from https://gasnet.lbl.gov/)" >&2
  exit 2
fi
case "${PGO:-1}" in
  0 | 1) ;;
  *) echo "gasnet-bench: PGO=\"$PGO\": accepted: 1 (the default, a PGO build) or 0" >&2; exit 2 ;;
esac
name=$(basename "$tarball" .tar.gz)
case "$name" in
  GASNet-*) ;;
  *) echo "gasnet-bench: GASNET_TARBALL=\"$tarball\": accepted: a file named GASNet-VERSION.tar.gz" >&2; exit 2 ;;
esac
cache=${GASNET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/udpconduit/${name,,}}
# Not settings of either system: the programs would warn of them.
unset GASNET_TARBALL GASNET_CACHE
dir=$cache/build/udp-conduit
tests="testam testsmall testlarge testbarrier testhello testcollperf"
built() { for t in $tests; do [ -x "$dir/$t" ] || return 1; done; }
if ! built; then
  echo "gasnet-bench: building $name's udp-conduit into $cache (once; log in $cache/build.log)" >&2
  mkdir -p "$cache"
  (
    set -e
    [ -d "$cache/$name" ] || tar -xzf "$tarball" -C "$cache"
    mkdir -p "$cache/build" && cd "$cache/build"
    [ -f Makefile ] || "../$name/configure" --enable-udp --disable-mpi --disable-ibv --disable-ofi \
      --disable-ucx --disable-smp --enable-pshm --disable-par --disable-parsync
    make -j"$(nproc)"
    make -C udp-conduit $tests
  ) >"$cache/build.log" 2>&1 || { echo "gasnet-bench: building $name failed; see $cache/build.log" >&2; tail -20 "$cache/build.log" >&2; exit 1; }
fi
case "${PGO:-1}" in
  1) scripts/pgo.sh; bin=bin/pgo ;;
  0) make -s build; bin=bin ;;
esac
echo "gasnet-bench: ours from $bin" >&2
only=()
[ -n "${ONLY:-}" ] && only=(-only "$ONLY")
exec go run ./scripts/gasnetbench -gasnet "$dir" -bin "$bin" -rounds "${ROUNDS:-5}" -iters "${ITERS:-10000}" "${only[@]}"
