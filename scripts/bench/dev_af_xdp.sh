#!/usr/bin/env bash
# af_xdp:IF against DPDK 22.11's net_af_xdp PMD, same machine, same run,
# same veth pair, 64-byte frames (60 bytes + the CRC the wire would add),
# the measured side on one core (CPU 0), copy mode (veth has no zero-copy),
# for each XDP attach mode (generic, native).
#
#   tx: the measured side sends as fast as it can on veth x0
#       (oxnet pktgen af_xdp:x0,attach=MODE,bind=copy / testpmd txonly on
#       net_af_xdp); rate = frames the peer x1 received (its kernel
#       counter), over the steady seconds. In copy mode the kernel sends
#       from within the sendto() kick, so its work counts on CPU 0 too.
#   rx: a generator on CPU 1 (oxnet pktgen af_xdp:x1, as fast as it can)
#       feeds x0; the measured side receives and drops on CPU 0 (oxnet
#       stats af_xdp:x0,attach=MODE / testpmd rxonly); rate = frames it
#       received, by its own count, over the run. The XDP program and the
#       copy into the UMEM run in the softirq of the *sending* CPU (a veth
#       delivers in the sender's context): rx mostly measures how fast the
#       kernel feeds the socket, which both sides share.
#
# DPDK 22.11's net_af_xdp has no attach-mode option: it lets libxdp pick,
# which on veth is native (and it refuses to start when a generic program
# is already there). So the generic line has no DPDK number (null).
#
# Runs alternate (oxnet, DPDK, oxnet, ...), REPEATS each; medians. Every
# interface lives in a network namespace made and removed here; no XDP
# program is left (checked at the end). Prints a table on stderr and one
# JSON line per attach mode:
#   {"kind":"af_xdp_native","oxnet_mpps":TX,"dpdk_mpps":TX,"ratio":...,
#    "rx_oxnet_mpps":...,"rx_dpdk_mpps":...,"rx_ratio":...}
#
#   scripts/bench/dev_af_xdp.sh [REPEATS] [SECONDS]   (default 3, 5)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEATS=${1:-3}
SECONDS_PER_RUN=${2:-5}
TARGET=${CARGO_TARGET_DIR:-target}
[ "$(id -u)" -eq 0 ] || { echo "needs root (network namespaces, XDP)" >&2; exit 1; }
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing: run scripts/install-deps.sh" >&2; exit 1; }
CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release -q -p oxnet --bin oxnet
OXNET="$(pwd)/$TARGET/release/oxnet"
NS="oxb-axdp-$$"
WORK=$(mktemp -d /tmp/oxnet-axdp-bench.XXXXXX)
GEN_PID=""
cleanup() {
  if [ -n "$GEN_PID" ]; then kill -INT "$GEN_PID" 2>/dev/null || true; wait "$GEN_PID" 2>/dev/null || true; fi
  ip netns del "$NS" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

ip netns add "$NS"
in_ns() { ip netns exec "$NS" "$@"; }
in_ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
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
    --no-huge -m 512 --file-prefix="oxb-axdp-$name-$$" \
    --vdev "net_af_xdp0,iface=x0,start_queue=0,queue_count=1,force_copy=1" \
    -- --forward-mode="$mode" -a --stats-period 1 --txpkts=60 --total-num-mbufs=16384 \
    >"$WORK/$name.log" 2>&1 || true
}

# tx_once SIDE ATTACH REP -> Mpps at the peer
tx_once() {
  local side=$1 attach=$2 name="tx-$1-$2-$3" rate pid
  if [ "$side" = oxnet ]; then
    timeout -s INT "$SECONDS_PER_RUN" ip netns exec "$NS" taskset -c 0 "$OXNET" pktgen \
      "af_xdp:x0,attach=$attach,bind=copy" --size 60 --quiet >"$WORK/$name.log" 2>&1 &
  else
    testpmd txonly "$name" &
  fi
  pid=$!
  rate=$(peer_rate x1)
  wait "$pid" || true
  echo "$rate"
}

start_generator() {
  ip netns exec "$NS" taskset -c 1 "$OXNET" pktgen af_xdp:x1,attach=generic,bind=copy --size 60 --quiet \
    >"$WORK/gen.log" 2>&1 &
  GEN_PID=$!
  sleep 1
}

stop_generator() {
  kill -INT "$GEN_PID" 2>/dev/null || true
  wait "$GEN_PID" 2>/dev/null || true
  GEN_PID=""
}

# rx_once SIDE ATTACH REP -> Mpps the measured side received (its own count)
rx_once() {
  local side=$1 attach=$2 name="rx-$1-$2-$3"
  if [ "$side" = oxnet ]; then
    # The flood first; frames that arrive before the receiver's program is
    # attached go to the kernel stack and are not counted by either side.
    start_generator
    timeout -s INT $((SECONDS_PER_RUN + 10)) ip netns exec "$NS" taskset -c 0 "$OXNET" stats \
      "af_xdp:x0,attach=$attach,bind=copy" --seconds "$SECONDS_PER_RUN" --json >"$WORK/$name.log" 2>&1 || true
    stop_generator
    awk -v t="$SECONDS_PER_RUN" 'match($0, /"rx_packets":[0-9]+/) && !done {
        s = substr($0, RSTART, RLENGTH); sub(/.*:/, "", s); printf "%.3f", s/t/1e6; done=1 }' "$WORK/$name.log"
  else
    start_generator
    testpmd rxonly "$name"
    stop_generator
    # testpmd's per-second "Rx-pps:" lines; the median of the non-zero ones.
    grep -a "Rx-pps:" "$WORK/$name.log" | awk '{for(i=1;i<NF;i++) if($i=="Rx-pps:") print $(i+1)}' \
      | awk '$1>0' | sort -n \
      | awk '{a[NR]=$1} END{if(NR==0) print "0.000"; else printf "%.3f", (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)/1e6}'
  fi
}

median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -n | awk '{a[NR]=$1} END{if(NR==0) print "null"; else printf "%.3f", (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b=="null" || b+0==0) print "null"; else printf "%.2f", a/b }'; }

printf '%-16s %-4s %10s %10s %7s\n' mode dir oxnet dpdk ratio >&2
for attach in generic native; do
  tx_ox=""; tx_dp=""; rx_ox=""; rx_dp=""
  for rep in $(seq "$REPEATS"); do
    tx_ox="$tx_ox $(tx_once oxnet "$attach" "$rep")"
    [ "$attach" = native ] && tx_dp="$tx_dp $(tx_once dpdk "$attach" "$rep")"
    rx_ox="$rx_ox $(rx_once oxnet "$attach" "$rep")"
    [ "$attach" = native ] && rx_dp="$rx_dp $(rx_once dpdk "$attach" "$rep")"
  done
  echo "af_xdp $attach runs: tx oxnet [$tx_ox ] dpdk [$tx_dp ]; rx oxnet [$rx_ox ] dpdk [$rx_dp ]" >&2
  mtx_ox=$(echo "$tx_ox" | median); mtx_dp=$(echo "$tx_dp" | median)
  mrx_ox=$(echo "$rx_ox" | median); mrx_dp=$(echo "$rx_dp" | median)
  printf '%-16s %-4s %10s %10s %7s\n' "af_xdp_$attach" tx "$mtx_ox" "$mtx_dp" "$(ratio "$mtx_ox" "$mtx_dp")" >&2
  printf '%-16s %-4s %10s %10s %7s\n' "af_xdp_$attach" rx "$mrx_ox" "$mrx_dp" "$(ratio "$mrx_ox" "$mrx_dp")" >&2
  echo "{\"kind\":\"af_xdp_$attach\",\"oxnet_mpps\":$mtx_ox,\"dpdk_mpps\":$mtx_dp,\"ratio\":$(ratio "$mtx_ox" "$mtx_dp"),\"rx_oxnet_mpps\":$mrx_ox,\"rx_dpdk_mpps\":$mrx_dp,\"rx_ratio\":$(ratio "$mrx_ox" "$mrx_dp")}"
done

left=$(ip -n "$NS" link show | grep -c ' xdp' || true)
[ "$left" -eq 0 ] || echo "dev_af_xdp.sh: warning: $left XDP program(s) left in $NS (removed with it)" >&2
