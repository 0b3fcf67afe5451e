#!/usr/bin/env python3
"""bench/moe_cache.py — the expert cache's hit rate by size and policy (docs/moe.md).

Upcycles stories260K to an MoE model (routing from a trained model's activations; default
16 experts, 2 used, as issue 20 asks), then feeds `octo eval` the start of the TinyStories
text one token at a time (as decoding does) with the expert cache at each size and policy,
and prints a markdown table: hit rate, bytes read from the file per token, stall per token.

    python3 bench/moe_cache.py [--octo build/octo] [--shared-dir ../shared] [--tokens 512]
                               [--experts 16] [--used 2] [--model MOE.gguf]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--shared-dir", default=os.environ.get("OCTO_TEST_DATA", "../shared"))
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--used", type=int, default=2)
    ap.add_argument("--model", help="an MoE model to use instead of upcycling stories260K")
    a = ap.parse_args()
    text = os.path.join(a.shared_dir, "text/tinystories-valid-head.txt")
    model = a.model
    if not model:
        model = os.path.join(tempfile.mkdtemp(), "stories-moe.gguf")
        run([a.octo, "upcycle", "-m", os.path.join(a.shared_dir, "models/stories260K.gguf"), "-o", model,
             "--experts", str(a.experts), "--experts-used", str(a.used), "-f", text, "--tokens", "40000"])
    print(f"| cache (share of expert bytes) | policy | hit rate | bytes read / token | stall ms / token |")
    print("|---|---|---|---|---|")
    for share in ("12.5%", "25%", "50%", "100%"):
        for policy in ("lhu", "lru", "lfu"):
            out = run([a.octo, "eval", "-m", model, "-f", text, "--ctx", str(a.tokens), "--json",
                       "--moe-cache", share, "--moe-policy", policy])
            r = json.loads(out.strip().splitlines()[-1])
            print(f"| {share} | {policy} | {100 * r['expert_cache_hit_rate']:.1f} % | "
                  f"{r['expert_bytes_read_per_token']:.0f} | {r['expert_stall_ms_per_token']:.4f} |")
            if share == "100%":
                break  # every policy holds everything


if __name__ == "__main__":
    main()
