#!/usr/bin/env bash
# Installs what the tests and benchmarks need, idempotently: a second run
# with everything present calls no package manager at all.
#   tcpdump   - reads back our pcap files (independent reader)
#   valgrind  - callgrind counts instructions for `oxnet bench`
#   setpriv   - (util-linux) runs the not-root test as user nobody
#   dpdk-dev  - dpdk-testpmd (Debian ships it in dpdk-dev, not dpdk): the
#               vhost-user backend of the vhost-user tests
#               and both sides of scripts/vhost/bench.sh
set -euo pipefail

# The QEMU test rig (QEMU 10 from bookworm-backports, busybox, the guest
# kernel) has its own script; it too returns at once when all is there.
bash "$(dirname "$0")/rig/install-deps.sh"

need=()
command -v tcpdump >/dev/null 2>&1 || [ -x /usr/bin/tcpdump ] || [ -x /usr/sbin/tcpdump ] || need+=(tcpdump)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v dpdk-testpmd >/dev/null 2>&1 || need+=(dpdk-dev)

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
