#!/usr/bin/env bash
# Installs what the tests and benchmarks need, idempotently: a second run
# with everything present calls no package manager at all.
#   tcpdump   - reads back our pcap files (independent reader)
#   valgrind  - callgrind counts instructions for `oxnet bench`
#   setpriv   - (util-linux) runs the not-root test as user nobody
#   dpdk-dev  - dpdk-testpmd (Debian ships it in dpdk-dev, not dpdk): the
#               vhost-user backend of the vhost-user tests
#               and both sides of scripts/vhost/bench.sh
#   openvswitch-switch-dpdk - Open vSwitch with DPDK (ovs-vswitchd-dpdk),
#               the back-end of tests/ovs.rs.
#   iproute2, iputils-ping, arping, strace, ethtool - the kernel-device
#               tests (tap, af_packet, af_xdp): namespaces and veth pairs,
#               Linux peers, system-call counts, offload switches
#   socat     - a Linux TCP client and server for the stack's interop
#               tests (tests/stack_echo.rs, tests/stack_interop.rs)
#   python3   - Python's sockets as Linux peers in tests/stack_interop.rs
#   libxdp1, libbpf1 - af_xdp (loaded at run time with dlopen, so that
#               oxnet builds and runs without them); libxdp1 ships the
#               default redirect program xsk_def_xdp_prog.o The tests start their own
#               ovsdb-server and ovs-vswitchd; the system service is not
#               wanted: installing is done with services kept from starting
#               (policy-rc.d), and the units the package enabled are
#               disabled again, so the machine runs no Open vSwitch.
#   The servers' tests (issue 12) and their benchmarks, each a real
#   client or the program oxnet's server replaces (services kept from
#   starting and disabled, as Open vSwitch's; tests start their own):
#   openssl         - s_client, the TLS echo's Linux client
#   curl            - the HTTP cache's and the SOCKS4 proxy's client
#   apache2-utils   - ab, a keep-alive HTTP load
#   wrk             - a keep-alive HTTP load (benchmarks and tests)
#   nginx-light     - a Linux HTTP server: the SOCKS4 proxy's destination
#                     and the HTTP cache's benchmark anchor
#   dante-server    - sockd, the SOCKS4 benchmark's anchor
#   memcached       - memcached 1.6: the conformance tests' reference
#                     and the key-value benchmark's anchor
#   libmemcached-tools - memccapable, memccp, memccat, memcrm, memcstat,
#                     memcslap
#   python3-pymemcache - pymemcache for Debian's /usr/bin/python3
set -euo pipefail

# The QEMU test rig (QEMU 10 from bookworm-backports, busybox, the guest
# kernel) has its own script; it too returns at once when all is there.
bash "$(dirname "$0")/rig/install-deps.sh"

need=()
command -v tcpdump >/dev/null 2>&1 || [ -x /usr/bin/tcpdump ] || [ -x /usr/sbin/tcpdump ] || need+=(tcpdump)
command -v valgrind >/dev/null 2>&1 || need+=(valgrind)
command -v setpriv >/dev/null 2>&1 || need+=(util-linux)
command -v dpdk-testpmd >/dev/null 2>&1 || need+=(dpdk-dev)
[ -x /usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk ] || need+=(openvswitch-switch-dpdk)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] || need+=(iproute2)
command -v ping >/dev/null 2>&1 || [ -x /usr/bin/ping ] || need+=(iputils-ping)
command -v arping >/dev/null 2>&1 || [ -x /usr/sbin/arping ] || need+=(arping)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v ethtool >/dev/null 2>&1 || [ -x /usr/sbin/ethtool ] || [ -x /sbin/ethtool ] || need+=(ethtool)
command -v socat >/dev/null 2>&1 || need+=(socat)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v sysctl >/dev/null 2>&1 || [ -x /usr/sbin/sysctl ] || [ -x /sbin/sysctl ] || need+=(procps)
ls /usr/lib/*/libxdp.so.1 >/dev/null 2>&1 && [ -e /usr/lib/x86_64-linux-gnu/bpf/xsk_def_xdp_prog.o -o -n "$(ls /usr/lib/*/bpf/xsk_def_xdp_prog.o 2>/dev/null)" ] || need+=(libxdp1)
ls /usr/lib/*/libbpf.so.1 >/dev/null 2>&1 || need+=(libbpf1)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v ab >/dev/null 2>&1 || need+=(apache2-utils)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
[ -x /usr/sbin/nginx ] || need+=(nginx-light)
[ -x /usr/sbin/danted ] || need+=(dante-server)
[ -x /usr/bin/memcached ] || need+=(memcached)
command -v memccapable >/dev/null 2>&1 || need+=(libmemcached-tools)
[ -d /usr/lib/python3/dist-packages/pymemcache ] || need+=(python3-pymemcache)

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

# Keep package scripts from starting services (invoke-rc.d asks
# policy-rc.d; exit 101 = "action forbidden"), unless the machine already
# has a policy of its own.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  own_policy=1
  trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
if [ "$own_policy" -eq 1 ]; then
  rm -f "$policy"
  trap - EXIT
fi

# Open vSwitch just installed: its units were enabled by the package;
# disable them (and stop them, should anything have started them).
if [[ " ${need[*]} " == *" openvswitch-switch-dpdk "* ]]; then
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now openvswitch-switch.service ovs-vswitchd.service ovsdb-server.service \
      >/dev/null 2>&1 || true
  elif command -v update-rc.d >/dev/null 2>&1; then
    update-rc.d openvswitch-switch disable >/dev/null 2>&1 || true
  fi
fi

# The servers just installed: the packages enabled their units; disable
# them (and stop them, should anything have started them). Tests start
# their own instances on their own ports, in their own namespaces.
for unit in nginx danted memcached; do
  case " ${need[*]} " in
    *" nginx-light "*|*" dante-server "*|*" memcached "*) ;;
    *) continue ;;
  esac
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    systemctl disable --now "$unit.service" >/dev/null 2>&1 || true
  elif command -v update-rc.d >/dev/null 2>&1; then
    update-rc.d "$unit" disable >/dev/null 2>&1 || true
  fi
done
