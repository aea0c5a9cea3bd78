#!/usr/bin/env bash
# Benchmark (not a test): memif transmit rate, 64-byte frames (60 bytes +
# CRC), one core, oxnet vs DPDK's net_memif on the same socket.
#
# The receiving end is the same for both: dpdk-testpmd, net_memif server,
# rxonly, on CPU 1. The sender runs on CPU 0 as a memif client:
#   oxnet: oxnet pktgen memif:SOCK,role=client --size 60
#   dpdk:  dpdk-testpmd --vdev net_memif,role=client,... txonly --txpkts=60
# Runs alternate (oxnet, dpdk, oxnet, dpdk, ...); each result is the
# median over runs. oxnet's rate is tx_packets / seconds from its JSON;
# testpmd's is the median of its per-second Tx-pps lines (first and last
# second dropped). Also measured: oxnet to oxnet (pktgen client → pcap
# server, received packets / seconds).
#
# Usage: scripts/bench/dev_memif.sh [RUNS=3] [SECONDS=4]
# Prints one JSON line:
# {"kind":"memif","oxnet_mpps":..,"dpdk_mpps":..,"ratio":..,"oxnet_to_oxnet_mpps":..}
set -euo pipefail
RUNS=${1:-3}
SECS=${2:-4}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OXNET=${OXNET:-$ROOT/target/release/oxnet}
[ -x "$OXNET" ] || (cd "$ROOT" && cargo build --release -p oxnet >&2)
WORK=$(mktemp -d /tmp/oxnet-bench-memif.XXXXXX)
SOCK=$WORK/memif.sock
SINK_PID=""
cleanup() {
    [ -n "$SINK_PID" ] && kill -TERM "$SINK_PID" 2>/dev/null && wait "$SINK_PID" 2>/dev/null || true
    rm -rf "$WORK" /var/run/dpdk/oxbm-* 2>/dev/null || true
}
trap cleanup EXIT

testpmd() { # PREFIX CPU ROLE MODE SECONDS LOG [extra testpmd args]
    local prefix=$1 cpu=$2 role=$3 mode=$4 secs=$5 log=$6
    shift 6
    timeout -s INT "$secs" taskset -c "$cpu" dpdk-testpmd --lcores "0@$cpu,1@$cpu" --no-pci --no-huge -m 512 \
        --vdev "net_memif0,role=$role,socket=$SOCK,socket-abstract=no" --file-prefix="$prefix" \
        -- -a --no-mlockall --total-num-mbufs=16384 --stats-period=1 --forward-mode="$mode" "$@" \
        >"$log" 2>&1 || true
}

start_sink() { # a testpmd rxonly server on CPU 1
    rm -f "$SOCK"
    testpmd oxbm-sink 1 server rxonly $((SECS + 20)) "$WORK/sink.log" &
    SINK_PID=$!
    for _ in $(seq 200); do
        grep -q "start packet forwarding" "$WORK/sink.log" 2>/dev/null && [ -S "$SOCK" ] && return
        sleep 0.05
    done
    echo "testpmd sink did not start:" >&2
    cat "$WORK/sink.log" >&2
    exit 1
}

stop_sink() {
    kill -INT "$SINK_PID" 2>/dev/null || true
    wait "$SINK_PID" 2>/dev/null || true
    SINK_PID=""
}

json_field() { # JSON KEY -> number
    sed -n "s/.*\"$2\":\([0-9.]*\).*/\1/p" <<<"$1" | head -1
}

oxnet_run() {
    start_sink
    local out
    out=$(timeout $((SECS + 15)) taskset -c 0 "$OXNET" pktgen "memif:$SOCK,role=client" --size 60 \
        --seconds "$SECS" --json --quiet 2>/dev/null | tail -1)
    stop_sink
    python3 -c "print('%.3f' % ($(json_field "$out" tx_packets) / $(json_field "$out" seconds) / 1e6))"
}

dpdk_run() {
    start_sink
    testpmd oxbm-src 0 client txonly $((SECS + 2)) "$WORK/src.log" --txpkts=60
    stop_sink
    # Median of the per-second Tx-pps lines, first and last dropped.
    grep -a "Tx-pps:" "$WORK/src.log" | awk '{print $2}' | sed '1d;$d' | sort -n |
        awk '{a[NR]=$1} END {if (NR==0) print 0; else printf "%.3f\n", a[int((NR+1)/2)]/1e6}'
}

oxnet_oxnet_run() {
    rm -f "$SOCK"
    timeout $((SECS + 20)) taskset -c 1 "$OXNET" pcap "memif:$SOCK,role=server" /dev/null \
        --seconds $((SECS + 2)) --json --quiet >"$WORK/pcap.json" 2>/dev/null &
    local pcap=$!
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
    local g
    g=$(timeout $((SECS + 15)) taskset -c 0 "$OXNET" pktgen "memif:$SOCK,role=client" --size 60 \
        --seconds "$SECS" --json --quiet 2>/dev/null | tail -1)
    wait "$pcap" || true
    # What the receiver got, over the sender's time.
    local p
    p=$(tail -1 "$WORK/pcap.json")
    python3 -c "print('%.3f' % ($(json_field "$p" rx_packets) / $(json_field "$g" seconds) / 1e6))"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

OX=() DP=() OO=()
for _ in $(seq "$RUNS"); do
    OX+=("$(oxnet_run)")
    DP+=("$(dpdk_run)")
    OO+=("$(oxnet_oxnet_run)")
    echo "oxnet ${OX[-1]}  dpdk ${DP[-1]}  oxnet->oxnet ${OO[-1]} Mpps" >&2
done
ox=$(printf '%s\n' "${OX[@]}" | median)
dp=$(printf '%s\n' "${DP[@]}" | median)
oo=$(printf '%s\n' "${OO[@]}" | median)
ratio=$(python3 -c "print('%.2f' % ($ox / $dp if $dp > 0 else 0))")
echo "{\"kind\":\"memif\",\"oxnet_mpps\":$ox,\"dpdk_mpps\":$dp,\"ratio\":$ratio,\"oxnet_to_oxnet_mpps\":$oo}"
