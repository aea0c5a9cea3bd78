#!/usr/bin/env bash
# Runs every *.pkt under a directory through packetdrill with oxnet's shim
# (crates/oxnet-ffi, `--so_filename`) and prints a pass/fail table; the
# by-hand cross-check of docs/packetdrill.md. It neither fetches nor
# builds packetdrill: give it a packetdrill binary built by hand.
#
#   scripts/packetdrill-check.sh PACKETDRILL DIR [packetdrill flags...]
#
# Per script: the IP version is the script's own `--ip_version=` line,
# else ipv6 for a name starting `ipv6_` (oxnet's convention), else ipv4;
# the stack's address is the script's `--local_ip=`, else 192.168.0.1 /
# fd3d:fa7b:d17d::1 (the shim's defaults), given to both packetdrill
# (--local_ip) and the shim (--so_flags=local4=/local6=).
# packetdrill runs in the script's directory and runs the script's
# backtick shell commands: check what a script runs before running it.
#
# Environment: SO (the shim, default target/debug/liboxnet_ffi.so, built
# if missing), TIMEOUT (seconds per script, default 120), LOGDIR (each
# script's output, default a new temporary directory).
# Prints `PASS name` or `FAIL name: first error line`, then the counts;
# exits 1 if any script failed.
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: $0 PACKETDRILL DIR [packetdrill flags...]" >&2
    exit 2
fi
pd=$(realpath "$1")
dir=$(realpath "$2")
shift 2
cd "$(dirname "$0")/.."
so=${SO:-$PWD/target/debug/liboxnet_ffi.so}
if [ ! -e "$so" ]; then
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build -q -p oxnet-ffi || exit 2
fi
so=$(realpath "$so")
logdir=${LOGDIR:-$(mktemp -d)}
mkdir -p "$logdir"
pass=0
fail=0
while IFS= read -r f; do
    name=${f#"$dir"/}
    ver=$(sed -n 's/^--ip_version=\([a-z0-9-]*\).*/\1/p' "$f" | head -1)
    if [ -z "$ver" ]; then
        case $(basename "$f") in
            ipv6_*) ver=ipv6 ;;
            *) ver=ipv4 ;;
        esac
    fi
    local=$(sed -n 's/^--local_ip=\([0-9a-fA-F.:]*\).*/\1/p' "$f" | head -1)
    if [ "$ver" = ipv6 ]; then
        local=${local:-fd3d:fa7b:d17d::1}
        flags=local6=$local
    else
        local=${local:-192.168.0.1}
        flags=local4=$local
    fi
    log=$logdir/$(echo "$name" | tr / _).log
    (cd "$(dirname "$f")" && timeout "${TIMEOUT:-120}" "$pd" --so_filename="$so" --so_flags="$flags" \
        --ip_version="$ver" --local_ip="$local" "$@" "$f") >"$log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then
        pass=$((pass + 1))
        echo "PASS $name"
    else
        fail=$((fail + 1))
        why=$(grep -m1 -E 'error|assert|timed out|Segmentation' "$log" || true)
        [ $rc -eq 124 ] && why="timed out after ${TIMEOUT:-120} s"
        echo "FAIL $name: ${why:-exit $rc}"
    fi
done < <(find "$dir" -name '*.pkt' | sort)
echo "passed $pass, failed $fail (logs in $logdir)"
[ $fail -eq 0 ]
