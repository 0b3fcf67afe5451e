#!/usr/bin/env python3
"""bench/moe_cache.py — the expert cache by size, policy and read-ahead (docs/moe.md).

Upcycles stories260K to an MoE model (routing from a trained model's activations; default
16 experts, 2 used, as issue 20 asks; calibrated on the start of the TinyStories text), then
feeds `octo eval` held-out text from the end of that file one token at a time (as decoding
does) with the expert cache at each size, policy and read-ahead setting, writes each run's
`--moe-trace`, and prints a markdown table: hit rate and its share of Belady's optimum on the
same trace (bench/moe_belady.py), the read-ahead's recall (lookups that needed the file and
found their expert read in time), the next-layer prediction's recall and precision, bytes
read from the file and stall per token.

    python3 bench/moe_cache.py [--octo build/octo] [--shared-dir ../shared] [--tokens 512]
                               [--experts 16] [--used 2] [--model MOE.gguf] [--margins]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import moe_belady  # noqa: E402


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return p.stdout


def held_out(text, work, chars=60000):
    """The last `chars` characters of the text (calibration uses its start)."""
    data = open(text, encoding="utf-8").read()
    path = os.path.join(work, "heldout.txt")
    open(path, "w", encoding="utf-8").write(data[-chars:])
    return path


def measure(a, model, text, work, share, policy, prefetch, margin=None):
    trace = os.path.join(work, "trace.txt")
    cmd = [a.octo, "eval", "-m", model, "-f", text, "--ctx", str(a.tokens), "--json", "--moe-cache", share,
           "--moe-policy", policy, "--moe-prefetch", prefetch, "--moe-trace", trace]
    if margin is not None:
        cmd += ["--moe-predict-margin", str(margin)]
    r = json.loads(run(cmd).strip().splitlines()[-1])
    slots, requests, hits = moe_belady.read_trace(trace)
    best = moe_belady.belady(requests, slots) / len(requests)
    r["belady"] = best
    r["share_of_belady"] = r["expert_cache_hit_rate"] / best if best else 0.0
    return r


def pct(x):
    return "—" if x < 0 else f"{100 * x:.1f} %"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--shared-dir", default=os.environ.get("OCTO_TEST_DATA", "../shared"))
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--experts", type=int, default=16)
    ap.add_argument("--used", type=int, default=2)
    ap.add_argument("--model", help="an MoE model to use instead of upcycling stories260K")
    ap.add_argument("--margins", action="store_true", help="also sweep the prediction margin at 25 %% lhu")
    a = ap.parse_args()
    work = tempfile.mkdtemp()
    text = os.path.join(a.shared_dir, "text/tinystories-valid-head.txt")
    model = a.model
    if not model:
        model = os.path.join(work, "stories-moe.gguf")
        run([a.octo, "upcycle", "-m", os.path.join(a.shared_dir, "models/stories260K.gguf"), "-o", model,
             "--experts", str(a.experts), "--experts-used", str(a.used), "-f", text, "--tokens", "40000"])
    heldout = held_out(text, work)
    print("| cache | policy | read-ahead | hit rate | Belady | share of Belady | read-ahead recall "
          "| prediction recall / precision | KiB read / token | stall ms / token |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for share in ("25%", "50%", "100%"):
        for policy in ("lhu", "lru", "lfu"):
            for prefetch in ("on", "off"):
                r = measure(a, model, heldout, work, share, policy, prefetch)
                print(f"| {share} | {policy} | {prefetch} | {pct(r['expert_cache_hit_rate'])} | {pct(r['belady'])} | "
                      f"{pct(r['share_of_belady'])} | {pct(r['expert_prefetch_recall'])} | "
                      f"{pct(r['expert_prediction_rate'])} / {pct(r['expert_prediction_precision'])} | "
                      f"{r['expert_bytes_read_per_token'] / 1024:.1f} | {r['expert_stall_ms_per_token']:.4f} |")
            if share == "100%":
                break  # every policy holds everything
    if a.margins:
        print("\n| margin (sd) | prediction recall | precision | experts named per token and layer |")
        print("|---|---|---|---|")
        for m in (0, 0.1, 0.25, 0.5, 1.0):
            r = measure(a, model, heldout, work, "25%", "lhu", "on", m)
            named = a.used * r["expert_prediction_rate"] / r["expert_prediction_precision"] \
                if r["expert_prediction_precision"] > 0 else 0
            print(f"| {m} | {pct(r['expert_prediction_rate'])} | {pct(r['expert_prediction_precision'])} | "
                  f"{named:.2f} |")


if __name__ == "__main__":
    main()
