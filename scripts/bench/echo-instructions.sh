#!/usr/bin/env bash
# Instructions per echo exchange on oxnet's stack, counted by callgrind
# (deterministic: the number does not move with the machine's load).
#
# Both hosts in ONE router (the client's stack and `oxnet loadgen`'s
# state machine, the server's stack and its TCPEchoServer), joined by two
# software 82599 ports wired to each other, in simulated time. Two runs,
# N and 2N exchanges; the difference divided by N is the cost of one,
# start-up removed. The model's own work (the simulated NIC and its DMA
# checks) is in the count: the output shows it apart, and what is left
# is both stacks, the graph, the drivers and the client (and the C
# library's memset/memcpy, which the model calls too: not split out).
#
#   scripts/bench/echo-instructions.sh [N]        (default 2000)
#   MODE=persistent scripts/bench/echo-instructions.sh
#
# Writes target/bench/echo-instructions.json. Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-2000}"
MODE="${MODE:-short}"
out="${OXNET_BENCH_OUT:-target/bench}"
command -v valgrind >/dev/null || { echo "echo-instructions.sh: valgrind missing (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
cargo build --release -q -p oxnet
OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT


run() { # run REQUESTS -> callgrind file
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$1" "$OXNET" loadgen -s 10.9.2.2:7 \
        --ip 10.9.2.1/24 --simtime --json --mode "$MODE" -c 1 --requests "$1" -t 100000 \
        --config conf/echo-pair.click >"$TMP/out.$1" 2>"$TMP/err.$1"
    python3 - "$TMP/out.$1" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["requests"] == int(sys.argv[2]) and j["errors"]["total"] == 0, j
PY
}
run "$N"
run $((2 * N))

python3 - "$TMP/cg.$N" "$TMP/cg.$((2 * N))" "$N" "$MODE" "$out" <<'PY'
import json, sys
a, b, n, mode, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]

sys.path.insert(0, "scripts/bench")
from callgrind_split import split  # noqa: E402

(ta, ma), (tb, mb) = split(a), split(b)
per, model = (tb - ta) / n, (mb - ma) / n
row = {"mode": mode, "exchanges": n, "instructions_per_exchange": round(per),
       "model_instructions_per_exchange": round(model),
       "rest_per_exchange": round(per - model)}
print(f"{mode}: {per:,.0f} instructions per exchange, both hosts; the 82599 model's own "
      f"functions {model:,.0f}; the rest (stacks, graph, drivers, client) {per - model:,.0f}")
json.dump(row, open(f"{out}/echo-instructions.json", "w"), indent=1)
PY
