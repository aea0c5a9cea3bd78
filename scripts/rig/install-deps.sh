#!/usr/bin/env bash
# Installs what the QEMU test rig (crates/oxnet-rig) needs, idempotently.
# Run as root. When everything is present it calls no package manager at all.
#
#   qemu-system-x86  from <codename>-backports (QEMU >= 8: has `igb` and
#                    `intel-iommu`; bookworm itself ships 7.2)
#   busybox-static   the guest's /init shell and tools
#   xz-utils         decompresses the kernel's .ko.xz modules for the initramfs
#   cpio             (the rig writes its cpio itself; handy for inspecting one)
#   libc6-dev        libc.a, for Rust's -C target-feature=+crt-static builds
#   kmod             depmod, only when the guest kernel is extracted
#   the guest kernel Debian's linux-image-amd64, NOT installed into the
#                    host's /boot: its concrete package is downloaded and
#                    extracted into $OXNET_RIG_CACHE/kernel/<version>/
#
# Cache: $OXNET_RIG_CACHE, default /var/cache/oxnet-rig (the library reads the
# same variable). Layout:
#   kernel/current -> <version>
#   kernel/<version>/vmlinuz, config, modules/ (= lib/modules/<version>)
set -euo pipefail

cache=${OXNET_RIG_CACHE:-/var/cache/oxnet-rig}
qemu=/usr/bin/qemu-system-x86_64
libc_a=/usr/lib/x86_64-linux-gnu/libc.a

installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]; }
qemu_major() { "$qemu" --version 2>/dev/null | sed -n 's/^QEMU emulator version \([0-9]*\)\..*/\1/p'; }

need=()
need_qemu=0
if [ ! -x "$qemu" ] || [ "$(qemu_major)" -lt 8 ] 2>/dev/null || [ -z "$(qemu_major)" ]; then
  need_qemu=1
fi
installed busybox-static || need+=(busybox-static)
command -v xz >/dev/null 2>&1 || need+=(xz-utils)
command -v cpio >/dev/null 2>&1 || need+=(cpio)
[ -f "$libc_a" ] || need+=(libc6-dev)
need_kernel=0
[ -f "$cache/kernel/current/vmlinuz" ] && [ -f "$cache/kernel/current/modules/modules.dep" ] || need_kernel=1
# depmod (kmod) writes the guest kernel's modules.dep when it is extracted.
if [ "$need_kernel" -eq 1 ] && ! PATH="$PATH:/sbin:/usr/sbin" command -v depmod >/dev/null 2>&1; then
  need+=(kmod)
fi

if [ "$need_qemu" -eq 0 ] && [ ${#need[@]} -eq 0 ] && [ "$need_kernel" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "rig/install-deps: missing:" \
    "$([ $need_qemu -eq 1 ] && echo 'qemu-system-x86 (>= 8)')" "${need[*]}" \
    "$([ $need_kernel -eq 1 ] && echo "guest kernel in $cache")" \
    "; run this script as root (it uses apt-get)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive

# The backports suite, on the same mirror as the main suite.
. /etc/os-release
codename=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
backports="$codename-backports"
added_source=0
if [ "$need_qemu" -eq 1 ] && ! grep -rqs -- "$backports" /etc/apt/sources.list /etc/apt/sources.list.d/; then
  uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  if [ -z "$uri" ]; then
    uri=$(awk '$1 == "deb" && $0 !~ /security/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  fi
  [ -n "$uri" ] || { echo "rig/install-deps: cannot find the Debian mirror URI in /etc/apt" >&2; exit 1; }
  echo "rig/install-deps: adding $backports to /etc/apt/sources.list.d/$backports.sources"
  cat > "/etc/apt/sources.list.d/$backports.sources" <<SRC
Types: deb
URIs: $uri
Suites: $backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  added_source=1
fi

echo "rig/install-deps: apt-get update"
apt-get update -qq

if [ "$need_qemu" -eq 1 ]; then
  echo "rig/install-deps: installing qemu-system-x86 from $backports"
  apt-get install -y -qq --no-install-recommends -t "$backports" qemu-system-x86 >/dev/null
  major=$(qemu_major)
  if [ -z "$major" ] || [ "$major" -lt 8 ]; then
    echo "rig/install-deps: qemu-system-x86_64 is version '$major', need >= 8 (igb, intel-iommu)" >&2
    apt-cache policy qemu-system-x86 >&2
    exit 1
  fi
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "rig/install-deps: installing ${need[*]}"
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [ "$need_kernel" -eq 1 ]; then
  # linux-image-amd64 is a metapackage; fetch the concrete image it points to.
  pkg=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
  [ -n "$pkg" ] || { echo "rig/install-deps: linux-image-amd64 depends on no linux-image-<version>" >&2; exit 1; }
  echo "rig/install-deps: downloading $pkg (guest kernel; not installed on the host)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  chown _apt "$work" 2>/dev/null || true
  (cd "$work" && apt-get download -qq "$pkg")
  dpkg-deb -x "$work"/"$pkg"_*.deb "$work/root"
  kver=$(ls "$work/root/lib/modules")
  dest="$cache/kernel/$kver"
  rm -rf "$dest"
  mkdir -p "$dest"
  cp "$work/root/boot/vmlinuz-$kver" "$dest/vmlinuz"
  cp "$work/root/boot/config-$kver" "$dest/config"
  mv "$work/root/lib/modules/$kver" "$dest/modules"
  # The package ships no modules.dep (depmod runs at install time): make it.
  if [ ! -f "$dest/modules/modules.dep" ]; then
    mkdir -p "$work/depmod/lib/modules"
    ln -s "$dest/modules" "$work/depmod/lib/modules/$kver"
    PATH="$PATH:/sbin:/usr/sbin" depmod -b "$work/depmod" "$kver"
  fi
  [ -f "$dest/modules/modules.dep" ] || { echo "rig/install-deps: no modules.dep for $kver (install kmod for depmod)" >&2; exit 1; }
  ln -sfn "$kver" "$cache/kernel/current"
  echo "rig/install-deps: guest kernel $kver in $dest ($(du -sh "$dest" | cut -f1))"
fi
