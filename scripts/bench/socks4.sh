#!/usr/bin/env bash
# The SOCKS4 proxy benchmark (issue 12; ClickNF Figure 10's proxy):
# oxnet's conf/socks4.click against dante-server (danted), the same
# client, the same origin server, alternating runs.
#
#   oxnet : conf/socks4.click run by `oxnet run` in namespace C on a TAP
#           (10.85.0.2:1080; the TAP's kernel side is 10.85.0.1).
#   dante : danted 1.4 with its own configuration file (written here, in
#           a temporary directory), in the foreground, one process
#           (-N 1), in namespace S (10.86.0.2:1080), reached from C over
#           a veth pair: like oxnet, both of its connections cross a
#           virtual link.
#   origin: nginx (its own configuration, foreground, one process) in C,
#           on every address, port 8080, serving SIZES-byte objects.
#   client: curl in C, one process per run: a URL glob of REQUESTS
#           fetches with -Z --parallel-max CONCURRENCY, each through the
#           proxy (--socks4) with `Connection: close`, so every request is
#           a new client connection, a SOCKS4 CONNECT, a new connection
#           to nginx and the relay of one object. curl is the client
#           because wrk and oxnet loadgen speak no SOCKS; one curl
#           process with parallel transfers keeps process start-up out
#           of the count. Every byte is counted: a run whose bytes are
#           not REQUESTS x SIZE fails.
#
# Proxy on core SERVER_CORE, curl and nginx on CLIENT_CORE. Counted per
# request: the proxy process's CPU (/proc/PID/stat) and the busy time of
# both cores (/proc/stat), as scripts/bench/echo.sh does.
#
#   sudo scripts/bench/socks4.sh                          # 3 runs
#   sudo RUNS=1 REQUESTS=200 scripts/bench/socks4.sh      # a quick look
#
# Writes target/bench/socks4.json (samples and medians) and
# target/bench/socks4.svg (requests/s per object size; labels: the
# proxy's CPU us per request).
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
REQUESTS="${REQUESTS:-2000}"
CONCURRENCY="${CONCURRENCY:-16}"
SIZES="${SIZES:-1024 65536 1048576}"
CLIENT_CORE="${CLIENT_CORE:-0}"
SERVER_CORE="${SERVER_CORE:-1}"
out="${OXNET_BENCH_OUT:-target/bench}"

[ "$(id -u)" -eq 0 ] || { echo "socks4.sh: needs root (TAP, namespaces)" >&2; exit 1; }
for p in danted nginx curl; do
    command -v "$p" >/dev/null || { echo "socks4.sh: no $p (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
mkdir -p "$out"
# OXNET=path: that binary instead of a release build (a quick look).
if [ -z "${OXNET:-}" ]; then
    cargo build --release -q -p oxnet >&2
    OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/release/oxnet"
fi

# NSC and NSS joined by a veth pair (10.86.0.1 in C, 10.86.0.2 in S),
# TMP, SERVER_PID and their cleanup (scripts/bench/topology.sh); nginx
# is stopped too.
. scripts/bench/topology.sh
topology s4 10.86.0
chmod 755 "$TMP"
NGINX_PID=""
cleanup() {
    if [ -n "$NGINX_PID" ]; then kill -TERM "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
    topology_cleanup
}
trap cleanup EXIT

# The origin: nginx in C, objects of each size.
mkdir -p "$TMP/www"
for s in $SIZES; do head -c "$s" /dev/urandom >"$TMP/www/obj$s"; done
cat >"$TMP/nginx.conf" <<EOF
daemon off;
master_process off;
pid $TMP/nginx.pid;
error_log $TMP/nginx.err;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/cbt; proxy_temp_path $TMP/pt; fastcgi_temp_path $TMP/ft;
    uwsgi_temp_path $TMP/ut; scgi_temp_path $TMP/st;
    server { listen 8080 backlog=4096; root $TMP/www; }
}
EOF
ip netns exec "$NSC" taskset -c "$CLIENT_CORE" nginx -p "$TMP" -c "$TMP/nginx.conf" -e "$TMP/nginx.err" &
NGINX_PID=$!

# dante's configuration: SOCKS4 CONNECT from anyone to anywhere.
cat >"$TMP/danted.conf" <<EOF
logoutput: stderr
internal: 10.86.0.2 port = 1080
external: 10.86.0.2
clientmethod: none
socksmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 0.0.0.0/0 to: 0.0.0.0/0 }
socks pass { from: 0.0.0.0/0 to: 0.0.0.0/0 command: connect bind }
EOF

OX_PROXY=10.85.0.2:1080
OX_ORIGIN=10.85.0.1:8080
DANTE_PROXY=10.86.0.2:1080
DANTE_ORIGIN=10.86.0.1:8080
HZ=$(getconf CLK_TCK)
cores_busy() {
    awk -v a="cpu$CLIENT_CORE" -v b="cpu$SERVER_CORE" \
        '$1 == a || $1 == b {s += $2 + $3 + $4 + $7 + $8 + $9} END {print s}' /proc/stat
}
proc_cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }

wait_ready() { # wait_ready PROXY ORIGIN
    local i
    for ((i = 0; i < 100; i++)); do
        if ip netns exec "$NSC" curl -s -o /dev/null --max-time 1 --socks4 "$1" "http://$2/obj${SIZES%% *}"; then
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "socks4.sh: the proxy ended:" >&2; cat "$TMP/server.err" >&2; exit 1; }
        sleep 0.2
    done
    echo "socks4.sh: no answer through $1 after 20 s" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

start_proxy() { # start_proxy oxnet|dante
    if [ "$1" = oxnet ]; then
        ip netns exec "$NSC" taskset -c "$SERVER_CORE" "$OXNET" run conf/socks4.click \
            "DEV=tap:oxs4t0,ip=10.85.0.1/24" IP=10.85.0.2 \
            -h proxy.granted -h proxy.errors >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        wait_ready "$OX_PROXY" "$OX_ORIGIN"
    else
        ip netns exec "$NSS" taskset -c "$SERVER_CORE" danted -f "$TMP/danted.conf" -N 1 \
            -p "$TMP/danted.pid" >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        wait_ready "$DANTE_PROXY" "$DANTE_ORIGIN"
    fi
}

stop_proxy() {
    kill -INT "$SERVER_PID"
    wait "$SERVER_PID" || true
    SERVER_PID=""
}

# The proxy's CPU: danted forks children (negotiation, request, i/o
# processes); count them with it, for both proxies alike.
# Its own time, its reaped children's (cutime, cstime), and the live
# children's.
tree_cpu() {
    local total p
    total=$(awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat")
    for p in $(ps -o pid= --ppid "$1"); do
        [ -r "/proc/$p/stat" ] && total=$((total + $(proc_cpu "$p")))
    done
    echo "$total"
}

measure() { # measure PROXY-NAME RUN SIZE PROXY ORIGIN
    local before_cores after_cores before_proxy after_proxy start end bytes
    before_cores=$(cores_busy)
    before_proxy=$(tree_cpu "$SERVER_PID")
    start=$(date +%s.%N)
    bytes=$(ip netns exec "$NSC" taskset -c "$CLIENT_CORE" curl -s --no-progress-meter -Z \
        --parallel-max "$CONCURRENCY" --socks4 "$4" -H 'Connection: close' "http://$5/obj$3?n=[1-$REQUESTS]" \
        2>>"$TMP/curl.err" | wc -c)
    end=$(date +%s.%N)
    after_cores=$(cores_busy)
    after_proxy=$(tree_cpu "$SERVER_PID")
    if [ "$bytes" -ne $((REQUESTS * $3)) ]; then
        echo "socks4.sh: $1 size $3: $bytes bytes, not $((REQUESTS * $3))" >&2
        cat "$TMP/curl.err" >&2
        exit 1
    fi
    printf '{"proxy":"%s","run":%s,"size":%s,"requests":%s,"seconds":%s,"cores_cpu_s":%s,"proxy_cpu_s":%s}\n' \
        "$1" "$2" "$3" "$REQUESTS" "$(awk -v a="$start" -v b="$end" 'BEGIN {printf "%.4f", b - a}')" \
        "$(awk -v d=$((after_cores - before_cores)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" \
        "$(awk -v d=$((after_proxy - before_proxy)) -v hz="$HZ" 'BEGIN {printf "%.3f", d / hz}')" \
        >>"$TMP/samples.jsonl"
    echo "socks4.sh: run $2 $1 size $3: $(tail -1 "$TMP/samples.jsonl")" >&2
}

: >"$TMP/samples.jsonl"
for ((r = 1; r <= RUNS; r++)); do
    for proxy in oxnet dante; do
        start_proxy "$proxy"
        for s in $SIZES; do
            if [ "$proxy" = oxnet ]; then
                measure oxnet "$r" "$s" "$OX_PROXY" "$OX_ORIGIN"
            else
                measure dante "$r" "$s" "$DANTE_PROXY" "$DANTE_ORIGIN"
            fi
        done
        stop_proxy
    done
done

python3 - "$TMP/samples.jsonl" "$out" "$RUNS" "$CONCURRENCY" <<'PY'
import json, statistics, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, runs, conc = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
PROXIES = ["oxnet", "dante"]
rows = []
for size in sorted({s["size"] for s in samples}):
    for proxy in PROXIES:
        ss = [s for s in samples if s["proxy"] == proxy and s["size"] == size]
        if not ss:
            continue
        med = lambda f: statistics.median(f(s) for s in ss)
        rows.append({
            "proxy": proxy, "size": size, "runs": len(ss),
            "requests_per_s": med(lambda s: s["requests"] / s["seconds"]),
            "goodput_mbit_s": med(lambda s: s["requests"] * s["size"] * 8 / s["seconds"] / 1e6),
            "proxy_cpu_us_per_request": med(lambda s: s["proxy_cpu_s"] / s["requests"] * 1e6),
            "cores_cpu_us_per_request": med(lambda s: s["cores_cpu_s"] / s["requests"] * 1e6),
        })
print(f'{"size":>9} {"proxy":<7}{"requests/s":>12}{"Mbit/s":>10}{"proxy us CPU/req":>18}{"2 cores us/req":>16}')
for r in rows:
    print(f'{r["size"]:>9} {r["proxy"]:<7}{r["requests_per_s"]:>12.0f}{r["goodput_mbit_s"]:>10.1f}'
          f'{r["proxy_cpu_us_per_request"]:>18.1f}{r["cores_cpu_us_per_request"]:>16.1f}')
for size in sorted({r["size"] for r in rows}):
    o = next((r for r in rows if (r["proxy"], r["size"]) == ("oxnet", size)), None)
    d = next((r for r in rows if (r["proxy"], r["size"]) == ("dante", size)), None)
    if o and d and d["requests_per_s"] > 0 and o["proxy_cpu_us_per_request"] > 0:
        print(f'size {size}: oxnet/dante requests/s {o["requests_per_s"] / d["requests_per_s"]:.2f}x, '
              f'proxy CPU per request dante/oxnet {d["proxy_cpu_us_per_request"] / o["proxy_cpu_us_per_request"]:.2f}x (above 1: oxnet cheaper)')
json.dump({"benchmark": "socks4", "runs": runs, "concurrency": conc,
           "oxnet": "conf/socks4.click on TAP", "dante": "danted 1.4 -N 1 over veth",
           "client": "curl -Z --parallel-max N --socks4, Connection: close, one new proxied connection per request",
           "medians": rows, "samples": samples}, open(f"{out}/socks4.json", "w"), indent=1)
sizes = sorted({r["size"] for r in rows})
top = max(r["requests_per_s"] for r in rows) * 1.15 or 1
w, h, x0, y0 = 120 + 140 * len(sizes), 340, 70, 280
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
       '<text x="10" y="16">SOCKS4 CONNECT + one object per connection: requests/s (bars), proxy CPU us/request (labels)</text>',
       f'<line x1="{x0}" y1="{y0}" x2="{w - 20}" y2="{y0}" stroke="black"/>',
       f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="40" stroke="black"/>']
for t in range(5):
    svg.append(f'<text x="5" y="{y0 - 240 * t / 4 + 4:.1f}">{top * t / 4:.0f}</text>')
colour = {"oxnet": "#2b5797", "dante": "#999999"}
for g, size in enumerate(sizes):
    for k, proxy in enumerate(PROXIES):
        r = next((r for r in rows if (r["proxy"], r["size"]) == (proxy, size)), None)
        if not r:
            continue
        bh = 240 * r["requests_per_s"] / top
        x = x0 + 20 + g * 140 + k * 55
        svg.append(f'<rect x="{x}" y="{y0 - bh:.1f}" width="45" height="{bh:.1f}" fill="{colour[proxy]}"/>')
        svg.append(f'<text x="{x}" y="{y0 - bh - 4:.1f}" font-size="10">{r["proxy_cpu_us_per_request"]:.0f}us</text>')
        svg.append(f'<text x="{x}" y="{y0 + 14}" font-size="10">{proxy}</text>')
    svg.append(f'<text x="{x0 + 20 + g * 140}" y="{y0 + 30}">{size} B</text>')
svg.append('</svg>')
open(f"{out}/socks4.svg", "w").write("\n".join(svg) + "\n")
print(f"socks4.sh: wrote {out}/socks4.json and {out}/socks4.svg", file=sys.stderr)
PY
