#!/usr/bin/env bash
# The HTTP cache benchmark (issue 12; ClickNF Figure 10's server side):
# requests/s and goodput against object size, 64 B to 8 KiB, of
# oxnet's HTTPCache (conf/http-cache.click) against nginx serving the
# same files, with the same client (wrk, keep-alive, one thread).
#
#   oxnet : conf/http-cache.click run by `oxnet run` in namespace C on a
#           TAP device (`tap:`), the files preloaded from DIR; wrk in C
#           talks to it through the TAP's kernel side.
#   nginx : Debian's nginx-light, one worker, in the foreground, in
#           namespace S, reached from wrk in C over a veth pair (as
#           echo.sh's Linux servers), sendfile on, access log off.
#
# Server on core SERVER_CORE, wrk on CLIENT_CORE. As echo.sh does (with
# the helpers of scripts/bench/cores.sh), this also counts busy CPU
# seconds per request on both cores from /proc/stat and the server
# process's own CPU; other processes add to the first: run it on a
# quiet machine.
#
#   sudo scripts/bench/http.sh                          # 3 runs x 5 s per size
#   sudo RUNS=1 SECONDS_PER_RUN=1 SIZES="64 8192" scripts/bench/http.sh   # a quick look
#   PROFILE=debug ...   # the debug build (a check that the script works; not numbers)
#   sudo TLS=1 scripts/bench/http.sh   # HTTPS: conf/https-cache.click (TLSServer
#                                      # in front of the cache) against nginx with
#                                      # ssl, the same certificate (`oxnet cert`,
#                                      # ECDSA P-256), TLS 1.3, wrk over https
#
# Writes target/bench/http.json (every sample and the medians) and
# target/bench/http.svg (requests/s and goodput against size); with
# TLS=1, http-tls.json and http-tls.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
SECS="${SECONDS_PER_RUN:-5}"
CONNS="${CONNECTIONS:-16}"
SIZES="${SIZES:-64 256 1024 4096 8192}"
CLIENT_CORE="${CLIENT_CORE:-0}"
SERVER_CORE="${SERVER_CORE:-1}"
out="${OXNET_BENCH_OUT:-target/bench}"
TLS="${TLS:-0}"
if [ "$TLS" = 1 ]; then SCHEME=https NAME=http-tls; else SCHEME=http NAME=http; fi

[ "$(id -u)" -eq 0 ] || { echo "http.sh: needs root (TAP, namespaces)" >&2; exit 1; }
command -v wrk >/dev/null && command -v nginx >/dev/null ||
    { echo "http.sh: needs wrk and nginx (scripts/install-deps.sh)" >&2; exit 1; }
mkdir -p "$out"
PROFILE="${PROFILE:-release}"
if [ "$PROFILE" = release ]; then cargo build --release -q -p oxnet >&2; else cargo build -q -p oxnet >&2; fi
OXNET="$(pwd)/${CARGO_TARGET_DIR:-target}/$PROFILE/oxnet"

# NSC, NSS, TMP, SERVER_PID and their cleanup; the veth pair oxhc0/oxhs0.
. scripts/bench/topology.sh
topology h 10.87.0
chmod 755 "$TMP"
OX_SPEC="tap:oxht0,ip=10.86.0.1/24"
OX_HOST=10.86.0.2
NGINX_HOST=10.87.0.2

# The objects: SIZE bytes each, the same files for both servers.
mkdir -p "$TMP/www"
for s in $SIZES; do head -c "$s" /dev/urandom >"$TMP/www/obj-$s"; done
chmod -R a+rX "$TMP/www"
mkdir -p "$TMP/nginx"
cat >"$TMP/nginx/nginx.conf" <<EOF
daemon off; master_process off; worker_processes 1; pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log;
events { worker_connections 1024; }
http {
  access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000000; keepalive_timeout 60;
  client_body_temp_path $TMP/nginx/body; proxy_temp_path $TMP/nginx/proxy; fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi; scgi_temp_path $TMP/nginx/scgi;
  server { listen $NGINX_HOST:80; root $TMP/www; }
  server { listen $NGINX_HOST:443 ssl; root $TMP/www; ssl_certificate $TMP/cert.pem; ssl_certificate_key $TMP/key.pem;
           ssl_protocols TLSv1.3; ssl_session_tickets on; }
}
EOF
# One certificate for both servers' addresses (ECDSA P-256).
"$OXNET" cert --out "$TMP" --name "$OX_HOST" --name "$NGINX_HOST" >/dev/null

# cores_busy, proc_cpu, HZ: the CPU accounting echo.sh uses.
. scripts/bench/cores.sh

wait_ready() { # wait_ready HOST
    local i
    for ((i = 0; i < 100; i++)); do
        if ip netns exec "$NSC" curl -sf --cacert "$TMP/cert.pem" -o /dev/null -m 1 "$SCHEME://$1/obj-${SIZES%% *}"; then
            return 0
        fi
        kill -0 "$SERVER_PID" 2>/dev/null || { echo "http.sh: the server ended:" >&2; cat "$TMP/server.err" >&2; exit 1; }
        sleep 0.2
    done
    echo "http.sh: no answer from $1 after 20 s" >&2
    cat "$TMP/server.err" >&2
    exit 1
}

start_server() { # start_server oxnet|nginx
    if [ "$1" = oxnet ]; then
        local conf=conf/http-cache.click tls=()
        [ "$TLS" = 1 ] && conf=conf/https-cache.click tls=("CERT=$TMP/cert.pem" "KEY=$TMP/key.pem" "VERSIONS=1.3")
        ip netns exec "$NSC" taskset -c "$SERVER_CORE" "$OXNET" run "$conf" \
            "DEV=$OX_SPEC" IP=$OX_HOST "DIR=$TMP/www" "${tls[@]}" \
            -h cache.requests -h cache.errors >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        wait_ready "$OX_HOST"
    else
        ip netns exec "$NSS" taskset -c "$SERVER_CORE" nginx -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" \
            >"$TMP/server.out" 2>"$TMP/server.err" &
        SERVER_PID=$!
        wait_ready "$NGINX_HOST"
    fi
}

stop_server() {
    if [ "$1" = oxnet ]; then kill -INT "$SERVER_PID"; else kill -TERM "$SERVER_PID"; fi
    wait "$SERVER_PID" || true
    SERVER_PID=""
}

measure() { # measure SERVER RUN SIZE HOST
    local before_cores after_cores before_server after_server wrk_out
    before_cores=$(cores_busy)
    before_server=$(proc_cpu "$SERVER_PID")
    wrk_out=$(ip netns exec "$NSC" taskset -c "$CLIENT_CORE" wrk -t 1 -c "$CONNS" -d "${SECS}s" --latency "$SCHEME://$4/obj-$3" 2>&1) || true
    after_cores=$(cores_busy)
    after_server=$(proc_cpu "$SERVER_PID")
    printf '%s' "$wrk_out" | python3 -c '
import json, re, sys
text = sys.stdin.read()
server, run, size, cores, srv, hz = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", text)
if not m:
    sys.exit("http.sh: %s size %d: wrk printed no count:\n%s" % (server, size, text))
requests, secs = int(m.group(1)), float(m.group(2)) * (60 if m.group(3) == "m" else 1)
def lat(p):
    m = re.search(r"^\s+%s%%\s+([\d.]+)(us|ms|s)" % p, text, re.M)
    return float(m.group(1)) * {"us": 1, "ms": 1e3, "s": 1e6}[m.group(2)] if m else None
non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
print(json.dumps({"server": server, "run": run, "size": size, "requests": requests, "seconds": secs,
    "requests_per_s": requests / secs, "goodput_mbit_s": requests * size * 8 / secs / 1e6,
    "p50_us": lat(50), "p99_us": lat(99),
    "errors": (int(non2xx.group(1)) if non2xx else 0) + (sum(map(int, errors.groups())) if errors else 0),
    "cores_cpu_s": cores / hz, "server_cpu_s": srv / hz}))
' "$1" "$2" "$3" $((after_cores - before_cores)) $((after_server - before_server)) "$HZ" >>"$TMP/samples.jsonl"
    echo "http.sh: run $2 $1 $3 B: $(tail -1 "$TMP/samples.jsonl" | python3 -c 'import json,sys; j=json.load(sys.stdin); print("%.0f req/s, %.1f Mbit/s, %d errors" % (j["requests_per_s"], j["goodput_mbit_s"], j["errors"]))')" >&2
}

: >"$TMP/samples.jsonl"
for ((r = 1; r <= RUNS; r++)); do
    for server in oxnet nginx; do
        host=$OX_HOST
        [ "$server" = nginx ] && host=$NGINX_HOST
        start_server "$server"
        for s in $SIZES; do measure "$server" "$r" "$s" "$host"; done
        stop_server "$server"
    done
done

python3 - "$TMP/samples.jsonl" "$out" "$SECS" "$RUNS" "$CONNS" "$NAME" <<'PY'
import json, statistics, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, secs, runs, conns, name = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
tls = name == "http-tls"
SERVERS = ["oxnet", "nginx"]
sizes = sorted({s["size"] for s in samples})
rows = []
for size in sizes:
    for server in SERVERS:
        ss = [s for s in samples if s["server"] == server and s["size"] == size]
        if not ss:
            continue
        med = lambda f: statistics.median(f(s) for s in ss)
        rows.append({"server": server, "size": size, "runs": len(ss),
            "requests_per_s": med(lambda s: s["requests_per_s"]),
            "goodput_mbit_s": med(lambda s: s["goodput_mbit_s"]),
            "cpu_us_per_request_both_cores": med(lambda s: s["cores_cpu_s"] / max(s["requests"], 1) * 1e6),
            "server_cpu_us_per_request": med(lambda s: s["server_cpu_s"] / max(s["requests"], 1) * 1e6),
            "p50_us": med(lambda s: s["p50_us"] or 0), "p99_us": med(lambda s: s["p99_us"] or 0),
            "errors": sum(s["errors"] for s in ss)})
print(f'{"size":>6} {"server":<7}{"req/s":>10}{"Mbit/s":>9}{"us CPU/req (2 cores)":>22}{"server us/req":>15}{"p50 us":>9}{"p99 us":>9}{"errors":>8}')
for r in rows:
    print(f'{r["size"]:>6} {r["server"]:<7}{r["requests_per_s"]:>10.0f}{r["goodput_mbit_s"]:>9.1f}{r["cpu_us_per_request_both_cores"]:>22.2f}'
          f'{r["server_cpu_us_per_request"]:>15.2f}{r["p50_us"]:>9.1f}{r["p99_us"]:>9.1f}{r["errors"]:>8}')
for size in sizes:
    o = next((r for r in rows if (r["server"], r["size"]) == ("oxnet", size)), None)
    n = next((r for r in rows if (r["server"], r["size"]) == ("nginx", size)), None)
    if o and n and n["requests_per_s"] > 0:
        print(f'{size} B: oxnet/nginx requests/s {o["requests_per_s"] / n["requests_per_s"]:.2f}x')
json.dump({"benchmark": name, "seconds_per_run": secs, "runs": runs, "connections": conns,
           "client": f"wrk -t 1 -c {conns} --latency (keep-alive)" + (", https, TLS 1.3" if tls else ""),
           "oxnet": ("conf/https-cache.click" if tls else "conf/http-cache.click") + " on tap (HTTPCache, DIR preloaded)",
           "nginx": "nginx-light, 1 worker, sendfile, over veth" + (", ssl (TLS 1.3), the same certificate" if tls else ""),
           "medians": rows, "samples": samples}, open(f"{out}/{name}.json", "w"), indent=1)

# The figure: two panels, requests/s and goodput against object size.
colour = {"oxnet": "#2b5797", "nginx": "#999999"}
W, H, PW, PH = 760, 330, 300, 220
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<text x="10" y="16">{"HTTPS (TLS 1.3)" if tls else "HTTP"} cache vs nginx, wrk -c {conns} keep-alive: requests/s and goodput against object size</text>']
for p, (key, label, scale) in enumerate([("requests_per_s", "requests/s (k)", 1e3), ("goodput_mbit_s", "goodput (Mbit/s)", 1)]):
    x0, y0 = 60 + p * 380, 40 + PH
    top = max([r[key] for r in rows] + [1]) * 1.1
    svg.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + PW}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y0 - PH}" stroke="black"/>')
    svg.append(f'<text x="{x0}" y="{y0 - PH - 6}">{label}</text>')
    for t in range(5):
        svg.append(f'<text x="{x0 - 45}" y="{y0 - PH * t / 4 + 4:.1f}" font-size="10">{top * t / 4 / scale:.0f}</text>')
    xs = {s: x0 + 20 + i * (PW - 40) / max(len(sizes) - 1, 1) for i, s in enumerate(sizes)}
    for s, x in xs.items():
        svg.append(f'<text x="{x - 10:.1f}" y="{y0 + 14}" font-size="10">{s}</text>')
    svg.append(f'<text x="{x0 + PW / 2 - 40}" y="{y0 + 30}">object bytes</text>')
    for k, server in enumerate(SERVERS):
        pts = [(xs[r["size"]], y0 - PH * r[key] / top) for r in rows if r["server"] == server]
        if pts:
            svg.append(f'<polyline fill="none" stroke="{colour[server]}" stroke-width="2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}"/>')
            svg.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour[server]}"/>' for x, y in pts)
        svg.append(f'<text x="{x0 + 10 + k * 70}" y="{H - 8}" fill="{colour[server]}">{server}</text>')
svg.append('</svg>')
open(f"{out}/{name}.svg", "w").write("\n".join(svg) + "\n")
print(f"http.sh: wrote {out}/{name}.json and {out}/{name}.svg", file=sys.stderr)
PY
