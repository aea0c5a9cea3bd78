#!/usr/bin/env bash
# ClickNF's Figure 7 without I/O (issue 10): the cost of an element.
#
#   InfiniteSource(LENGTH 64, LIMIT L, BURST 32, STOP true, TIMESTAMP false)
#     -> N x Null -> d :: Discard
#
# for N = 0 1 5 10 20 50 100 150, one core, `oxnet run` (release build),
# RUNS runs per N taken in turn over all N (alternating), medians. Every
# packet is a buffer of the router's pool with its 64 bytes written, freed
# at Discard; each run checks that the source made exactly LIMIT packets
# and that d.count equals it (nothing lost, nothing counted twice).
#
#   scripts/bench/figure7.sh [RUNS=5] [LIMIT=20000000]
#
# Prints a table (Mpps and ns per packet per N, and the cost of one Null),
# writes target/bench/figure7.json and figure7.svg. The FastClick column
# holds the figures the issue gives for FastClick (userlevel, batching,
# one core, same configuration) on this kind of machine; FastClick is not
# built or run here.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-5}
LIMIT=${2:-20000000}
NS=(0 1 5 10 20 50 100 150)
out="${OXNET_BENCH_OUT:-target/bench}"
mkdir -p "$out"
cargo build --release -q -p oxnet
OXNET="${CARGO_TARGET_DIR:-target}/release/oxnet"

declare -A fastclick=([0]=133 [10]=127 [50]=85 [150]=44)

config() { # config N
    local nulls=""
    for ((i = 0; i < $1; i++)); do nulls+=" -> Null"; done
    echo "s :: InfiniteSource(LENGTH 64, LIMIT $LIMIT, BURST 32, STOP true, TIMESTAMP false)$nulls -> d :: Discard"
}

declare -A samples
for ((r = 1; r <= RUNS; r++)); do
    for n in "${NS[@]}"; do
        err=$(mktemp)
        res=$(taskset -c 0 "$OXNET" run -t -e "$(config "$n")" -h s.count -h d.count 2>"$err")
        secs=$(awk '/ real$/ {print $1}' "$err")
        rm -f "$err"
        made=$(printf '%s\n' "$res" | awk '$0 == "s.count:" {getline; print}')
        got=$(printf '%s\n' "$res" | awk '$0 == "d.count:" {getline; print}')
        if [ "$made" != "$LIMIT" ] || [ "$got" != "$LIMIT" ]; then
            echo "figure7.sh: N=$n: source made '$made', Discard counted '$got', expected $LIMIT" >&2
            exit 1
        fi
        samples[$n]+="$(awk -v s="$secs" -v l="$LIMIT" 'BEGIN {printf "%.3f", l / s / 1e6}') "
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

printf '%5s %12s %12s %16s %20s\n' "N" "oxnet Mpps" "ns/packet" "FastClick Mpps" "oxnet / FastClick"
json="["
first=1
for n in "${NS[@]}"; do
    m=$(printf '%s' "${samples[$n]}" | median)
    ns=$(awk -v m="$m" 'BEGIN {printf "%.2f", 1000 / m}')
    fc=${fastclick[$n]:-}
    ratio=$( [ -n "$fc" ] && awk -v m="$m" -v f="$fc" 'BEGIN {printf "%.2f", m / f}' || echo "")
    printf '%5s %12s %12s %16s %20s\n' "$n" "$m" "$ns" "${fc:--}" "${ratio:--}"
    [ $first -eq 1 ] || json+=","
    first=0
    json+="{\"n\":$n,\"oxnet_mpps\":$m,\"ns_per_packet\":$ns,\"fastclick_mpps\":${fc:-null},\"samples\":[$(printf '%s' "${samples[$n]}" | sed 's/ $//; s/ /,/g')]}"
done
json+="]"
printf '%s\n' "$json" > "$out/figure7.json"
m0=$(printf '%s' "${samples[0]}" | median)
m150=$(printf '%s' "${samples[150]}" | median)
awk -v a="$m0" -v b="$m150" 'BEGIN {printf "one Null: %.2f ns per packet ((1/Mpps at N=150 - 1/Mpps at N=0) / 150)\n", (1000 / b - 1000 / a) / 150}'

# The figure: Mpps against N, oxnet (line) and FastClick's figures (points).
printf '%s\n' "$json" | tr '{' '\n' | awk -F'[:,]' '
/"n"/ { n[++k] = $2; m[k] = $4; f[k] = $8 }
END {
    w = 560; h = 320; x0 = 60; y0 = 270; sx = 460 / 150; max = 160; sy = 240 / max
    printf "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", w, h
    printf "<text x=\"10\" y=\"16\">Mpps against N (elements in the chain), one core: oxnet (line), FastClick figures (squares)</text>\n"
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0 + 460, y0
    printf "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", x0, y0, x0, y0 - 240
    for (t = 0; t <= max; t += 40) printf "<text x=\"20\" y=\"%.1f\">%d</text>\n", y0 - t * sy + 4, t
    path = ""
    for (i = 1; i <= k; i++) {
        x = x0 + n[i] * sx; y = y0 - m[i] * sy
        path = path (i == 1 ? "M" : " L") sprintf("%.1f %.1f", x, y)
        printf "<text x=\"%.1f\" y=\"%d\">%d</text>\n", x - 6, y0 + 16, n[i]
        if (f[i] != "null") printf "<rect x=\"%.1f\" y=\"%.1f\" width=\"6\" height=\"6\" fill=\"#999\"/>\n", x - 3, y0 - f[i] * sy - 3
    }
    printf "<path d=\"%s\" fill=\"none\" stroke=\"#2b5797\" stroke-width=\"2\"/>\n</svg>\n", path
}' > "$out/figure7.svg"
echo "figure7.sh: wrote $out/figure7.json and $out/figure7.svg" >&2
