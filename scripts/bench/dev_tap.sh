#!/usr/bin/env bash
# Mpps of 64-byte frames (60 bytes + the 4-byte CRC the wire would add)
# sent into a TAP device on one core: oxnet's `tap:` driver (`oxnet pktgen
# tap:NAME --size 60`) beside DPDK's net_tap PMD (`dpdk-testpmd --vdev
# net_tap0,iface=NAME --forward-mode=txonly --txpkts=60`), alternating
# runs, medians. Both write one frame per write(2)/writev(2) into a TAP the
# tool creates itself in a network namespace made (and removed) here; the
# kernel side has no address and IPv6 off, so Linux drops the frames after
# receiving them (the same kernel work for both).
#
# Transmit only: a TAP's receive rate is set by whatever feeds the kernel
# side, not by the driver.
#
#   scripts/bench/dev_tap.sh                  # 3 runs of 5 s each per tool
#   RUNS=5 SECONDS_PER_RUN=10 scripts/bench/dev_tap.sh
#
# Needs root, dpdk-testpmd (scripts/install-deps.sh), no huge pages
# (both run with plain memory: testpmd --no-huge). Prints one JSON line:
#   {"kind":"tap","oxnet_mpps":...,"dpdk_mpps":...,"ratio":...}
set -euo pipefail
cd "$(dirname "$0")/../.."

RUNS="${RUNS:-3}"
SECS="${SECONDS_PER_RUN:-5}"
CORE="${CORE:-1}"          # the forwarding core for both tools
MAIN_CORE="${MAIN_CORE:-0}" # testpmd's (idle) main lcore

[ "$(id -u)" -eq 0 ] || { echo "dev_tap.sh: needs root (TAP devices, namespaces)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "dev_tap.sh: dpdk-testpmd missing (scripts/install-deps.sh)" >&2; exit 1; }

cargo build --release -p oxnet >&2
OXNET="${CARGO_TARGET_DIR:-target}/release/oxnet"

NS="oxbtap$$"
TMP="$(mktemp -d)"
cleanup() { ip netns del "$NS" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
ip netns add "$NS"
ip netns exec "$NS" sysctl -qw net.ipv6.conf.default.disable_ipv6=1 net.ipv6.conf.all.disable_ipv6=1

oxnet_run() {
    ip netns exec "$NS" timeout $((SECS + 20)) taskset -c "$CORE" \
        "$OXNET" pktgen tap:oxb0 --size 60 --seconds "$SECS" --json --quiet 2>"$TMP/oxnet.err" | tail -n 1 |
        python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); print(j["devices"][0]["tx_packets"]/j["seconds"]/1e6)'
}

dpdk_run() {
    # Tx-pps of the per-second statistics, the first one (start-up) left
    # out, median of the rest.
    ip netns exec "$NS" timeout -s INT $((SECS + 2)) dpdk-testpmd -l "$MAIN_CORE,$CORE" --no-huge -m 256 \
        --no-shconf --file-prefix "oxbtap$$" --no-pci --vdev "net_tap0,iface=dpb0" -- \
        --forward-mode=txonly --txpkts=60 --auto-start --stats-period=1 --nb-cores=1 \
        --total-num-mbufs=16384 >"$TMP/dpdk.out" 2>&1 || true
    grep -o 'Tx-pps: *[0-9]*' "$TMP/dpdk.out" | awk '{print $2}' | tail -n +2 | sort -n |
        awk '{a[NR]=$1} END {if (NR==0) {print "nan"; exit} print a[int((NR+1)/2)]/1e6}'
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

: >"$TMP/oxnet.mpps"; : >"$TMP/dpdk.mpps"
for i in $(seq "$RUNS"); do
    o="$(oxnet_run)"; echo "$o" >>"$TMP/oxnet.mpps"
    d="$(dpdk_run)"; echo "$d" >>"$TMP/dpdk.mpps"
    echo "run $i: oxnet $o Mpps, dpdk net_tap $d Mpps" >&2
done
O="$(median <"$TMP/oxnet.mpps")"
D="$(median <"$TMP/dpdk.mpps")"
python3 -c "import json; o=float('$O'); d=float('$D'); print(json.dumps({'kind':'tap','oxnet_mpps':round(o,3),'dpdk_mpps':round(d,3),'ratio':round(o/d,3) if d else None}))"
