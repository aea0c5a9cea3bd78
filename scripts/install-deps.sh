#!/usr/bin/env bash
# Installs what the tests and benchmarks need, idempotently: a second run
# with everything present calls no package manager at all.
#   tcpdump   - reads back our pcap files (independent reader)
#   valgrind  - callgrind counts instructions for `oxnet bench`
#   setpriv   - (util-linux) runs the not-root test as user nobody
set -euo pipefail

need=()
command -v tcpdump >/dev/null 2>&1 || [ -x /usr/bin/tcpdump ] || [ -x /usr/sbin/tcpdump ] || need+=(tcpdump)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: need ${need[*]}; run this script as root (it uses apt-get)" >&2
  exit 1
fi
echo "install-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
