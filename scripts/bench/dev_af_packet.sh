#!/usr/bin/env bash
# af_packet:IF against DPDK 22.11's net_af_packet PMD, same machine, same
# run, same veth pair, 64-byte frames (60 bytes + the CRC the wire would
# add), the measured side on one core (CPU 0).
#
#   tx: the measured side sends as fast as it can on veth x0
#       (oxnet pktgen af_packet:x0 / testpmd txonly on net_af_packet);
#       rate = frames the peer x1 received (its kernel counter,
#       /sys/class/net/x1/statistics/rx_packets), over the steady seconds.
#       A veth hands each frame to its peer in the sender's own system
#       call, so all the kernel's work counts on the measured core too.
#   rx: a generator on CPU 1 (oxnet pktgen af_packet:x1, 60-byte frames,
#       as fast as it can) feeds x0; the measured side receives and drops
#       on CPU 0 (oxnet stats af_packet:x0 / testpmd rxonly); rate =
#       frames it received, from its own count, over the run time.
#
# Runs alternate (oxnet, DPDK, oxnet, ...), REPEATS each; medians. Every
# interface lives in a network namespace this script makes and removes.
# Prints a table and one JSON line:
#   {"kind":"af_packet","oxnet_mpps":TX,"dpdk_mpps":TX,"ratio":TX ratio,
#    "rx_oxnet_mpps":...,"rx_dpdk_mpps":...,"rx_ratio":...}
#
#   scripts/bench/dev_af_packet.sh [REPEATS] [SECONDS]   (default 3, 5)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEATS=${1:-3}
SECONDS_PER_RUN=${2:-5}
TARGET=${CARGO_TARGET_DIR:-target}
[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces, AF_PACKET)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing: run scripts/install-deps.sh" >&2; exit 1; }
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release -q -p oxnet --bin oxnet
OXNET="$(pwd)/$TARGET/release/oxnet"
NS="oxb-afp-$$"
WORK=$(mktemp -d /tmp/oxnet-afp-bench.XXXXXX)
GEN_PID=""
cleanup() {
  [ -n "$GEN_PID" ] && kill "$GEN_PID" 2>/dev/null && wait "$GEN_PID" 2>/dev/null || true
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS"
in_ns() { ip netns exec "$NS" "$@"; }
in_ns sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6'
ip -n "$NS" link set lo up
ip -n "$NS" link add x0 type veth peer name x1
ip -n "$NS" link set x0 up
ip -n "$NS" link set x1 up

counter() { in_ns cat "/sys/class/net/$1/statistics/$2"; }

# peer_rate IFACE: Mpps received by IFACE between second 1 and SECONDS-1.
peer_rate() {
  local a b
  sleep 1
  a=$(counter "$1" rx_packets)
  sleep $((SECONDS_PER_RUN - 2))
  b=$(counter "$1" rx_packets)
  awk -v a="$a" -v b="$b" -v t=$((SECONDS_PER_RUN - 2)) 'BEGIN{printf "%.3f", (b-a)/t/1e6}'
}

testpmd() {
  local mode=$1 name=$2
  timeout -s INT "$SECONDS_PER_RUN" ip netns exec "$NS" taskset -c 0 dpdk-testpmd --lcores '0@0,1@0' --no-pci \
    --no-huge -m 512 --file-prefix="oxb-afp-$name-$$" \
    --vdev "net_af_packet0,iface=x0,qpairs=1,qdisc_bypass=1" \
    -- --forward-mode="$mode" -a --stats-period 1 --txpkts=60 --total-num-mbufs=16384 \
    >"$WORK/$name.log" 2>&1 || true
}

# tx_once SIDE REP -> Mpps at the peer
tx_once() {
  local side=$1 name="tx-$1-$2" rate
  if [ "$side" = oxnet ]; then
    timeout -s INT "$SECONDS_PER_RUN" ip netns exec "$NS" taskset -c 0 "$OXNET" pktgen af_packet:x0 --size 60 \
      --quiet >"$WORK/$name.log" 2>&1 &
  else
    testpmd txonly "$name" &
  fi
  local pid=$!
  rate=$(peer_rate x1)
  wait "$pid" || true
  echo "$rate"
}

start_generator() {
  ip netns exec "$NS" taskset -c 1 "$OXNET" pktgen af_packet:x1 --size 60 --quiet >"$WORK/gen.log" 2>&1 &
  GEN_PID=$!
  sleep 1
}

stop_generator() {
  kill -INT "$GEN_PID" 2>/dev/null || true
  wait "$GEN_PID" 2>/dev/null || true
  GEN_PID=""
}

# rx_once SIDE REP -> Mpps the measured side received (its own count)
rx_once() {
  local side=$1 name="rx-$1-$2"
  start_generator
  if [ "$side" = oxnet ]; then
    timeout -s INT $((SECONDS_PER_RUN + 10)) ip netns exec "$NS" taskset -c 0 "$OXNET" stats af_packet:x0 \
      --seconds "$SECONDS_PER_RUN" --json >"$WORK/$name.log" 2>&1 || true
    stop_generator
    awk -v t="$SECONDS_PER_RUN" 'match($0, /^\{"device".*"rx_packets":[0-9]+/) {
        s = substr($0, RSTART, RLENGTH); sub(/.*"rx_packets":/, "", s); printf "%.3f", s/t/1e6 }' "$WORK/$name.log"
  else
    testpmd rxonly "$name"
    stop_generator
    # testpmd's per-second "Rx-pps:" lines; the median of the steady ones.
    grep -a "Rx-pps:" "$WORK/$name.log" | awk '{for(i=1;i<NF;i++) if($i=="Rx-pps:") print $(i+1)}' \
      | tail -n +2 | awk '$1>0' | sort -n \
      | awk '{a[NR]=$1} END{if(NR==0) print "0.000"; else printf "%.3f", (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1e6}'
  fi
}

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END{printf "%.3f", (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

tx_ours=(); tx_dpdk=(); rx_ours=(); rx_dpdk=()
for rep in $(seq "$REPEATS"); do
  tx_ours+=("$(tx_once oxnet "$rep")")
  tx_dpdk+=("$(tx_once dpdk "$rep")")
  rx_ours+=("$(rx_once oxnet "$rep")")
  rx_dpdk+=("$(rx_once dpdk "$rep")")
  echo "run $rep: tx oxnet ${tx_ours[-1]} dpdk ${tx_dpdk[-1]} | rx oxnet ${rx_ours[-1]} dpdk ${rx_dpdk[-1]} Mpps" >&2
done
TO=$(echo "${tx_ours[*]}" | median); TD=$(echo "${tx_dpdk[*]}" | median)
RO=$(echo "${rx_ours[*]}" | median); RD=$(echo "${rx_dpdk[*]}" | median)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.3f", a/b; else print "null" }'; }
printf "%-10s %12s %12s %8s\n" "direction" "oxnet Mpps" "DPDK Mpps" "ratio"
printf "%-10s %12s %12s %8s\n" "tx" "$TO" "$TD" "$(ratio "$TO" "$TD")"
printf "%-10s %12s %12s %8s\n" "rx" "$RO" "$RD" "$(ratio "$RO" "$RD")"
JSON="{\"kind\":\"af_packet\",\"oxnet_mpps\":$TO,\"dpdk_mpps\":$TD,\"ratio\":$(ratio "$TO" "$TD"),\"rx_oxnet_mpps\":$RO,\"rx_dpdk_mpps\":$RD,\"rx_ratio\":$(ratio "$RO" "$RD"),\"repeats\":$REPEATS,\"seconds\":$SECONDS_PER_RUN}"
mkdir -p target/bench
echo "$JSON" > target/bench/dev_af_packet.json
echo "$JSON"
