#!/usr/bin/env python3
"""bench/kv_eval.py — the KV cache quality table of docs/kv-cache.md.

Runs `octo eval` on the trained model and text in ../shared for each cache configuration and
prints a markdown table (KL divergence and top-1 agreement against an uncompressed F16 cache,
perplexity, KV bytes as a fraction of F16, entries evicted), each row with its command.

    python3 bench/kv_eval.py [--octo build/octo] [--shared ../shared] [--ctx 512]
"""
import argparse
import json
import subprocess

# Tier windows scaled down for a 512-token context (the defaults are hot 128 / warm 512 / 64 anchors).
SCALED = ["--kv-hot", "32", "--kv-warm", "128", "--kv-anchors", "4", "--kv-recent", "32"]
ROWS = [
    ("INT8 only, keys by channel (default)", ["--kv-policy", "none", "--kv-hot", "0", "--kv-warm", "100000", "--kv-cold", "q8_0"]),
    ("INT8 only, keys by token", ["--kv-policy", "none", "--kv-hot", "0", "--kv-warm", "100000", "--kv-cold", "q8_0",
                                  "--kv-keys", "token"]),
    ("tiers F16/INT8/INT4, INT4 asymmetric (default)", SCALED + ["--kv-policy", "none"]),
    ("tiers F16/INT8/INT4, INT4 symmetric", SCALED + ["--kv-policy", "none", "--kv-cold", "q4_0"]),
    ("tiers F16/INT8/INT4, keys by token", SCALED + ["--kv-policy", "none", "--kv-keys", "token"]),
    ("tiers, 1024 tokens", SCALED + ["--kv-policy", "none", "--ctx", "1024"]),
    ("tiers, 2048 tokens", SCALED + ["--kv-policy", "none", "--ctx", "2048"]),
    # budgets at 2048 tokens: the budget counts whole 64-entry blocks (pages), and at 512 tokens this tiny model's
    # floor (the anchors', recent window's and open block's blocks) is already 40 % of the F16 cache
    ("window, budget 25 %, 2048 tokens", SCALED + ["--kv-policy", "window", "--kv-budget", "25%", "--ctx", "2048"]),
    ("morphkv, budget 25 %, 2048 tokens", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "25%", "--ctx", "2048"]),
    ("h2o, budget 25 %, 2048 tokens", SCALED + ["--kv-policy", "h2o", "--kv-budget", "25%", "--ctx", "2048"]),
    ("window, budget 20 %, 2048 tokens", SCALED + ["--kv-policy", "window", "--kv-budget", "20%", "--ctx", "2048"]),
    ("morphkv, budget 20 %, 2048 tokens", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "20%", "--ctx", "2048"]),
    ("window, budget 15 %, 2048 tokens", SCALED + ["--kv-policy", "window", "--kv-budget", "15%", "--ctx", "2048"]),
    ("morphkv, budget 15 %, 2048 tokens", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "15%", "--ctx", "2048"]),
    ("morphkv, budget 50 %", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "50%"]),
    ("window, budget 50 %", SCALED + ["--kv-policy", "window", "--kv-budget", "50%"]),
    # spill on vs off at the same budget: a longer text, so that cold blocks exist to spill
    ("morphkv, budget 25 %, 2048 tokens, no spill", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "25%", "--ctx", "2048",
                                                              "--kv-spill", "off"]),
    ("morphkv, budget 25 %, 2048 tokens, spill", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "25%", "--ctx", "2048",
                                                           "--kv-spill", "on", "--cache-dir", "{cache}"]),
    ("morphkv, budget 15 %, 2048 tokens, no spill", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "15%", "--ctx", "2048",
                                                              "--kv-spill", "off"]),
    ("morphkv, budget 15 %, 2048 tokens, spill", SCALED + ["--kv-policy", "morphkv", "--kv-budget", "15%", "--ctx", "2048",
                                                           "--kv-spill", "on", "--cache-dir", "{cache}"]),
    ("window, budget 15 %, 2048 tokens, no spill", SCALED + ["--kv-policy", "window", "--kv-budget", "15%", "--ctx", "2048",
                                                             "--kv-spill", "off"]),
    ("window, budget 15 %, 2048 tokens, spill", SCALED + ["--kv-policy", "window", "--kv-budget", "15%", "--ctx", "2048",
                                                          "--kv-spill", "on", "--cache-dir", "{cache}"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--shared", default="../shared")
    ap.add_argument("--ctx", default="512")
    ap.add_argument("--cache-dir", default="/tmp", help="where the spill rows put their (unlinked) spill file")
    a = ap.parse_args()
    model = f"{a.shared}/models/stories260K.gguf"
    text = f"{a.shared}/text/tinystories-valid-head.txt"
    print("| cache | tokens | KLD mean | KLD max | top-1 agreement | perplexity (F16: ref) | KV bytes / F16 | evicted per layer "
          "| spill: on file, read back (hits) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    cmds = []
    for name, args in ROWS:
        ctx = ["--ctx", a.ctx] if "--ctx" not in args else []
        cmd = [a.octo, "eval", "-m", model, "-f", text] + ctx + [x.replace("{cache}", a.cache_dir) for x in args] + ["--json"]
        d = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        print(f"| {name} | {d['tokens']} | {d['kld_mean']:.6f} | {d['kld_max']:.4f} | {100 * d['top1_agreement']:.2f} % "
              f"| {d['ppl']:.4f} ({d['ppl_ref']:.4f}) | {100 * d['kv_fraction_of_f16']:.1f} % | {d['tokens_evicted']} "
              + (f"| {d['blocks_spilled']} blocks, {d['spill_reads']} ({100 * d['spill_hit_rate']:.0f} %) |" if d["spill"]
                 else "| — |"))
        cmds.append((name, " ".join(cmd[:1] + ["eval", "-m", "$M", "-f", "$T"] + cmd[6:-1])))
    print()
    print("Commands (M = ../shared/models/stories260K.gguf, T = ../shared/text/tinystories-valid-head.txt):")
    print()
    for name, c in cmds:
        print(f"- {name}: `{c}`")


if __name__ == "__main__":
    main()
