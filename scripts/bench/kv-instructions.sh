#!/usr/bin/env bash
# Instructions per key-value request on oxnet's stack, counted by
# callgrind (deterministic: the number does not move with the machine's
# load).
#
# Both hosts in ONE router (conf/memcached-pair.click): the client's
# stack and `oxnet loadgen --proto memcached-text`'s state machine, the
# server's stack with TCPEpollServer and MemcachedServer, joined by two
# software 82599 ports wired to each other, in simulated time. Persistent
# connections, KEYS keys of VALUE_SIZE-byte values, 90 % GET after a fill
# of every key. Two runs, N and 2N requests (the fill is in both, so it
# cancels); the difference divided by N is the cost of one request,
# start-up removed. The model's own work (the simulated NIC and its DMA
# checks) is in the count: the output shows it apart, and what is left is
# both stacks, the graph, the drivers, the key-value server and the
# client (and the C library's memset/memcpy, which the model calls too:
# not split out).
#
#   scripts/bench/kv-instructions.sh [N]          (default 4000; N >= KEYS)
#   CONNS=4 KEYS=1000 VALUE_SIZE=100 scripts/bench/kv-instructions.sh
#
# Writes target/bench/kv-instructions.json. Needs valgrind. Profile the
# same command with `valgrind --tool=callgrind` and callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
N="${1:-4000}"
CONNS="${CONNS:-1}"
KEYS="${KEYS:-1000}"
VALUE_SIZE="${VALUE_SIZE:-100}"
out="${OXNET_BENCH_OUT:-target/bench}"
command -v valgrind >/dev/null || { echo "kv-instructions.sh: valgrind missing (scripts/install-deps.sh)" >&2; exit 1; }
if [ "$N" -lt "$KEYS" ]; then
    echo "kv-instructions.sh: N ($N) must be at least KEYS ($KEYS): the fill is part of both runs" >&2
    exit 1
fi
mkdir -p "$out"
cargo build --release -q -p oxnet
OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

run() { # run REQUESTS -> callgrind file
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$1" "$OXNET" loadgen -s 10.9.2.2:11211 \
        --proto memcached-text --keys "$KEYS" --value-size "$VALUE_SIZE" --get-ratio 0.9 \
        --ip 10.9.2.1/24 --simtime --json --mode persistent -c "$CONNS" --requests "$1" -t 100000 \
        --config conf/memcached-pair.click >"$TMP/out.$1" 2>"$TMP/err.$1"
    python3 - "$TMP/out.$1" "$1" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["requests"] == int(sys.argv[2]) and j["errors"]["total"] == 0 and j["misses"] == 0, j
PY
}
run "$N"
run $((2 * N))

python3 - "$TMP/cg.$N" "$TMP/cg.$((2 * N))" "$N" "$CONNS" "$KEYS" "$VALUE_SIZE" "$out" <<'PY'
import json, sys
a, b, n, conns, keys, value_size, out = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7]), sys.argv[7]

sys.path.insert(0, "scripts/bench")
from callgrind_split import split  # noqa: E402

(ta, ma), (tb, mb) = split(a), split(b)
per, model = (tb - ta) / n, (mb - ma) / n
row = {"proto": "memcached-text", "connections": conns, "keys": keys, "value_size": value_size,
       "get_ratio": 0.9, "requests": n, "instructions_per_request": round(per),
       "model_instructions_per_request": round(model), "rest_per_request": round(per - model)}
print(f"memcached-text, {conns} connection(s): {per:,.0f} instructions per request, both hosts; "
      f"the 82599 model's own functions {model:,.0f}; the rest (stacks, graph, drivers, "
      f"key-value server, client) {per - model:,.0f}")
json.dump(row, open(f"{out}/kv-instructions.json", "w"), indent=1)
PY
