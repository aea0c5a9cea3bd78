#!/usr/bin/env bash
# Regenerates docs/elements.md: its header (everything above the table)
# followed by `oxnet elements` (crates/oxnet/tests/reference.rs
# checks that the two agree).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build -q -p oxnet --bin oxnet
header=$(sed '/^| class |/,$d' docs/elements.md)
{ printf '%s\n' "$header"; ./target/debug/oxnet elements; } > docs/elements.md.new
mv docs/elements.md.new docs/elements.md
