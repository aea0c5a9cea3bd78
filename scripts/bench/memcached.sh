#!/usr/bin/env bash
# Key-value benchmark (issue 12, Benchmark "Key-value"): `oxnet
# memcached` on its own TCP/IP stack against memcached 1.6 (`-t 1`),
# each server pinned to one core, the same client, `oxnet loadgen
# --proto memcached-text|memcached-binary`, pinned to the other core.
#
#   oxnet     : `oxnet memcached DEV --ip 10.81.0.2/24 -p 11211 -U 0
#               -m 64` in namespace C, on OX_DEV=tap (default;
#               tap:oxbt0,ip=10.81.0.1/24, one read(2) or write(2) per
#               frame; the client in C reaches it through the TAP's
#               kernel side) or OX_DEV=af_xdp / af_packet (one end of a
#               veth pair in C, oxkx0, the client on the other end, oxkk0:
#               rings, no system call per frame; for AF_XDP the client's
#               end has checksum offload off, as in echo.sh).
#               OX_RUN_FLAGS go to its router (`-- --busy-poll`).
#               Skipped (said so) while oxnet has no `memcached` command.
#   memcached : `memcached -t 1 -U 0 -m 64 -p 11211` in namespace S,
#               reached from the client in C over a veth pair.
#
# Per server: a fill (every key SET once, not measured), then an open
# loop at each rate of RATES (requests/s offered; latency counts from
# each request's scheduled time, so queueing shows): requests/s answered
# and p99; then FIXED_RATE for CPU seconds per request, counted on BOTH
# cores from /proc/stat (the kernel's TAP/veth work runs in softirq on
# either core), and the server process's own. Every answer is checked by
# the loadgen (a GET returns its key's stored value); errors are shown.
#
#   sudo scripts/bench/memcached.sh
#   sudo SECONDS_PER_RUN=10 RATES="50000 100000 200000 400000" scripts/bench/memcached.sh
#   sudo OX_DEV=af_xdp OX_RUN_FLAGS=--busy-poll scripts/bench/memcached.sh
#   sudo OX_DEV=af_xdp WORKLOAD=etc scripts/bench/memcached.sh   (mutilate's ETC load; study-linux.sh)
#   sudo OXNET=target/debug/oxnet SECONDS_PER_RUN=1 RATES="5000 10000" FIXED_RATE=5000 scripts/bench/memcached.sh
#
# Writes $OXNET_BENCH_OUT (default target/bench)/$NAME.json (NAME default memcached) (every
# sample, the table) and memcached.svg, and prints oxnet/memcached:
# the highest rate answered with p99 < 500 us, and CPU per request.
# The issue's goal: at least 3x memcached's requests/s per core.
set -euo pipefail
cd "$(dirname "$0")/../.."

SECS="${SECONDS_PER_RUN:-5}"
RATES="${RATES:-20000 50000 100000 150000 200000 300000}"
FIXED_RATE="${FIXED_RATE:-50000}"
CONNS="${CONNECTIONS:-16}"
PROTO="${PROTO:-memcached-text}"   # memcached-text | memcached-binary
KEYS="${KEYS:-1000}"
VALUE_SIZE="${VALUE_SIZE:-100}"
GET_RATIO="${GET_RATIO:-0.9}"
CLIENT_CORE="${CLIENT_CORE:-0}"
SERVER_CORE="${SERVER_CORE:-1}"
OX_FLAGS="${OX_FLAGS:-}"           # more of memcached's flags for oxnet memcached
OX_RUN_FLAGS="${OX_RUN_FLAGS:-}"   # oxnet run's options for its router, e.g. --busy-poll
OX_DEV="${OX_DEV:-tap}"            # tap | af_xdp | af_packet
# fixed: KEYS keys of VALUE_SIZE bytes, GET_RATIO GETs, the fill a pass of
# SETs. etc: Facebook's ETC load as mutilate gives it (-K fb_key -V
# fb_value -i fb_ia -u 0.25 over RECORDS records; the fill `--loadonly`,
# the runs `--noload`): issue 13's Figure 8, run by study-linux.sh.
WORKLOAD="${WORKLOAD:-fixed}"
RECORDS="${RECORDS:-100000}"
MEMORY="${MEMORY:-64}"             # both servers' -m, MiB
MAX_CONNS="${MAX_CONNS:-1024}"     # both servers' -c
NAME="${NAME:-memcached}"          # the output files' name: NAME.json, NAME.svg
out="${OXNET_BENCH_OUT:-target/bench}"

[ "$(id -u)" -eq 0 ] || { echo "memcached.sh: needs root (TAP, namespaces)" >&2; exit 1; }
case "$OX_DEV" in tap | af_xdp | af_packet) ;; *) echo "memcached.sh: OX_DEV=tap, af_xdp or af_packet" >&2; exit 1 ;; esac
case "$WORKLOAD" in fixed | etc) ;; *) echo "memcached.sh: WORKLOAD=fixed or etc" >&2; exit 1 ;; esac
case "$PROTO" in memcached-text | memcached-binary) ;; *) echo "memcached.sh: PROTO=memcached-text or memcached-binary" >&2; exit 1 ;; esac
command -v memcached >/dev/null || { echo "memcached.sh: no memcached (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
if [ -z "${OXNET:-}" ]; then
    cargo build --release -q -p oxnet >&2
    OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
fi
OXNET="$(realpath "$OXNET")"
# Many connections need as many descriptors (the client's and oxnet's).
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -gt $((CONNS + 64)) ] || { echo "memcached.sh: ulimit -n $(ulimit -n) is too few for $CONNS connections" >&2; exit 1; }
SERVERS=(memcached)
if "$OXNET" memcached --help >/dev/null 2>&1; then
    SERVERS+=(oxnet)
else
    echo "memcached.sh: this oxnet has no \`memcached\` command yet: the oxnet half is skipped" >&2
fi

# cores_busy, cores_irq, proc_cpu, jiffies_s (shared with echo.sh).
. scripts/bench/cores.sh

# NSC, NSS, TMP, SERVER_PID and their cleanup; the veth pair oxkc0/oxks0.
. scripts/bench/topology.sh
topology k 10.82.0
if [ "$OX_DEV" = tap ]; then
    OX_SPEC="tap:oxbt0,ip=10.81.0.1/24"
else
    # oxnet takes oxkx0 (no address); the client's side is oxkk0.
    ip -n "$NSC" link add oxkk0 type veth peer name oxkx0
    ip -n "$NSC" addr add 10.81.0.1/24 dev oxkk0
    ip -n "$NSC" link set oxkk0 up
    ip -n "$NSC" link set oxkx0 up
    if [ "$OX_DEV" = af_xdp ]; then
        # An XDP socket gets the frame as the sender left it: with checksum
        # offload on, a TCP checksum nobody computed. The client's kernel
        # computes it instead (echo.sh does the same).
        ip netns exec "$NSC" ethtool -K oxkk0 tx off tso off gso off >/dev/null
    fi
    OX_SPEC="$OX_DEV:oxkx0"
fi
RUN_SEP=()
[ -n "$OX_RUN_FLAGS" ] && RUN_SEP=(--)

target_of() { if [ "$1" = oxnet ]; then echo 10.81.0.2:11211; else echo 10.82.0.2:11211; fi; }

if [ "$WORKLOAD" = etc ]; then
    LOAD=(-K fb_key -V fb_value -i fb_ia -u 0.25 -r "$RECORDS")
    FILL=(--loadonly -c 16)
    RUN=(--noload)
else
    LOAD=(--keys "$KEYS" --value-size "$VALUE_SIZE")
    FILL=(--requests "$KEYS" --get-ratio 0)
    RUN=(--get-ratio "$GET_RATIO")
fi

client() { # client TARGET loadgen-flags...: one JSON line
    local target=$1
    shift
    ip netns exec "$NSC" taskset -c "$CLIENT_CORE" "$OXNET" loadgen -s "$target" --proto "$PROTO" \
        "${LOAD[@]}" --json "$@"
}

wait_ready() { # wait_ready TARGET
    local i
    for ((i = 0; i < 100; i++)); do
        if ip netns exec "$NSC" "$OXNET" loadgen -s "$1" --proto "$PROTO" --requests 1 --timeout 1 >/dev/null 2>&1; then return 0; fi
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "memcached.sh: the server ended:" >&2; cat "$TMP/server.err" >&2; exit 1; }
        sleep 0.2
    done
    echo "memcached.sh: no answer from $1 after 20 s" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

start_server() { # start_server oxnet|memcached
    if [ "$1" = oxnet ]; then
        # shellcheck disable=SC2086 # OX_FLAGS, OX_RUN_FLAGS: words
        ip netns exec "$NSC" taskset -c "$SERVER_CORE" "$OXNET" memcached "$OX_SPEC" \
            --ip 10.81.0.2/24 -p 11211 -U 0 -m "$MEMORY" -c "$MAX_CONNS" $OX_FLAGS "${RUN_SEP[@]}" $OX_RUN_FLAGS \
            >"$TMP/server.out" 2>"$TMP/server.err" &
    else
        ip netns exec "$NSS" taskset -c "$SERVER_CORE" memcached -t 1 -U 0 -m "$MEMORY" -c "$MAX_CONNS" -p 11211 -u nobody \
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
    local b_cores b_irq b_server b_sys json
    b_cores=$(cores_busy)
    b_irq=$(cores_irq)
    b_server=$(proc_cpu "$SERVER_PID")
    b_sys=$(proc_sys "$SERVER_PID")
    json=$(client "$(target_of "$1")" -c "$CONNS" -q "$3" -t "$SECS" "${RUN[@]}") || true
    [ -n "$json" ] || { echo "memcached.sh: $1 at $3/s: the client printed nothing" >&2; exit 1; }
    printf '{"server":"%s","phase":"%s","offered":%s,"cores_cpu_s":%s,"irq_cpu_s":%s,"server_cpu_s":%s,"server_sys_cpu_s":%s,"client":%s}\n' \
        "$1" "$2" "$3" "$(jiffies_s "$b_cores" "$(cores_busy)")" "$(jiffies_s "$b_irq" "$(cores_irq)")" \
        "$(jiffies_s "$b_server" "$(proc_cpu "$SERVER_PID")")" "$(jiffies_s "$b_sys" "$(proc_sys "$SERVER_PID")")" \
        "$json" >>"$TMP/samples.jsonl"
    echo "memcached.sh: $1 $2 at $3/s: $(printf '%s' "$json" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f/s, p99 %.0f us (from the send %.0f), %d errors" % (j["throughput"], j["latency_us"]["p99"], j["service_us"]["p99"], j["errors"]["total"]))')" >&2
}

: >"$TMP/samples.jsonl"
for server in "${SERVERS[@]}"; do
    start_server "$server"
    # The fill: every key stored once before the clock starts.
    client "$(target_of "$server")" "${FILL[@]}" >/dev/null
    for rate in $RATES; do
        measure "$server" sweep "$rate"
    done
    measure "$server" fixed "$FIXED_RATE"
    stop_server
done

python3 - "$TMP/samples.jsonl" "$out" "$SECS" "$PROTO" "$KEYS" "$VALUE_SIZE" "$GET_RATIO" "$CONNS" "$OX_DEV" "$OX_RUN_FLAGS" "$WORKLOAD" "$RECORDS" "$NAME" <<'PY'
import json, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, secs, proto, keys, value_size, get_ratio, conns, ox_dev, ox_run_flags, workload, records, name = sys.argv[2], float(sys.argv[3]), *sys.argv[4:]
SLO_US = 500
servers = [s for s in ["oxnet", "memcached"] if any(x["server"] == s for x in samples)]
rows = []
for s in samples:
    c = s["client"]
    reqs = max(c["requests"], 1)
    rows.append({"server": s["server"], "phase": s["phase"], "offered": s["offered"],
                 "requests_per_s": c["throughput"], "p50_us": c["latency_us"]["p50"], "p99_us": c["latency_us"]["p99"],
                 "p99_from_send_us": c["service_us"]["p99"],
                 "cpu_us_per_request_both_cores": s["cores_cpu_s"] / reqs * 1e6,
                 "server_cpu_us_per_request": s["server_cpu_s"] / reqs * 1e6,
                 "server_sys_us_per_request": s.get("server_sys_cpu_s", 0) / reqs * 1e6,
                 "server_core_share": s["server_cpu_s"] / max(c["seconds"], 1e-9),
                 "errors": c["errors"]["total"], "unsent": c["unsent"], "misses": c.get("misses", 0)})
print(f'{"server":<11}{"phase":<7}{"offered/s":>10}{"answered/s":>12}{"p50 us":>9}{"p99 us":>9}{"us CPU/req (2 cores)":>22}{"server us/req":>15}{"of it sys":>11}{"server core":>13}{"errors":>8}{"unsent":>8}')
for r in rows:
    print(f'{r["server"]:<11}{r["phase"]:<7}{r["offered"]:>10}{r["requests_per_s"]:>12.0f}{r["p50_us"]:>9.1f}{r["p99_us"]:>9.1f}'
          f'{r["cpu_us_per_request_both_cores"]:>22.2f}{r["server_cpu_us_per_request"]:>15.2f}{r["server_sys_us_per_request"]:>11.2f}{r["server_core_share"]*100:>12.0f}%{r["errors"]:>8}{r["unsent"]:>8}')
def best(server):
    ok = [r["requests_per_s"] for r in rows if r["server"] == server and r["phase"] == "sweep" and r["p99_us"] < SLO_US and r["errors"] == 0]
    return max(ok, default=0.0)
def fixed(server):
    return next((r for r in rows if r["server"] == server and r["phase"] == "fixed"), None)
summary = {s: {"best_requests_per_s_p99_under_500us": best(s), "fixed": fixed(s)} for s in servers}
for s in servers:
    f = fixed(s)
    print(f'{s}: {best(s):.0f} requests/s with p99 < {SLO_US} us; at the fixed load {f["cpu_us_per_request_both_cores"]:.2f} us CPU per request on both cores')
if "oxnet" in servers and "memcached" in servers:
    o, m = summary["oxnet"], summary["memcached"]
    r = o["best_requests_per_s_p99_under_500us"] / m["best_requests_per_s_p99_under_500us"] if m["best_requests_per_s_p99_under_500us"] else float("nan")
    c = o["fixed"]["cpu_us_per_request_both_cores"] / m["fixed"]["cpu_us_per_request_both_cores"] if m["fixed"]["cpu_us_per_request_both_cores"] else float("nan")
    print(f"oxnet/memcached: requests/s at p99 < {SLO_US} us {r:.2f}x (goal: 3x); CPU per request {c:.2f}x (below 1: oxnet cheaper)")
    summary["ratio_requests_per_s"], summary["ratio_cpu_per_request"] = r, c
else:
    print("oxnet/memcached: no ratio, the oxnet half was skipped (this oxnet has no `memcached` command)")
json.dump({"benchmark": name, "workload": workload, "records": int(records), "proto": proto, "keys": int(keys), "value_size": int(value_size), "get_ratio": float(get_ratio),
           "connections": int(conns), "seconds_per_run": secs, "slo_p99_us": SLO_US,
           "oxnet": f"oxnet memcached on {ox_dev} ({'a TAP device' if ox_dev == 'tap' else 'one end of a veth pair'}), one core",
           "ox_dev": ox_dev, "ox_run_flags": ox_run_flags, "memcached": "memcached -t 1 over veth, one core",
           "summary": summary, "rows": rows, "samples": samples}, open(f"{out}/{name}.json", "w"), indent=1)

# The figure: answered requests/s (left) and p99 (right) against the
# offered load, one line per server; the dashed line is the 500 us goal.
sweep = {s: sorted((r for r in rows if r["server"] == s and r["phase"] == "sweep"), key=lambda r: r["offered"]) for s in servers}
xmax = max(r["offered"] for r in rows) * 1.05 or 1
ymax = max(r["requests_per_s"] for r in rows) * 1.1 or 1
pmax = max(2 * SLO_US, min(max(r["p99_us"] for r in rows) * 1.1, 20 * SLO_US))
colour = {"oxnet": "#2b5797", "memcached": "#999999"}
W, H, PW, PH = 760, 330, 280, 220
load = f"ETC (fb_key, fb_value, fb_ia, 25 % SETs, {records} records)" if workload == "etc" else f"{value_size} B values, {get_ratio} GETs"
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<text x="10" y="16">Key-value, {proto}, {load}, {conns} connections: one server core each</text>']
def panel(x0, title, key, top, unit):
    y0 = 40 + PH
    svg.append(f'<text x="{x0}" y="34">{title}</text>')
    svg.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + PW}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="40" stroke="black"/>')
    for t in range(5):
        svg.append(f'<text x="{x0 - 48}" y="{y0 - PH * t / 4 + 4:.1f}" font-size="10">{top * t / 4 / unit[0]:.0f}{unit[1]}</text>')
        svg.append(f'<text x="{x0 + PW * t / 4 - 10:.1f}" y="{y0 + 14}" font-size="10">{xmax * t / 4 / 1000:.0f}k</text>')
    svg.append(f'<text x="{x0 + PW / 2 - 40}" y="{y0 + 30}">offered requests/s</text>')
    for s in servers:
        pts = " ".join(f'{x0 + PW * r["offered"] / xmax:.1f},{y0 - PH * min(r[key], top) / top:.1f}' for r in sweep[s])
        svg.append(f'<polyline points="{pts}" fill="none" stroke="{colour[s]}" stroke-width="2"/>')
    return y0
panel(70, "answered requests/s", "requests_per_s", ymax, (1000, "k"))
y0 = panel(450, "p99 latency (us)", "p99_us", pmax, (1, ""))
ys = y0 - PH * SLO_US / pmax
svg.append(f'<line x1="450" y1="{ys:.1f}" x2="{450 + PW}" y2="{ys:.1f}" stroke="red" stroke-dasharray="4,3"/>')
for k, s in enumerate(servers):
    svg.append(f'<rect x="{80 + k * 120}" y="{H - 16}" width="12" height="8" fill="{colour[s]}"/><text x="{96 + k * 120}" y="{H - 8}">{s}</text>')
svg.append('</svg>')
open(f"{out}/{name}.svg", "w").write("\n".join(svg) + "\n")
print(f"memcached.sh: wrote {out}/{name}.json and {out}/{name}.svg", file=sys.stderr)
PY
