#!/usr/bin/env bash
# Runs every test. Installs what the tests need first (as root, with
# apt-get, idempotently). As root, it also runs the huge-page tests a
# second time with huge pages reserved, and gives them back afterwards.
# Ends with one line "N passed, M failed" over all runs.
set -euo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
trap 'rm -f "$log"' EXIT

bash scripts/install-deps.sh
cargo build --workspace --all-targets
cargo test --workspace --all-targets 2>&1 | tee -a "$log"

nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
if [ "$(id -u)" -eq 0 ] && [ -w "$nr" ]; then
  before=$(cat "$nr")
  trap 'echo "$before" > "$nr"; rm -f "$log"' EXIT
  echo "$((before + 128))" > "$nr"
  free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
  if [ "$free" -ge 64 ]; then
    echo "test.sh: huge-page tests with $free free 2 MiB pages (back to $before afterwards)"
    OXNET_EXPECT_HUGEPAGES=1 cargo test --workspace --all-targets huge 2>&1 | tee -a "$log"
  else
    echo "test.sh: could reserve only $free huge pages; the huge-page DMA path was not exercised" >&2
  fi
fi

awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
