#!/usr/bin/env bash
# ClickNF's echo benchmark (Figure 9a, and 9b with PART=both): oxnet's
# echo server on its own TCP/IP stack against the best plain Linux echo
# servers we can write (epoll, and io_uring), with the same client,
# `oxnet loadgen`.
#
#   oxnet : conf/echo.click run by `oxnet run` in namespace C, on
#           OX_DEV=tap (default; the `tap:` driver: one read(2) or write(2)
#           per frame; the client in C talks to it through the TAP's kernel
#           side), OX_DEV=af_xdp or OX_DEV=af_packet (one end of a veth
#           pair in C, the client on the other end: rings, one kick per
#           transmit batch; AF_PACKET's receive blocks are retired after at
#           most 1 ms, so its latency at low load is about that).
#   linux : `oxnet loadgen --serve-echo 7 --threads 1` (epoll,
#           SO_REUSEPORT, non-blocking sockets) in namespace S, reached
#           from the client in C over a veth pair.
#   linux_uring : `oxnet loadgen --serve-echo 7 --threads 1 --io-uring`
#           (a ring per thread, multishot accept, recvs from a
#           provided-buffer ring, one io_uring_enter per loop), the same
#           namespace and veth pair.
#
# Server on core SERVER_CORE, client on CLIENT_CORE (every server on one
# core). Short connections (Figure 9a): connect, send 64 bytes, wait for
# the echo, reset (SO_LINGER 0), closed loop with CONNECTIONS at once.
# Persistent (Figure 9b, PART=both): 64-byte request/response, closed
# loop, over 1, 8 and 64 connections.
#
# Over veth and TAP the kernel does part of the work in softirq on the
# client's core, so besides throughput this counts busy CPU seconds per
# message on BOTH cores from /proc/stat (user+nice+system+irq+softirq+
# steal), and also the server process's own CPU (/proc/PID/stat) and the
# client's (its getrusage). Other processes on the machine add to the
# /proc/stat count: run it on a quiet machine.
#
#   sudo scripts/bench/echo.sh                       # 3 runs x 5 s, short
#   sudo RUNS=5 SECONDS_PER_RUN=10 PART=both scripts/bench/echo.sh
#
# Runs alternate between the servers (oxnet, linux, linux_uring, oxnet,
# ...); the table shows medians and the ratios of oxnet to each Linux
# server. Writes target/bench/echo.json (every sample and the
# medians) and target/bench/echo.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
SECS="${SECONDS_PER_RUN:-5}"
CONNS="${CONNECTIONS:-16}"
PART="${PART:-short}"             # short | both
OX_DEV="${OX_DEV:-tap}"           # tap | af_xdp | af_packet
CLIENT_CORE="${CLIENT_CORE:-0}"
SERVER_CORE="${SERVER_CORE:-1}"
PERSISTENT_CONNS=(1 8 64)
out="${OXNET_BENCH_OUT:-target/bench}"

[ "$(id -u)" -eq 0 ] || { echo "echo.sh: needs root (TAP, namespaces)" >&2; exit 1; }
case "$PART" in short | both) ;; *) echo "echo.sh: PART=short or PART=both" >&2; exit 1 ;; esac
case "$OX_DEV" in tap | af_xdp | af_packet) ;; *) echo "echo.sh: OX_DEV=tap, af_xdp or af_packet" >&2; exit 1 ;; esac
mkdir -p "$out"
cargo build --release -q -p oxnet >&2
OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
OX_RUN_FLAGS="${OX_RUN_FLAGS:-}"    # e.g. --busy-poll

# NSC, NSS, TMP, SERVER_PID and their cleanup; the veth pair oxbc0/oxbs0.
. scripts/bench/topology.sh
topology b 10.82.0
if [ "$OX_DEV" = tap ]; then
    OX_SPEC="tap:oxbt0,ip=10.81.0.1/24"
else
    # oxnet takes oxbx0 (no address); the client's side is oxbk0.
    ip -n "$NSC" link add oxbk0 type veth peer name oxbx0
    ip -n "$NSC" addr add 10.81.0.1/24 dev oxbk0
    ip -n "$NSC" link set oxbk0 up
    ip -n "$NSC" link set oxbx0 up
    if [ "$OX_DEV" = af_xdp ]; then
        # An XDP socket gets the frame as the sender left it: with checksum
        # offload on, a TCP checksum that nobody computed (CHECKSUM_PARTIAL;
        # AF_PACKET says so in tp_status, AF_XDP cannot). The client's
        # kernel computes it instead, on the client's core.
        ip netns exec "$NSC" ethtool -K oxbk0 tx off tso off gso off >/dev/null
    fi
    OX_SPEC="$OX_DEV:oxbx0"
fi

OX_TARGET=10.81.0.2:7
LINUX_TARGET=10.82.0.2:7
# cores_busy, cores_irq, proc_cpu, proc_sys, HZ (shared with memcached.sh).
. scripts/bench/cores.sh

wait_ready() { # wait_ready TARGET
    local i
    for ((i = 0; i < 100; i++)); do
        if ip netns exec "$NSC" "$OXNET" loadgen -s "$1" --requests 1 --timeout 1 --mode short >/dev/null 2>&1; then
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "echo.sh: the server ended:" >&2; cat "$TMP/server.err" >&2; exit 1; }
        sleep 0.2
    done
    echo "echo.sh: no answer from $1 after 20 s" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

start_server() { # start_server oxnet|linux|linux_uring
    if [ "$1" = oxnet ]; then
        ip netns exec "$NSC" taskset -c "$SERVER_CORE" "$OXNET" run conf/echo.click \
            "DEV=$OX_SPEC" IP=10.81.0.2 $OX_RUN_FLAGS \
            -h echo.connections -h echo.errors >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        wait_ready "$OX_TARGET"
    else
        local uring=()
        [ "$1" = linux_uring ] && uring=(--io-uring)
        ip netns exec "$NSS" taskset -c "$SERVER_CORE" "$OXNET" loadgen --serve-echo 7 --threads 1 "${uring[@]}" \
            >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        wait_ready "$LINUX_TARGET"
    fi
}

stop_server() {
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" || true
    SERVER_PID=""
}

measure() { # measure SERVER RUN PART CONNECTIONS TARGET MODE
    local before_cores before_server after_cores after_server before_irq after_irq before_sys after_sys json
    before_cores=$(cores_busy)
    before_irq=$(cores_irq)
    before_server=$(proc_cpu "$SERVER_PID")
    before_sys=$(proc_sys "$SERVER_PID")
    json=$(ip netns exec "$NSC" taskset -c "$CLIENT_CORE" "$OXNET" loadgen -s "$5" --mode "$6" \
        -c "$4" -t "$SECS" --size 64 --json) || true
    after_cores=$(cores_busy)
    after_irq=$(cores_irq)
    after_server=$(proc_cpu "$SERVER_PID")
    after_sys=$(proc_sys "$SERVER_PID")
    [ -n "$json" ] || { echo "echo.sh: $1 $3 c=$4: the client printed nothing" >&2; exit 1; }
    printf '{"server":"%s","run":%s,"part":"%s","connections":%s,"cores_cpu_s":%s,"irq_cpu_s":%s,"server_cpu_s":%s,"server_sys_cpu_s":%s,"client":%s}\n' \
        "$1" "$2" "$3" "$4" \
        "$(awk -v d=$((after_cores - before_cores)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" \
        "$(awk -v d=$((after_irq - before_irq)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" \
        "$(awk -v d=$((after_server - before_server)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" \
        "$(awk -v d=$((after_sys - before_sys)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" \
        "$json" >>"$TMP/samples.jsonl"
    echo "echo.sh: run $2 $1 $3 c=$4: $(printf '%s' "$json" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f msg/s, %d errors" % (j["throughput"], j["errors"]["total"]))')" >&2
}

: >"$TMP/samples.jsonl"
for ((r = 1; r <= RUNS; r++)); do
    for server in oxnet linux linux_uring; do
        target=$OX_TARGET
        [ "$server" != oxnet ] && target=$LINUX_TARGET
        start_server "$server"
        measure "$server" "$r" short "$CONNS" "$target" short
        if [ "$PART" = both ]; then
            for c in "${PERSISTENT_CONNS[@]}"; do
                measure "$server" "$r" persistent "$c" "$target" persistent
            done
        fi
        stop_server
    done
done

python3 - "$TMP/samples.jsonl" "$out" "$SECS" "$RUNS" "$OX_DEV" "$OX_RUN_FLAGS" <<'PY'
import json, statistics, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, secs, runs = sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
SERVERS = ["oxnet", "linux", "linux_uring"]
rows = []
for part, conns in sorted({(s["part"], s["connections"]) for s in samples}, key=lambda k: (k[0] != "short", k[1])):
    for server in SERVERS:
        ss = [s for s in samples if s["server"] == server and s["part"] == part and s["connections"] == conns]
        if not ss:
            continue
        med = lambda f: statistics.median(f(s) for s in ss)
        reqs = lambda s: max(s["client"]["requests"], 1)
        rows.append({
            "server": server, "part": part, "connections": conns, "runs": len(ss),
            "msgs_per_s": med(lambda s: s["client"]["throughput"]),
            "cpu_us_per_msg_both_cores": med(lambda s: s["cores_cpu_s"] / reqs(s) * 1e6),
            "own_cpu_us_per_msg": med(lambda s: (s["server_cpu_s"] + s["client"]["cpu_seconds"] + s["irq_cpu_s"]) / reqs(s) * 1e6),
            "server_cpu_us_per_msg": med(lambda s: s["server_cpu_s"] / reqs(s) * 1e6),
            "server_sys_us_per_msg": med(lambda s: s.get("server_sys_cpu_s", 0) / reqs(s) * 1e6),
            "client_cpu_us_per_msg": med(lambda s: s["client"]["cpu_seconds"] / reqs(s) * 1e6),
            "server_core_share": med(lambda s: s["server_cpu_s"] / s["client"]["seconds"]),
            "p50_us": med(lambda s: s["client"]["latency_us"]["p50"]),
            "p99_us": med(lambda s: s["client"]["latency_us"]["p99"]),
            "errors": sum(s["client"]["errors"]["total"] for s in ss),
        })
hdr = f'{"part":<11}{"conns":>6} {"server":<12}{"msgs/s":>10}{"us CPU/msg (2 cores)":>22}{"us (srv+cli+irq)":>18}{"server us/msg":>15}{"of it sys":>11}{"client us/msg":>15}{"server core":>13}{"p50 us":>9}{"p99 us":>9}{"errors":>8}'
print(hdr)
for r in rows:
    print(f'{r["part"]:<11}{r["connections"]:>6} {r["server"]:<12}{r["msgs_per_s"]:>10.0f}{r["cpu_us_per_msg_both_cores"]:>22.2f}'
          f'{r["own_cpu_us_per_msg"]:>18.2f}{r["server_cpu_us_per_msg"]:>15.2f}{r["server_sys_us_per_msg"]:>11.2f}{r["client_cpu_us_per_msg"]:>15.2f}{r["server_core_share"]*100:>12.0f}%'
          f'{r["p50_us"]:>9.1f}{r["p99_us"]:>9.1f}{r["errors"]:>8}')
ratio = lambda a, b: f"{a / b:.2f}x" if b > 0 else "n/a"
for part, conns in sorted({(r["part"], r["connections"]) for r in rows}):
    o = next((r for r in rows if (r["server"], r["part"], r["connections"]) == ("oxnet", part, conns)), None)
    for linux, name in [("linux", "Linux epoll"), ("linux_uring", "Linux io_uring")]:
        l = next((r for r in rows if (r["server"], r["part"], r["connections"]) == (linux, part, conns)), None)
        if o and l and o["msgs_per_s"] > 0:
            print(f'{part} c={conns}: oxnet/{name} throughput {ratio(o["msgs_per_s"], l["msgs_per_s"])}, '
                  f'CPU per message: both cores {ratio(l["cpu_us_per_msg_both_cores"], o["cpu_us_per_msg_both_cores"])}, '
                  f'server+client+irq {ratio(l["own_cpu_us_per_msg"], o["own_cpu_us_per_msg"])}, '
                  f'server process {ratio(l["server_cpu_us_per_msg"], o["server_cpu_us_per_msg"])} ({name}/oxnet: above 1, oxnet cheaper)')
json.dump({"benchmark": "echo", "seconds_per_run": secs, "runs": runs, "size": 64,
           "oxnet": f"conf/echo.click on {sys.argv[5]}, oxnet run {sys.argv[6]}".strip(), "linux": "oxnet loadgen --serve-echo (epoll, SO_REUSEPORT), over veth",
           "linux_uring": "oxnet loadgen --serve-echo --io-uring (io_uring: multishot accept, provided-buffer ring, SO_REUSEPORT), over veth",
           "medians": rows, "samples": samples}, open(f"{out}/echo.json", "w"), indent=1)

# The figure: messages per second (bars) and CPU us per message on both
# cores (labels), one group per test.
groups = sorted({(r["part"], r["connections"]) for r in rows}, key=lambda k: (k[0] != "short", k[1]))
top = max(r["msgs_per_s"] for r in rows) * 1.15 or 1
w, h, x0, y0 = 120 + 180 * len(groups), 340, 70, 280
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
       '<text x="10" y="16">Echo, 64 bytes: messages/s (bars) and CPU us per message on both cores (labels)</text>',
       f'<line x1="{x0}" y1="{y0}" x2="{w - 20}" y2="{y0}" stroke="black"/>',
       f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="40" stroke="black"/>']
for t in range(5):
    v = top * t / 4
    svg.append(f'<text x="5" y="{y0 - 240 * t / 4 + 4:.1f}">{v / 1000:.0f}k</text>')
colour = {"oxnet": "#2b5797", "linux": "#999999", "linux_uring": "#cc7a00"}
for g, (part, conns) in enumerate(groups):
    for k, server in enumerate(SERVERS):
        r = next((r for r in rows if (r["server"], r["part"], r["connections"]) == (server, part, conns)), None)
        if not r:
            continue
        bh = 240 * r["msgs_per_s"] / top
        x = x0 + 20 + g * 180 + k * 50
        svg.append(f'<rect x="{x}" y="{y0 - bh:.1f}" width="40" height="{bh:.1f}" fill="{colour[server]}"/>')
        svg.append(f'<text x="{x}" y="{y0 - bh - 4:.1f}" font-size="10">{r["cpu_us_per_msg_both_cores"]:.1f}us</text>')
        svg.append(f'<text x="{x}" y="{y0 + 14}" font-size="10">{server}</text>')
    svg.append(f'<text x="{x0 + 20 + g * 180}" y="{y0 + 30}">{part} c={conns}</text>')
svg.append('</svg>')
open(f"{out}/echo.svg", "w").write("\n".join(svg) + "\n")
print(f"echo.sh: wrote {out}/echo.json and {out}/echo.svg", file=sys.stderr)
PY
