#!/usr/bin/env bash
# The device benchmark of issue 9: Mpps with 64-byte frames on one core for
# each Linux-facing device kind (tap, af_packet, af_xdp in generic and
# native attach, memif), each beside DPDK's own PMD for the same kind
# (dpdk-testpmd with net_tap, net_af_packet, net_af_xdp, net_memif) on the
# same TAP, veth or socket, measured in the same run. Not a test: numbers,
# not verdicts.
#
#   scripts/bench/devices.sh              # every kind; results in target/bench/
#   scripts/bench/devices.sh memif tap    # some kinds
#   scripts/bench/devices.sh --from target/bench/devices.json
#                                         # table and figure again, no runs
#
# Each kind has its own script, scripts/bench/dev_<kind>.sh, which builds
# its namespaces/veths/TAPs (removed afterwards), alternates oxnet and
# testpmd runs, takes medians and prints JSON lines
#   {"kind":"...","oxnet_mpps":X,"dpdk_mpps":Y,"ratio":X/Y,...}
# This script collects them into target/bench/devices.json, prints a table
# and draws target/bench/devices.svg (a bar pair per kind).
# Needs root (namespaces, XDP) and scripts/install-deps.sh's packages.
set -euo pipefail
cd "$(dirname "$0")/../.."

out="${OXNET_BENCH_OUT:-target/bench}"
mkdir -p "$out"
kinds=("$@")
if [ ${#kinds[@]} -eq 0 ] || [ "${1:-}" = "--from" ]; then
    kinds=(af_packet af_xdp tap memif)
fi

json="$out/devices.json"
: > "$json.lines"
if [ "${1:-}" = "--from" ]; then
    grep '^{"kind"' "${2:?--from needs a JSON file}" | sed 's/,$//' > "$json.lines.from"
    mv "$json.lines.from" "$json.lines"
    kinds=()
else
    cargo build --release -p oxnet >&2
fi
for kind in "${kinds[@]}"; do
    script="scripts/bench/dev_$kind.sh"
    if [ ! -x "$script" ] && [ ! -f "$script" ]; then
        echo "devices.sh: no $script; skipping $kind" >&2
        continue
    fi
    echo "devices.sh: $kind ..." >&2
    bash "$script" | grep '^{"kind"' >> "$json.lines" || echo "devices.sh: $script failed" >&2
done

# JSON: an array of the lines.
{
    echo "["
    sed '$!s/$/,/' "$json.lines"
    echo "]"
} > "$json"

field() { # field NAME LINE
    printf '%s\n' "$2" | sed -n "s/.*\"$1\": *\"\{0,1\}\([^\",}]*\).*/\1/p"
}

printf '%-24s %12s %12s %8s\n' "device" "oxnet Mpps" "DPDK Mpps" "ratio"
while IFS= read -r line; do
    printf '%-24s %12s %12s %8s\n' "$(field kind "$line")" "$(field oxnet_mpps "$line")" \
        "$(field dpdk_mpps "$line")" "$(field ratio "$line")"
done < "$json.lines"

# The figure: for each kind a pair of bars, oxnet and DPDK's PMD.
svg="$out/devices.svg"
awk -v n="$(wc -l < "$json.lines")" '
function val(name, line,   r) {
    if (match(line, "\"" name "\": *\"?[^\",}]*")) {
        r = substr(line, RSTART, RLENGTH); sub(/.*: *"?/, "", r); return r
    }
    return ""
}
{ kind[NR] = val("kind", $0); ox[NR] = val("oxnet_mpps", $0) + 0; dp[NR] = val("dpdk_mpps", $0) + 0
  if (ox[NR] > max) max = ox[NR]; if (dp[NR] > max) max = dp[NR] }
END {
    if (max == 0) max = 1
    w = 120 * n + 120; h = 320; base = 260; scale = 200 / max
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h
    printf "<text x=\"10\" y=\"20\">Mpps, 64-byte frames, one core: oxnet (dark) and DPDK PMD (light)</text>\n"
    printf "<line x1=\"60\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", base, w - 20, base
    for (i = 1; i <= NR; i++) {
        x = 80 + (i - 1) * 120
        printf "<rect x=\"%d\" y=\"%.1f\" width=\"40\" height=\"%.1f\" fill=\"#2b5797\"/>\n", x, base - ox[i] * scale, ox[i] * scale
        printf "<rect x=\"%d\" y=\"%.1f\" width=\"40\" height=\"%.1f\" fill=\"#9fb6d9\"/>\n", x + 42, base - dp[i] * scale, dp[i] * scale
        printf "<text x=\"%d\" y=\"%.1f\">%.2f</text>\n", x, base - ox[i] * scale - 4, ox[i]
        printf "<text x=\"%d\" y=\"%.1f\">%.2f</text>\n", x + 42, base - dp[i] * scale - 4, dp[i]
        printf "<text x=\"%d\" y=\"%d\">%s</text>\n", x, base + 18, kind[i]
    }
    printf "</svg>\n"
}' "$json.lines" > "$svg"
rm -f "$json.lines"
echo "devices.sh: wrote $json and $svg" >&2
