#!/usr/bin/env bash
# Echo, stack against stack with no kernel in the path (issue 11): the
# client and the server both on oxnet's TCP/IP stack, joined by memif
# (shared memory; the kernel only carries the memif control socket).
#
#   server: conf/echo.click on memif:SOCK,role=server (`oxnet run`), one
#           process on core SERVER_CORE.
#   client: oxnet loadgen --device memif:SOCK,role=client (the router and
#           the load generator's state machine on one thread), on core
#           CLIENT_CORE.
#
# Short connections (connect, 64 bytes, echo, RST; closed loop with
# CONNECTIONS at once) and, with PART=both, persistent ones (64-byte
# request/response, closed loop, over 1, 8 and 64 connections): the same
# tests as scripts/bench/echo.sh, so the two read side by side.
#
# Which side bounds a number: the side that is busy all the time. The
# server's `Router::run` sleeps (at most 50 us at a time) after every
# round with nothing to do, so its CPU share of the run (/proc/PID/stat)
# is its busy share. The client spins 50 us before it sleeps, so its CPU
# time (getrusage) overstates its work; its busy share is the loadgen's
# `busy_seconds` (the run less the time its waits found nothing to do,
# loadgen/stack.rs) over the run's seconds. The table marks each test
# "client" or "server" by the busier side (or "both" when both are above
# 90%); the other side's share is its headroom.
#
#   scripts/bench/echo-memif.sh                           # 3 runs x 5 s, short
#   RUNS=5 SECONDS_PER_RUN=10 PART=both scripts/bench/echo-memif.sh
#
# No root needed (memif over a Unix socket in a temporary directory).
# Every test starts a fresh server. Writes target/bench/echo-memif.json
# (every sample and the medians) and target/bench/echo-memif.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
SECS="${SECONDS_PER_RUN:-5}"
CONNS="${CONNECTIONS:-16}"
PART="${PART:-short}"             # short | both
CLIENT_CORE="${CLIENT_CORE:-0}"
SERVER_CORE="${SERVER_CORE:-1}"
PERSISTENT_CONNS=(1 8 64)
out="${OXNET_BENCH_OUT:-target/bench}"

case "$PART" in short | both) ;; *) echo "echo-memif.sh: PART=short or PART=both" >&2; exit 1 ;; esac
mkdir -p "$out"
if [ -z "${OXNET:-}" ]; then
    cargo build --release -q -p oxnet >&2
    OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
fi

TMP="$(mktemp -d /tmp/oxnet-echo-memif.XXXXXX)"
SOCK="$TMP/memif.sock"
SERVER_PID=""
cleanup() {
    if [ -n "$SERVER_PID" ]; then kill -INT "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

SERVER_IP=10.83.0.2
CLIENT_IP=10.83.0.1/24
HZ=$(getconf CLK_TCK)
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

start_server() {
    rm -f "$SOCK"
    taskset -c "$SERVER_CORE" "$OXNET" run conf/echo.click "DEV=memif:$SOCK,role=server" IP="$SERVER_IP" \
        -h echo.connections -h echo.bytes >"$TMP/server.out" 2>"$TMP/server.err" &
    SERVER_PID=$!
    local i
    for ((i = 0; i < 200; i++)); do
        [ -S "$SOCK" ] && return 0
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "echo-memif.sh: the server ended:" >&2; cat "$TMP/server.err" >&2; exit 1; }
        sleep 0.05
    done
    echo "echo-memif.sh: no memif socket at $SOCK after 10 s" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

stop_server() {
    kill -INT "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" || true
    SERVER_PID=""
}

measure() { # measure RUN PART CONNECTIONS
    local before after json
    start_server
    before=$(proc_cpu "$SERVER_PID")
    json=$(taskset -c "$CLIENT_CORE" "$OXNET" loadgen --device "memif:$SOCK,role=client" --ip "$CLIENT_IP" --warm-up \
        -s "$SERVER_IP:7" --mode "$2" -c "$3" -t "$SECS" --size 64 --json) || true
    after=$(proc_cpu "$SERVER_PID")
    stop_server
    [ -n "$json" ] || { echo "echo-memif.sh: $2 c=$3: the client printed nothing" >&2; cat "$TMP/server.err" >&2; exit 1; }
    printf '{"run":%s,"part":"%s","connections":%s,"server_cpu_s":%s,"client":%s}\n' "$1" "$2" "$3" \
        "$(awk -v d=$((after - before)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" "$json" >>"$TMP/samples.jsonl"
    echo "echo-memif.sh: run $1 $2 c=$3: $(printf '%s' "$json" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f msg/s, %d errors, client busy %.0f%%" % (j["throughput"], j["errors"]["total"], 100 * j["busy_seconds"] / max(j["seconds"], 1e-9)))')" >&2
}

: >"$TMP/samples.jsonl"
for ((r = 1; r <= RUNS; r++)); do
    measure "$r" short "$CONNS"
    if [ "$PART" = both ]; then
        for c in "${PERSISTENT_CONNS[@]}"; do
            measure "$r" persistent "$c"
        done
    fi
done

python3 - "$TMP/samples.jsonl" "$out" "$SECS" "$RUNS" <<'PY'
import json, statistics, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, secs, runs = sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
rows = []
for part, conns in sorted({(s["part"], s["connections"]) for s in samples}, key=lambda k: (k[0] != "short", k[1])):
    ss = [s for s in samples if s["part"] == part and s["connections"] == conns]
    med = lambda f: statistics.median(f(s) for s in ss)
    reqs = lambda s: max(s["client"]["requests"], 1)
    secs_of = lambda s: max(s["client"]["seconds"], 1e-9)
    row = {
        "part": part, "connections": conns, "runs": len(ss),
        "msgs_per_s": med(lambda s: s["client"]["throughput"]),
        "server_cpu_us_per_msg": med(lambda s: s["server_cpu_s"] / reqs(s) * 1e6),
        "client_cpu_us_per_msg": med(lambda s: s["client"]["cpu_seconds"] / reqs(s) * 1e6),
        "server_core_share": med(lambda s: s["server_cpu_s"] / secs_of(s)),
        "client_core_share": med(lambda s: s["client"]["busy_seconds"] / secs_of(s)),
        "client_cpu_share": med(lambda s: s["client"]["cpu_seconds"] / secs_of(s)),
        "p50_us": med(lambda s: s["client"]["latency_us"]["p50"]),
        "p99_us": med(lambda s: s["client"]["latency_us"]["p99"]),
        "errors": sum(s["client"]["errors"]["total"] for s in ss),
    }
    c, v = row["client_core_share"], row["server_core_share"]
    row["bound"] = "both" if c > 0.9 and v > 0.9 else ("client" if c >= v else "server")
    rows.append(row)
hdr = f'{"part":<11}{"conns":>6}{"msgs/s":>10}{"server us/msg":>15}{"client us/msg":>15}{"server busy":>13}{"client busy":>13}{"p50 us":>9}{"p99 us":>9}{"errors":>8}  bound'
print(hdr)
for r in rows:
    print(f'{r["part"]:<11}{r["connections"]:>6}{r["msgs_per_s"]:>10.0f}{r["server_cpu_us_per_msg"]:>15.2f}{r["client_cpu_us_per_msg"]:>15.2f}'
          f'{r["server_core_share"]*100:>12.0f}%{r["client_core_share"]*100:>12.0f}%{r["p50_us"]:>9.1f}{r["p99_us"]:>9.1f}{r["errors"]:>8}  {r["bound"]}')
json.dump({"benchmark": "echo-memif", "seconds_per_run": secs, "runs": runs, "size": 64,
           "server": "conf/echo.click on memif (role=server), oxnet run",
           "client": "oxnet loadgen --device memif (role=client), on oxnet's stack",
           "medians": rows, "samples": samples}, open(f"{out}/echo-memif.json", "w"), indent=1)

# The figure: messages per second (bars), labelled with which side bounds
# the test and both processes' core shares.
top = max(r["msgs_per_s"] for r in rows) * 1.2 or 1
w, h, x0, y0 = 120 + 130 * len(rows), 340, 70, 280
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
       '<text x="10" y="16">Echo over memif, oxnet to oxnet, 64 bytes: messages/s; labels: bound by, server/client core share</text>',
       f'<line x1="{x0}" y1="{y0}" x2="{w - 20}" y2="{y0}" stroke="black"/>',
       f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="40" stroke="black"/>']
for t in range(5):
    v = top * t / 4
    svg.append(f'<text x="5" y="{y0 - 240 * t / 4 + 4:.1f}">{v / 1000:.0f}k</text>')
for g, r in enumerate(rows):
    bh = 240 * r["msgs_per_s"] / top
    x = x0 + 30 + g * 130
    svg.append(f'<rect x="{x}" y="{y0 - bh:.1f}" width="60" height="{bh:.1f}" fill="#2b5797"/>')
    svg.append(f'<text x="{x}" y="{y0 - bh - 18:.1f}" font-size="10">{r["bound"]}-bound</text>')
    svg.append(f'<text x="{x}" y="{y0 - bh - 5:.1f}" font-size="10">{r["server_core_share"]*100:.0f}% / {r["client_core_share"]*100:.0f}%</text>')
    svg.append(f'<text x="{x}" y="{y0 + 16}">{r["part"]} c={r["connections"]}</text>')
svg.append('</svg>')
open(f"{out}/echo-memif.svg", "w").write("\n".join(svg) + "\n")
print(f"echo-memif.sh: wrote {out}/echo-memif.json and {out}/echo-memif.svg", file=sys.stderr)
PY
