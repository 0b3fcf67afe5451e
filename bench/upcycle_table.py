#!/usr/bin/env python3
"""bench/upcycle_table.py — the quality tables of docs/upcycling.md.

Upcycles stories260K with `octo upcycle` at E = 8 and 16 experts, K = 1, 2, E/4 and E/2 used,
for every split (cluster, random, contiguous) and combination (sum, weighted) with the fitted
router, and with a shared expert at the same number of neurons run per token; prints markdown:
held-out perplexity and mean KL divergence from the dense model, then the routing statistics of
the default configuration. Calibration: the text's first --tokens tokens; held out: its last 4096.

    python3 bench/upcycle_table.py [--octo build/octo] [--shared-dir ../shared] [--tokens 40000]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

N_FF = 172  # stories260K's FFN width


def upcycle(a, out, E, K, split="cluster", combine="sum", shared=0):
    cmd = [a.octo, "upcycle", "-m", a.model, "-o", out, "--experts", str(E), "--experts-used", str(K),
           "--split", split, "--combine", combine, "--shared", str(shared), "-f", a.text, "--tokens", str(a.tokens)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)}: {p.stderr.strip()}")
    o = p.stdout
    ppl = re.search(r"perplexity: dense ([\d.]+), upcycled ([\d.]+)", o)
    kld = re.search(r"kld:\s+([\d.]+)", o)
    active = re.search(r"; (\d+) of (\d+) neurons active", o)
    rows = re.findall(r"^\s*(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)%\s+(\S+)\s+(\S+)$", o, re.M)
    return {"dense_ppl": float(ppl.group(1)), "ppl": float(ppl.group(2)), "kld": float(kld.group(1)),
            "active": int(active.group(1)), "layers": rows, "text": o}


def shared_for(E, K):
    """A shared expert and K/2 routed experts running as many neurons per token as K alone."""
    k2 = K // 2
    n = round((K - k2) * N_FF / (E - k2))
    return k2, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--shared-dir", default=os.environ.get("OCTO_TEST_DATA", "../shared"))
    ap.add_argument("--tokens", type=int, default=40000)
    a = ap.parse_args()
    a.model = os.path.join(a.shared_dir, "models/stories260K.gguf")
    a.text = os.path.join(a.shared_dir, "text/tinystories-valid-head.txt")
    out = os.path.join(tempfile.mkdtemp(), "up.gguf")
    splits, combines = ["cluster", "random", "contiguous"], ["sum", "weighted"]
    print("| E | K | neurons run | " + " | ".join(f"{s} {c}" for c in combines for s in splits) +
          " | cluster + shared expert |")
    print("|---|---|---|" + "---|" * (len(splits) * len(combines) + 1))
    default_runs = {}
    dense = None
    for E in (8, 16):
        for K in sorted({1, 2, E // 4, E // 2}):
            cells, active = [], None
            for c in combines:
                for s in splits:
                    r = upcycle(a, out, E, K, s, c)
                    dense, active = r["dense_ppl"], r["active"]
                    cells.append(r)
                    if s == "cluster" and c == "sum":
                        default_runs[(E, K)] = r
            best = min(x["kld"] for x in cells)
            txt = [("**%.3f**" if x["kld"] == best else "%.3f") % x["kld"] + " (%.1f)" % x["ppl"] for x in cells]
            if K >= 2:
                k2, n = shared_for(E, K)
                r = upcycle(a, out, E, k2, "cluster", "sum", n)
                txt.append("%.3f (%.1f): K %d + %d shared, %d run" % (r["kld"], r["ppl"], k2, n, r["active"]))
            else:
                txt.append("-")
            print(f"| {E} | {K} | {active} | " + " | ".join(txt) + " |")
    print(f"\nDense stories260K on the same held-out text: perplexity {dense:.3f}.\n")
    for (E, K) in ((8, 2), (16, 4)):
        r = default_runs[(E, K)]
        print(f"Routing of the default upcycled model, E {E}, K {K} (held-out text):\n")
        print("| layer | busiest expert (x fair share) | load CV | experts repeated from the previous token |"
              " layer's experts predicted from the previous layer's FFN input | ... from its output residual |")
        print("|---|---|---|---|---|---|")
        for row in r["layers"]:
            print("| " + " | ".join(row[:3]) + f" | {row[3]}% | {row[4]} | {row[5]} |")
        print()


if __name__ == "__main__":
    main()
