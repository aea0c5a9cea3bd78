#!/usr/bin/env bash
# Our virtio driver over vhost-user against DPDK 22.11's own virtio-user
# PMD, same machine, same run, same DPDK vhost back-end (testpmd,
# net_vhost0) on CPU 1; the measured side on CPU 0. 64-byte frames.
#
#   tx: back-end in rxonly mode; rate = packets/s the back-end receives
#   rx: back-end in txonly mode; rate = packets/s the back-end manages to
#       put into the measured side's receive ring
# Both rates are read from the back-end's own per-second statistics
# (testpmd --stats-period 1), median of the steady seconds (the first two
# are dropped), so ours and DPDK's are measured the same way. Medians over
# REPEATS runs. Prints a table, then `ratio_tx=X ratio_rx=Y`; writes JSON.
#
#   scripts/vhost/bench.sh [REPEATS] [SECONDS]     (default 3, 6)
set -euo pipefail
cd "$(dirname "$0")/../.."
REPEATS=${1:-3}
SECONDS_PER_RUN=${2:-6}
TARGET=${CARGO_TARGET_DIR:-target}
OUT_DIR=target/bench
mkdir -p "$OUT_DIR"
command -v dpdk-testpmd >/dev/null || { echo "dpdk-testpmd missing: run scripts/install-deps.sh" >&2; exit 1; }
cargo build --release -q -p oxnet --bin oxnet-vhost-bench
BENCH="$TARGET/release/oxnet-vhost-bench"
WORK=$(mktemp -d /tmp/oxnet-vhost-bench.XXXXXX)
BACKEND_PID=""
cleanup() {
  [ -n "$BACKEND_PID" ] && kill "$BACKEND_PID" 2>/dev/null && wait "$BACKEND_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# start_backend NAME MODE: testpmd vhost back-end on CPU 1 (main and
# forwarding lcore both there); --no-mlockall, or it would populate all of
# a front-end's shared memory on SET_MEM_TABLE.
start_backend() {
  local name=$1 mode=$2
  rm -f "$WORK/$name.sock"
  dpdk-testpmd --lcores '0@1,1@1' --no-pci --no-huge -m 512 \
    --vdev "net_vhost0,iface=$WORK/$name.sock,queues=1" --file-prefix="oxb-$name-$$" \
    -- --forward-mode="$mode" -a --stats-period 1 --no-mlockall --total-num-mbufs=16384 \
    >"$WORK/$name.backend.log" 2>&1 &
  BACKEND_PID=$!
  for _ in $(seq 200); do [ -S "$WORK/$name.sock" ] && return 0; sleep 0.05; done
  echo "back-end $name made no socket" >&2; cat "$WORK/$name.backend.log" >&2; exit 1
}

stop_backend() {
  kill "$BACKEND_PID" 2>/dev/null || true
  wait "$BACKEND_PID" 2>/dev/null || true
  BACKEND_PID=""
}

# backend_rate LOG FIELD: median of the per-second Rx-pps / Tx-pps lines,
# without the first two seconds and the zero ones after the run ended.
backend_rate() {
  grep -a "$2-pps:" "$1" | awk -v f="$2-pps:" '{for(i=1;i<NF;i++) if($i==f) print $(i+1)}' \
    | tail -n +3 | awk '$1>0' | sort -n | awk '{a[NR]=$1} END{if(NR==0) print 0; else print (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'
}

# run_once SIDE DIRECTION REP -> Mpps measured at the back-end
run_once() {
  local side=$1 dir=$2 rep=$3 name="$1-$2-$3" mode field
  if [ "$dir" = tx ]; then mode=rxonly; field=Rx; else mode=txonly; field=Tx; fi
  start_backend "$name" "$mode"
  if [ "$side" = oxnet ]; then
    taskset -c 0 "$BENCH" "$dir" "vhost-user:$WORK/$name.sock" "$SECONDS_PER_RUN" >"$WORK/$name.ours.json" 2>"$WORK/$name.err" \
      || { cat "$WORK/$name.err" >&2; exit 1; }
  else
    local fwd=txonly; [ "$dir" = rx ] && fwd=rxonly
    timeout -s INT $((SECONDS_PER_RUN + 2)) dpdk-testpmd --lcores '0@0,1@0' --no-pci --no-huge -m 512 \
      --single-file-segments --file-prefix="oxb-vu-$name-$$" \
      --vdev "net_virtio_user0,path=$WORK/$name.sock,queues=1" \
      -- --forward-mode=$fwd -a --stats-period 1 --no-mlockall --total-num-mbufs=16384 \
      >"$WORK/$name.dpdk.log" 2>&1 || true
  fi
  stop_backend
  awk -v r="$(backend_rate "$WORK/$name.backend.log" $field)" 'BEGIN{printf "%.3f", r/1e6}'
}

median() { tr ' ' '\n' | grep -v '^$' | sort -n | awk '{a[NR]=$1} END{print (NR%2? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

declare -A RUNS
for rep in $(seq "$REPEATS"); do
  for dir in tx rx; do
    for side in oxnet dpdk; do
      m=$(run_once "$side" "$dir" "$rep")
      RUNS[$side-$dir]="${RUNS[$side-$dir]:-} $m"
      echo "run $rep: $side $dir $m Mpps" >&2
    done
  done
done

printf '%-10s %-34s %-34s %s\n' direction "oxnet (Mpps, runs)" "DPDK virtio-user (Mpps, runs)" "ratio"
json_rows=""
for dir in tx rx; do
  ours=$(echo "${RUNS[oxnet-$dir]}" | median); theirs=$(echo "${RUNS[dpdk-$dir]}" | median)
  ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN{ if (b>0) printf "%.2f", a/b; else print "nan"}')
  printf '%-10s %-34s %-34s %s\n' "$dir" "$ours (${RUNS[oxnet-$dir]# })" "$theirs (${RUNS[dpdk-$dir]# })" "$ratio"
  eval "ratio_$dir=$ratio"
  json_rows="$json_rows{\"direction\":\"$dir\",\"oxnet_mpps\":$ours,\"dpdk_mpps\":$theirs,\"ratio\":$ratio,\"oxnet_runs\":[$(echo ${RUNS[oxnet-$dir]} | tr ' ' ',')],\"dpdk_runs\":[$(echo ${RUNS[dpdk-$dir]} | tr ' ' ',')]},"
done
echo "{\"benchmark\":\"vhost-user\",\"frame_bytes\":64,\"repeats\":$REPEATS,\"seconds\":$SECONDS_PER_RUN,\"rows\":[${json_rows%,}]}" >"$OUT_DIR/vhost.json"
echo "ratio_tx=$ratio_tx ratio_rx=$ratio_rx"
