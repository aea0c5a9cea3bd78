#!/usr/bin/env bash
# Runs every test. Installs what the tests need first (as root, with
# apt-get, idempotently). As root, it also runs the huge-page tests a
# second time with huge pages reserved, and gives them back afterwards.
# Ends with one line "N passed, M failed" over all runs.
set -euo pipefail
cd "$(dirname "$0")/.."

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Seconds since the previous mark, printed at the end (the CI budget).
timing=""
mark=$SECONDS
lap() { timing+=$(printf '%-44s %5d s' "$1" $((SECONDS - mark)))$'\n'; mark=$SECONDS; }

bash scripts/install-deps.sh
lap "install-deps.sh"
cargo build --workspace --all-targets
lap "cargo build"
cargo test --workspace --all-targets --no-fail-fast 2>&1 | tee -a "$log"
lap "cargo test (all)"

nr=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
if [ "$(id -u)" -eq 0 ] && [ -w "$nr" ]; then
  before=$(cat "$nr")
  trap 'echo "$before" > "$nr"; rm -f "$log"' EXIT
  echo "$((before + 128))" > "$nr"
  free=$(awk '/HugePages_Free/ {print $2}' /proc/meminfo)
  if [ "$free" -ge 64 ]; then
    echo "test.sh: huge-page tests with $free free 2 MiB pages (back to $before afterwards)"
    OXNET_EXPECT_HUGEPAGES=1 cargo test --workspace --all-targets huge 2>&1 | tee -a "$log"
    lap "cargo test huge (with huge pages)"
  else
    echo "test.sh: could reserve only $free huge pages; the huge-page DMA path was not exercised" >&2
  fi
fi

# Time per group: each test executable's own "finished in" figure.
echo "test.sh: time per group"
awk '/^ *Running / { name = $NF; sub(/.*\//, "", name); sub(/-[0-9a-f]+\)$/, "", name); name = name " (" $2 ($2 == "unittests" ? " " $3 : "") ")" } /^test result:/ { t = $NF; sub(/s$/, "", t); if (t + 0 >= 0.5) printf "  %-42s %7.1f s\n", name, t }' "$log"
printf '%s' "$timing" | sed 's/^/  /'

awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "%d passed, %d failed\n", p, f }' "$log"
