#!/usr/bin/env bash
# Linux beside oxnet (issue 13, item 3; the paper's Figure 8): memcached
# 1.6 (`-t 1`) and `oxnet memcached af_xdp:...` on the same veth
# topology, the same load generator with the ETC workload (`-K fb_key -V
# fb_value -i fb_ia -u 0.25`, keys uniform over RECORDS records), p99
# latency against offered QPS for both, CPU counted on both cores.
#
#   memcached : `memcached -t 1 -U 0 -m 256 -c 4096` in namespace S,
#               reached from the client in C over veth oxlc0/oxls0.
#   oxnet     : `oxnet memcached af_xdp:oxlx0` in namespace C on one end
#               of a second veth pair (oxlk0, the client's, 10.81.0.1;
#               oxnet 10.81.0.2), as echo.sh's OX_DEV=af_xdp: the
#               client's veth has checksum offload off (AF_XDP gets the
#               frame as sent).
#
# Per server: the fill (every record SET once, not measured: the
# loadgen's own load phase), then an open loop at each rate of RATES
# (latency from each request's scheduled time; the loadgen also reports
# it from the actual send), then FIXED_RATE for CPU seconds per request
# on both cores from /proc/stat. Every GET is checked by the loadgen.
#
#   sudo scripts/bench/study-linux.sh
#   sudo OXNET=target/debug/oxnet SECONDS_PER_RUN=1 RATES="2000 5000" FIXED_RATE=2000 CONNECTIONS=64 scripts/bench/study-linux.sh
#
# Writes ${OXNET_STUDY_OUT:-target/study}/linux.json and linux.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."

SECS="${SECONDS_PER_RUN:-10}"
RATES="${RATES:-25000 50000 100000 150000 200000 250000}"
FIXED_RATE="${FIXED_RATE:-50000}"
CONNS="${CONNECTIONS:-1024}"
RECORDS="${RECORDS:-100000}"
PROTO="${PROTO:-memcached-text}"
CLIENT_CORE="${CLIENT_CORE:-0}"
SERVER_CORE="${SERVER_CORE:-1}"
out="${OXNET_STUDY_OUT:-target/study}"

[ "$(id -u)" -eq 0 ] || { echo "study-linux.sh: needs root (namespaces, AF_XDP)" >&2; exit 1; }
command -v memcached >/dev/null || { echo "study-linux.sh: no memcached (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
if [ -z "${OXNET:-}" ]; then
    cargo build --release -q -p oxnet >&2
    OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
fi
OXNET="$(realpath "$OXNET")"
# 1024 connections: one descriptor each, in the client.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -gt $((CONNS + 64)) ] || { echo "study-linux.sh: ulimit -n $(ulimit -n) is too few for $CONNS connections" >&2; exit 1; }

. scripts/bench/cores.sh
. scripts/bench/topology.sh
topology l 10.82.0
ip -n "$NSC" link add oxlk0 type veth peer name oxlx0
ip -n "$NSC" addr add 10.81.0.1/24 dev oxlk0
ip -n "$NSC" link set oxlk0 up
ip -n "$NSC" link set oxlx0 up
ip netns exec "$NSC" ethtool -K oxlk0 tx off tso off gso off >/dev/null

target_of() { if [ "$1" = oxnet ]; then echo 10.81.0.2:11211; else echo 10.82.0.2:11211; fi; }
ETC=(-K fb_key -V fb_value -i fb_ia -u 0.25 -r "$RECORDS")

client() { # client TARGET loadgen-flags...: one JSON line
    local target=$1
    shift
    ip netns exec "$NSC" taskset -c "$CLIENT_CORE" "$OXNET" loadgen -s "$target" --proto "$PROTO" "${ETC[@]}" --json "$@"
}

wait_ready() { # wait_ready TARGET
    local i
    for ((i = 0; i < 100; i++)); do
        if ip netns exec "$NSC" "$OXNET" loadgen -s "$1" --proto "$PROTO" --requests 1 --timeout 1 >/dev/null 2>&1; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "study-linux.sh: the server ended:" >&2; cat "$TMP/server.err" >&2; exit 1; }
        sleep 0.2
    done
    echo "study-linux.sh: no answer from $1 after 20 s" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

start_server() { # start_server oxnet|memcached
    if [ "$1" = oxnet ]; then
        ip netns exec "$NSC" taskset -c "$SERVER_CORE" "$OXNET" memcached af_xdp:oxlx0 \
            --ip 10.81.0.2/24 -p 11211 -U 0 -m 256 -c 4096 >"$TMP/server.out" 2>"$TMP/server.err" &
    else
        ip netns exec "$NSS" taskset -c "$SERVER_CORE" memcached -t 1 -U 0 -m 256 -c 4096 -p 11211 -u nobody \
            >"$TMP/server.out" 2>"$TMP/server.err" &
    fi
    SERVER_PID=$!
    wait_ready "$(target_of "$1")"
}

stop_server() {
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" || true
    SERVER_PID=""
}

measure() { # measure SERVER PHASE RATE
    local b_cores b_server json
    b_cores=$(cores_busy)
    b_server=$(proc_cpu "$SERVER_PID")
    json=$(client "$(target_of "$1")" --noload -c "$CONNS" -q "$3" -t "$SECS") || true
    [ -n "$json" ] || { echo "study-linux.sh: $1 at $3/s: the client printed nothing" >&2; exit 1; }
    printf '{"server":"%s","phase":"%s","offered":%s,"cores_cpu_s":%s,"server_cpu_s":%s,"client":%s}\n' \
        "$1" "$2" "$3" "$(jiffies_s "$b_cores" "$(cores_busy)")" "$(jiffies_s "$b_server" "$(proc_cpu "$SERVER_PID")")" \
        "$json" >>"$TMP/samples.jsonl"
    echo "study-linux.sh: $1 $2 at $3/s: $(printf '%s' "$json" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f/s, p99 %.0f us (from send %.0f), %d errors" % (j["throughput"], j["latency_us"]["p99"], j["service_us"]["p99"], j["errors"]["total"]))')" >&2
}

: >"$TMP/samples.jsonl"
for server in memcached oxnet; do
    start_server "$server"
    client "$(target_of "$server")" --loadonly -c 16 >/dev/null
    for rate in $RATES; do
        measure "$server" sweep "$rate"
    done
    measure "$server" fixed "$FIXED_RATE"
    stop_server
done

python3 - "$TMP/samples.jsonl" "$out" "$SECS" "$PROTO" "$RECORDS" "$CONNS" <<'PY'
import json, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, secs, proto, records, conns = sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
SLA_US = 500
servers = ["memcached", "oxnet"]
rows = []
for s in samples:
    c = s["client"]
    reqs = max(c["requests"], 1)
    rows.append({"server": s["server"], "phase": s["phase"], "offered": s["offered"], "requests_per_s": c["throughput"],
                 "p50_us": c["latency_us"]["p50"], "p99_us": c["latency_us"]["p99"],
                 "p99_from_send_us": c["service_us"]["p99"],
                 "cpu_us_per_request_both_cores": s["cores_cpu_s"] / reqs * 1e6,
                 "server_cpu_us_per_request": s["server_cpu_s"] / reqs * 1e6,
                 "errors": c["errors"]["total"], "unsent": c["unsent"], "misses": c.get("misses", 0)})
print(f'{"server":<11}{"phase":<7}{"offered/s":>10}{"answered/s":>12}{"p50 us":>9}{"p99 us":>10}{"p99 send":>10}{"us CPU/req (2 cores)":>22}{"server us/req":>15}{"errors":>8}')
for r in rows:
    print(f'{r["server"]:<11}{r["phase"]:<7}{r["offered"]:>10}{r["requests_per_s"]:>12.0f}{r["p50_us"]:>9.1f}{r["p99_us"]:>10.1f}{r["p99_from_send_us"]:>10.1f}'
          f'{r["cpu_us_per_request_both_cores"]:>22.2f}{r["server_cpu_us_per_request"]:>15.2f}{r["errors"]:>8}')
def best(server):
    ok = [r["requests_per_s"] for r in rows if r["server"] == server and r["phase"] == "sweep" and r["p99_us"] < SLA_US and r["errors"] == 0]
    return max(ok, default=0.0)
summary = {s: {"best_requests_per_s_p99_under_500us": best(s),
               "fixed": next((r for r in rows if r["server"] == s and r["phase"] == "fixed"), None)} for s in servers}
for s in servers:
    print(f'{s}: {best(s):.0f} requests/s with p99 < {SLA_US} us')
json.dump({"benchmark": "study-linux", "figure": "the paper's Figure 8", "proto": proto,
           "workload": "-K fb_key -V fb_value -i fb_ia -u 0.25", "records": records, "connections": conns,
           "seconds_per_run": secs, "sla_p99_us": SLA_US,
           "memcached": "memcached -t 1 over veth, one core", "oxnet": "oxnet memcached on af_xdp at one end of a veth pair, one core",
           "summary": summary, "rows": rows, "samples": samples}, open(f"{out}/linux.json", "w"), indent=1)
# Figure 8: p99 (from the schedule) against offered QPS; dashed: 500 us.
sweep = {s: sorted((r for r in rows if r["server"] == s and r["phase"] == "sweep"), key=lambda r: r["offered"]) for s in servers}
xmax = max(r["offered"] for r in rows) * 1.05 or 1
pmax = max(2 * SLA_US, min(max(r["p99_us"] for r in rows) * 1.1, 20 * SLA_US))
colour = {"oxnet": "#2b5797", "memcached": "#999999"}
W, H, PW, PH, x0, y0 = 460, 330, 360, 220, 70, 260
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<text x="10" y="16">ETC over veth, {conns} connections, one server core: p99 latency (us)</text>',
       f'<line x1="{x0}" y1="{y0}" x2="{x0 + PW}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="40" stroke="black"/>']
for t in range(5):
    svg.append(f'<text x="{x0 - 48}" y="{y0 - PH * t / 4 + 4:.1f}" font-size="10">{pmax * t / 4:.0f}</text>')
    svg.append(f'<text x="{x0 + PW * t / 4 - 10:.1f}" y="{y0 + 14}" font-size="10">{xmax * t / 4 / 1000:.0f}k</text>')
svg.append(f'<text x="{x0 + PW / 2 - 40}" y="{y0 + 30}">offered requests/s</text>')
for s in servers:
    pts = " ".join(f'{x0 + PW * r["offered"] / xmax:.1f},{y0 - PH * min(r["p99_us"], pmax) / pmax:.1f}' for r in sweep[s])
    svg.append(f'<polyline points="{pts}" fill="none" stroke="{colour[s]}" stroke-width="2"/>')
ys = y0 - PH * SLA_US / pmax
svg.append(f'<line x1="{x0}" y1="{ys:.1f}" x2="{x0 + PW}" y2="{ys:.1f}" stroke="red" stroke-dasharray="4,3"/>')
for k, s in enumerate(servers):
    svg.append(f'<rect x="{80 + k * 120}" y="{H - 16}" width="12" height="8" fill="{colour[s]}"/><text x="{96 + k * 120}" y="{H - 8}">{s}</text>')
svg.append('</svg>')
open(f"{out}/linux.svg", "w").write("\n".join(svg) + "\n")
print(f"study-linux.sh: wrote {out}/linux.json and {out}/linux.svg", file=sys.stderr)
PY
