#!/usr/bin/env bash
# Builds oxnet in release mode and runs `oxnet bench`: instructions per
# packet of the forwarding path (driver + application; the simulated NIC is
# kept out of the count) at batch sizes 1..256 under callgrind, and mempool
# alloc + free per packet. Prints a table, writes fwd.json and fwd.svg.
#
#   scripts/bench.sh                    # everything, results in target/bench/
#   scripts/bench.sh --batches 32       # extra arguments go to `oxnet bench`
#
# Needs valgrind; installed with apt-get if missing (needs root or sudo).
# Environment: CARGO_TARGET_DIR (default target), OXNET_BENCH_OUT (default
# target/bench).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v valgrind >/dev/null 2>&1 || ! command -v callgrind_annotate >/dev/null 2>&1; then
    echo "bench.sh: valgrind not found; installing it with apt-get" >&2
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    $sudo apt-get update && $sudo apt-get install -y valgrind
fi

cargo build --release -p oxnet
target="${CARGO_TARGET_DIR:-target}"
exec "$target/release/oxnet" bench --out "${OXNET_BENCH_OUT:-target/bench}" "$@"
