#!/usr/bin/env bash
# Bulk transfer on oxnet's stack against the payload size (ClickNF
# Figures 8b and 8c), and what the offloads save, on the software 82599
# (only the model has TSO, checksum offload and RSC here).
#
#   scripts/bench/bulk.sh                          # every variant and size
#   SIZES="1024 65536" VARIANTS="software tso" BYTES=400000 RUNS=1 scripts/bench/bulk.sh
#
# One `oxnet run` holds two hosts on one stack (as tests/stack_cores.rs):
# host A's TCPEchoClient sends BYTES to host B's TCPEchoServer over two
# wired sim: ports (DMA in the register calls, dma=sync) in WRITE-byte
# writes (the payload size) and checks every byte that comes back. Each
# byte crosses the stack four times: A sends, B receives, B sends, A
# receives, i.e. two one-way transfers.
#
# Variants (the devices' switches, TCPSettings, and what sits between
# IPv4Input and TCPStack):
#   software  nothing offloaded: checksums and segmentation in software
#   checksum  TX_CHECKSUM and RX_CHECKSUM; TCPSettings CHECKSUM_OFFLOAD
#   tso       checksum + the device's TSO (multi); TCPSettings TSO
#   rsc       tso + the device's RSC (coalesced receive)
#   gro       tso + TCPGRO in place of RSC
#
# Every variant runs with delayed ACKs off and ToDevice's TIMEOUT 0
# (each push sent at once): with both hosts in one process over the
# synchronous model nothing else waits, so the router never idles and
# the instruction count is the work of the transfer alone (a 40 ms
# delayed ACK or a 100 us partial-burst wait would add idle polls that
# depend on the wall clock, and valgrind slows that clock 50 times).
#
# Per variant and size:
#   goodput   BYTES * 8 / the client's elapsed_us (the router's clock from
#             its first run to the end of its connection), median of RUNS
#             runs, Mbit/s per direction; the model's work is in it;
#   instr/B   instructions per byte of one one-way transfer (send and
#             receive), the model left out: two runs under valgrind's
#             callgrind, of IR_BYTES and 2 * IR_BYTES, each less the
#             inclusive cost of the model's two register functions
#             (without_model below), and (Ir2 - Ir1) / (2 * IR_BYTES):
#             start-up and the handshake cancel out. Skipped with IR=0 or
#             without valgrind.
# Writes target/bench/bulk.json (every sample, the medians) and
# target/bench/bulk.svg (goodput and instructions per byte against the
# payload size, one line per variant).
set -euo pipefail
cd "$(dirname "$0")/../.."

# OXNET: the binary to run; by default target/release/oxnet, brought up
# to date first.
if [ -z "${OXNET:-}" ]; then
    CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-1} cargo build --release -p oxnet --bin oxnet
    OXNET=target/release/oxnet
fi
SIZES=${SIZES:-64 256 1024 4096 16384 65536}
VARIANTS=${VARIANTS:-software checksum tso rsc gro}
BYTES=${BYTES:-4000000}
RUNS=${RUNS:-3}
IR=${IR:-1}
IR_BYTES=${IR_BYTES:-1000000}
OUT=${OUT:-target/bench}

if [ "$IR" != 0 ] && ! command -v valgrind >/dev/null; then
    echo "bulk.sh: valgrind not found: instructions per byte skipped (IR=0)" >&2
    IR=0
fi
mkdir -p "$OUT"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MODEL_READ='<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::read32'
MODEL_WRITE='<oxnet_sim::world::SimRegisters as oxnet_driver::regs::RegisterAccess>::write32'

# config VARIANT SIZE BYTES NAME: the configuration on stdout.
config() {
    local dev="" tcp="" gro_a="" gro_b=""
    case "$1" in
    software) ;;
    checksum) dev=", TX_CHECKSUM true, RX_CHECKSUM true"; tcp=", CHECKSUM_OFFLOAD true" ;;
    tso) dev=", TX_CHECKSUM true, RX_CHECKSUM true, TSO multi"; tcp=", TSO true" ;;
    rsc) dev=", TX_CHECKSUM true, RX_CHECKSUM true, TSO multi, RSC true"; tcp=", TSO true" ;;
    gro)
        dev=", TX_CHECKSUM true, RX_CHECKSUM true, TSO multi"; tcp=", TSO true"
        gro_a="-> TCPGRO"; gro_b="-> TCPGRO"
        ;;
    *) echo "bulk.sh: unknown variant $1" >&2; exit 1 ;;
    esac
    cat <<EOF
define(\$MACA 02:00:00:00:0a:01, \$MACB 02:00:00:00:0b:02)
FromDevice("sim:$4a,wire=$4b,dma=sync", PROMISC true $dev) -> ca :: Classifier(12/0800, -);
FromDevice("sim:$4b,dma=sync", PROMISC true $dev) -> cb :: Classifier(12/0800, -);
ca[1] -> Discard;
cb[1] -> Discard;
ca[0] -> ipa :: IPv4Input(10.7.0.1);
cb[0] -> ipb :: IPv4Input(10.7.0.2);
TCPSettings(DELAYED_ACK false $tcp);
tcp :: TCPStack;
ipa[0] $gro_a -> tcp;
ipb[0] $gro_b -> tcp;
ipa[1] -> Discard; ipa[2] -> Discard; ipa[3] -> Discard;
ipb[1] -> Discard; ipb[2] -> Discard; ipb[3] -> Discard;
route :: IPClassifier(dst host 10.7.0.2, dst host 10.7.0.1);
tcp -> route;
route[0] -> EtherEncap(0x0800, \$MACA, \$MACB) -> ToDevice("sim:$4a,wire=$4b,dma=sync", TIMEOUT 0 $dev);
route[1] -> EtherEncap(0x0800, \$MACB, \$MACA) -> ToDevice("sim:$4b,dma=sync", TIMEOUT 0 $dev);
AppExecutor;
TCPEchoServer(7, ADDR 10.7.0.2);
cli :: TCPEchoClient(10.7.0.2, PORT 7, SRC 10.7.0.1, CONNECTIONS 1, BYTES $3, WRITE $2, STOP true);
EOF
}

# without_model CALLGRIND_OUT: the instructions of the run less the
# model's: everything the model does happens inside its two register
# functions (#[inline(never)], oxnet-sim's world.rs; with dma=sync the
# DMA too), which call nothing of oxnet's, so their inclusive cost is the
# model's.
without_model() {
    local total model
    total=$(awk '/^(summary|totals):/ { print $2; exit }' "$1")
    # A function is listed once per source file its code came from
    # (inlining): its inclusive cost is the largest of its lines. The
    # binary's name follows in brackets, or not, as callgrind_annotate
    # finds the sources.
    model=$(callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
        awk -v r="$MODEL_READ" -v w="$MODEL_WRITE" '
            { line = $0; sub(/ \[[^]]*\]$/, "", line); n = $1; gsub(",", "", n) }
            substr(line, length(line) - length(r) + 1) == r && n + 0 > mr { mr = n + 0 }
            substr(line, length(line) - length(w) + 1) == w && n + 0 > mw { mw = n + 0 }
            END { print mr + mw }')
    echo $((total - model))
}

# handler OUTPUT NAME: the value printed for NAME.
handler() { printf '%s\n' "$1" | awk -v n="$2:" '$0 == n { getline; print $1; exit }'; }

: >"$TMP/samples.jsonl"
for variant in $VARIANTS; do
    for size in $SIZES; do
        config "$variant" "$size" "$BYTES" "bk" >"$TMP/run.click"
        for run in $(seq 1 "$RUNS"); do
            out=$(timeout 600 "$OXNET" run "$TMP/run.click" -h cli.done -h cli.bytes -h cli.elapsed_us 2>/dev/null)
            done_=$(handler "$out" cli.done)
            us=$(handler "$out" cli.elapsed_us)
            [ "$done_" = 1 ] || { echo "bulk.sh: $variant $size: the transfer did not complete" >&2; exit 1; }
            printf '{"variant":"%s","size":%s,"run":%s,"bytes":%s,"elapsed_us":%s}\n' \
                "$variant" "$size" "$run" "$BYTES" "$us" >>"$TMP/samples.jsonl"
            echo "bulk.sh: $variant size $size run $run: $BYTES bytes in $us us" >&2
        done
        if [ "$IR" != 0 ]; then
            irs=""
            for bytes in "$IR_BYTES" $((2 * IR_BYTES)); do
                config "$variant" "$size" "$bytes" "ir" >"$TMP/ir.click"
                valgrind --tool=callgrind --callgrind-out-file="$TMP/callgrind.out" "$OXNET" run "$TMP/ir.click" \
                    -h cli.done >/dev/null 2>"$TMP/valgrind.err" ||
                    { tail "$TMP/valgrind.err" >&2; exit 1; }
                irs="$irs $(without_model "$TMP/callgrind.out")"
            done
            set -- $irs
            printf '{"variant":"%s","size":%s,"ir_bytes":%s,"ir_1":%s,"ir_2":%s}\n' \
                "$variant" "$size" "$IR_BYTES" "$1" "$2" >>"$TMP/samples.jsonl"
            echo "bulk.sh: $variant size $size: $1 and $2 instructions" >&2
        fi
    done
done

python3 - "$TMP/samples.jsonl" "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
samples = [json.loads(l) for l in open(sys.argv[1])]
out, runs = sys.argv[2], int(sys.argv[3])
rows = {}
for s in samples:
    r = rows.setdefault((s["variant"], s["size"]), {"variant": s["variant"], "size": s["size"], "mbps": []})
    if "elapsed_us" in s:
        r["mbps"].append(s["bytes"] * 8 / max(s["elapsed_us"], 1))
    if "ir_1" in s:
        # Each byte echoed is two one-way transfers.
        r["instructions_per_byte"] = (s["ir_2"] - s["ir_1"]) / (2 * s["ir_bytes"])
medians = []
for r in rows.values():
    m = {"variant": r["variant"], "size": r["size"], "goodput_mbps": statistics.median(r["mbps"])}
    if "instructions_per_byte" in r:
        m["instructions_per_byte"] = r["instructions_per_byte"]
    medians.append(m)
json.dump({"benchmark": "stack-bulk", "runs": runs, "medians": medians, "samples": samples},
          open(f"{out}/bulk.json", "w"), indent=1)
for m in medians:
    ipb = m.get("instructions_per_byte")
    print(f'{m["variant"]:>9} {m["size"]:>6} B  {m["goodput_mbps"]:9.1f} Mbit/s  '
          + (f"{ipb:7.2f} instr/B" if ipb is not None else ""))

# Two panels: goodput and instructions per byte, log2 payload size on x.
import math
variants = list(dict.fromkeys(m["variant"] for m in medians))
sizes = sorted({m["size"] for m in medians})
colour = {"software": "#444", "checksum": "#1f77b4", "tso": "#2ca02c", "rsc": "#d62728", "gro": "#9467bd"}
w, h, pw, ph = 820, 340, 330, 220
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
       '<rect width="100%" height="100%" fill="white"/>']
def panel(x0, key, title, log=False):
    vals = [m[key] for m in medians if key in m and m[key] > 0]
    if not vals:
        return
    y0 = 40 + ph
    if log:
        lo = 10 ** math.floor(math.log10(min(vals)))
        hi = 10 ** math.ceil(math.log10(max(vals)))
        if hi == lo:
            hi = lo * 10
        def y(v):
            return y0 - ph * (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
        ticks = [lo * 10 ** k for k in range(round(math.log10(hi / lo)) + 1)]
    else:
        top = max(vals) * 1.1
        def y(v):
            return y0 - ph * v / top
        ticks = [top * t / 4 for t in range(5)]
    svg.append(f'<text x="{x0}" y="25">{title}</text>')
    svg.append(f'<line x1="{x0}" y1="{y0}" x2="{x0 + pw}" y2="{y0}" stroke="black"/>')
    svg.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="40" stroke="black"/>')
    for v in ticks:
        svg.append(f'<text x="{x0 - 45}" y="{y(v) + 4:.1f}" font-size="10">{v:.3g}</text>')
    def x(size):
        if len(sizes) == 1:
            return x0 + pw / 2
        return x0 + pw * (math.log2(size) - math.log2(sizes[0])) / (math.log2(sizes[-1]) - math.log2(sizes[0]))
    for size in sizes:
        svg.append(f'<text x="{x(size) - 10:.1f}" y="{y0 + 15}" font-size="10">{size}</text>')
    svg.append(f'<text x="{x0 + pw / 2 - 40}" y="{y0 + 32}">payload size (B)</text>')
    for v in variants:
        pts = sorted((x(m["size"]), y(m[key])) for m in medians if m["variant"] == v and key in m)
        if pts:
            svg.append('<polyline fill="none" stroke-width="2" stroke="%s" points="%s"/>'
                       % (colour.get(v, "black"), " ".join(f"{a:.1f},{b:.1f}" for a, b in pts)))
panel(60, "goodput_mbps", "goodput, Mbit/s per direction (sim 82599)")
panel(470, "instructions_per_byte", "instructions per byte, log scale (model excluded)", log=True)
for i, v in enumerate(variants):
    svg.append(f'<rect x="{60 + i * 130}" y="{h - 22}" width="12" height="12" fill="{colour.get(v, "black")}"/>')
    svg.append(f'<text x="{78 + i * 130}" y="{h - 12}">{v}</text>')
svg.append("</svg>")
open(f"{out}/bulk.svg", "w").write("\n".join(svg))
print(f"wrote {out}/bulk.json and {out}/bulk.svg")
PY
