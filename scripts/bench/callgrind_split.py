"""Instructions per operation from two callgrind runs of N and 2N
operations (echo-instructions.sh, kv-instructions.sh): the difference
over N, start-up removed, with the 82599 model's own functions apart.

    python3 scripts/bench/callgrind_split.py CG_N CG_2N N
prints {"per": ..., "model": ...} as JSON (instructions per operation).
"""
import json
import re
import subprocess
import sys


def split(path):
    """Total instructions, and those of functions of the 82599 model."""
    text = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no", "--threshold=100", path],
                          capture_output=True, text=True, check=True).stdout
    total = model = 0
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) \(", line)
        if not m:
            continue
        v = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = v
        else:
            # file:function; the model's own code (not the driver's
            # generic code instantiated with the model's registers).
            f = re.match(r"\s*[\d,]+ \([^)]*\)\s+([^:]*):(.*)$", line)
            if f and ("/crates/oxnet-sim/" in f.group(1)
                      or re.match(r"\s*<?oxnet_sim::", f.group(2))):
                model += v
    return total, model


if __name__ == "__main__":
    a, b, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    (ta, ma), (tb, mb) = split(a), split(b)
    print(json.dumps({"per": (tb - ta) / n, "model": (mb - ma) / n}))
