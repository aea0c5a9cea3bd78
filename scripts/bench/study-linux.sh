#!/usr/bin/env bash
# Linux beside oxnet (issue 13, item 3; the paper's Figure 8): memcached
# 1.6 (`-t 1`) and `oxnet memcached af_xdp:...` on the same veth
# topology, the same load generator with the ETC workload (`-K fb_key -V
# fb_value -i fb_ia -u 0.25`, keys uniform over RECORDS records), p99
# latency against offered QPS for both, CPU counted on both cores.
#
# It is memcached.sh (docs/apps.md) with OX_DEV=af_xdp and WORKLOAD=etc
# and the study's defaults: 1024 connections (both servers get -c 4096:
# memcached's default 1024 refuses the 1024th), 256 MiB, 100 000
# records, 10 s per rate from 25 K to 250 K. Per server: the fill
# (`--loadonly`, not measured), an open loop at each rate of RATES
# (latency from each request's scheduled time, and from its actual send:
# mutilate's view), then FIXED_RATE for CPU per request on both cores
# from /proc/stat. Every GET is checked by the loadgen.
#
#   sudo scripts/bench/study-linux.sh
#   sudo OXNET=target/debug/oxnet SECONDS_PER_RUN=1 RATES="2000 5000" FIXED_RATE=2000 CONNECTIONS=64 scripts/bench/study-linux.sh
#
# Writes ${OXNET_STUDY_OUT:-target/study}/linux.json and linux.svg.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OX_DEV=af_xdp WORKLOAD=etc NAME=linux
export OXNET_BENCH_OUT="${OXNET_STUDY_OUT:-target/study}"
export CONNECTIONS="${CONNECTIONS:-1024}" MAX_CONNS="${MAX_CONNS:-4096}" MEMORY="${MEMORY:-256}"
export RECORDS="${RECORDS:-100000}" SECONDS_PER_RUN="${SECONDS_PER_RUN:-10}"
export RATES="${RATES:-25000 50000 100000 150000 200000 250000}" FIXED_RATE="${FIXED_RATE:-50000}"
exec scripts/bench/memcached.sh
