#!/usr/bin/env python3
"""Draft-scored prompts (docs/kv-cache.md, "Draft-based prompt scoring"):
KV policies at a budget of entries, and prompt compression, over many
held-out prompts, each figure one `octo eval --json` run.

    python3 bench/speckv.py kv  [-n 24] [--keep 25,15] [--also-draft D] [--short]
    python3 bench/speckv.py pc  [-n 24] [--ratio 50,25] [--also-draft D] [--short]
    python3 bench/speckv.py prefill -m WIDE.gguf [--ratio 50,25] [-r 5]

Each prompt starts at a story of ../shared/text/tinystories-valid-head.txt
(the k-th story from the 40th on, every third) and is 256..447 tokens long
(stories260K's context is 512: the prompt, then 64 scored tokens). The model
is stories260K, the draft llama2xs-260k, the windows those of the tables
above (hot 32, warm 128, anchors 4, recent 32).

kv: mean KLD and top-1 agreement of the 64 continuation tokens' distributions
against the full cache, per policy, the cache keeping --keep % of the
prompt's entries per layer (octo eval --kv-keep).
pc: the same with the whole cache kept, the model reading --ratio % of the
prompt: chosen by the draft's votes (SpecPC, --prompt-compress), by the
model's own votes (the same selection with the model as its own draft: the
target-scored baseline), and at random (eval --prompt-random).
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(ROOT, "..", "shared")
MODEL = os.path.join(SHARED, "models", "stories260K.gguf")
DRAFT = os.path.join(SHARED, "models", "llama2xs-260k.gguf")
TEXT = os.path.join(SHARED, "text", "tinystories-valid-head.txt")
OCTO = os.path.join(ROOT, "build", "octo")
WINDOWS = ["--kv-hot", "32", "--kv-warm", "128", "--kv-anchors", "4", "--kv-recent", "32"]
SCORED = 64


def prompts(n, short=False):
    """(text file, prompt length) for n prompts: 256..447 tokens, or with short 160..249 (within
    llama2xs's trained context of 256)."""
    text = open(TEXT, encoding="utf-8").read()
    starts = [i for i in range(len(text)) if text.startswith("Once upon a time", i)]
    out, tmp = [], tempfile.mkdtemp(prefix="octo-speckv-")
    for k in range(n):
        s = starts[40 + 3 * k]
        path = os.path.join(tmp, "p%02d.txt" % k)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text[s:s + 6000])
        out.append((path, 160 + (k * 37) % 90 if short else 256 + (k * 37) % 192))
    return out


def eval_json(path, plen, *args, model=MODEL):
    cmd = [OCTO, "eval", "-m", model, "-f", path, "--ctx", str(plen + SCORED + 1), "--prompt", str(plen),
           "--json"] + WINDOWS + list(args)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), r.stderr))
    return json.loads(r.stdout)


def table(rows, title):
    print("\n%s\n" % title)
    print("| method | mean KLD | median KLD | top-1 | lowest KLD on |")
    print("|---|---:|---:|---:|---:|")
    names = list(rows)
    n = len(rows[names[0]])
    wins = {m: 0 for m in names}
    for i in range(n):
        best = min(names, key=lambda m: rows[m][i][0])
        wins[best] += 1
    for m in names:
        k = [r[0] for r in rows[m]]
        t = [r[1] for r in rows[m]]
        print("| %s | %.4f | %.4f | %.1f %% | %d of %d |" % (m, statistics.mean(k), statistics.median(k),
                                                            100 * statistics.mean(t), wins[m], n))


def run_kv(a):
    ps = prompts(a.n, a.short)
    for keep in a.keep:
        rows = {}
        ways = [(p, p, []) for p in ("window", "h2o", "morphkv", "snapkv")]
        ways += [("speckv", "speckv", ["--draft", DRAFT]), ("default (morphkv) + draft", "default", ["--draft", DRAFT])]
        if a.also_draft:
            ways.append(("speckv, draft %s" % os.path.basename(a.also_draft), "speckv", ["--draft", a.also_draft]))
        for name, pol, extra in ways:
            rows[name] = [(d["kld_mean"], d["top1_agreement"]) for d in
                          (eval_json(path, plen, "--kv-policy", pol, "--kv-keep", "%d%%" % keep, *extra)
                           for path, plen in ps)]
        table(rows, "KV cache keeping %d %% of the prompt's entries, %d prompts" % (keep, len(ps)))


def run_pc(a):
    ps = prompts(a.n, a.short)
    ways = (("SpecPC: the draft's votes", ["--draft", DRAFT]), ("the model's own votes (SnapKV-style)", ["--draft", MODEL, "--prompt-lookahead", "-1"]),
            ("at random", ["--prompt-random", "1"]))
    if a.also_draft:
        ways += (("SpecPC, draft %s" % os.path.basename(a.also_draft), ["--draft", a.also_draft]),)
    for ratio in a.ratio:
        rows = {}
        for name, extra in ways:
            rows[name] = [(d["kld_mean"], d["top1_agreement"]) for d in
                          (eval_json(path, plen, "--kv-policy", "none", "--prompt-compress", "%g" % (ratio / 100),
                                     *extra) for path, plen in ps)]
        table(rows, "the model reading %d %% of the prompt, whole cache, %d prompts" % (ratio, len(ps)))


def run_prefill(a):
    """Time to read a 448-token prompt (`run -n 1 --stats --json`: prefill_ms, the draft's time
    included) with SpecPC at each ratio against reading it whole, alternated, medians."""
    if not a.model:
        sys.exit("prefill needs -m MODEL")
    path = os.path.join(tempfile.mkdtemp(prefix="octo-specpc-"), "prompt.txt")
    with open(TEXT, encoding="utf-8") as f:
        text = f.read()
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:900])  # about 460 tokens of this vocabulary
    ratios = [1.0] + [r / 100 for r in a.ratio]
    times = {r: [] for r in ratios}
    draft = {r: [] for r in ratios}
    for _ in range(a.reps):
        for r in ratios:
            cmd = [OCTO, "run", "-m", a.model, "-f", path, "-n", "1", "--spec", "none", "--draft", DRAFT,
                   "--stats", "--json"] + ([] if r == 1.0 else ["--prompt-compress", "%g" % r])
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode:
                sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr))
            d = json.loads(p.stderr.strip().splitlines()[-1])
            times[r].append(d["prefill_ms"])
            draft[r].append(d["prefill_draft_ms"])
            n = d["prompt_tokens"]
    base = statistics.median(times[1.0])
    print("\n%s, a %d-token prompt, %d alternated runs, medians\n" % (os.path.basename(a.model), n, a.reps))
    print("| the model reads | prefill ms (draft included) | of which the draft | against the whole prompt |")
    print("|---|---:|---:|---:|")
    for r in ratios:
        m = statistics.median(times[r])
        print("| %d %% | %.0f | %.0f | %.2f |" % (100 * r, m, statistics.median(draft[r]), m / base))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["kv", "pc", "prefill"])
    ap.add_argument("-n", type=int, default=24)
    ap.add_argument("--keep", default="25,15")
    ap.add_argument("--ratio", default="50,25")
    ap.add_argument("--also-draft", help="another draft to compare (e.g. the model quantized to q4_0)")
    ap.add_argument("--short", action="store_true", help="prompts of 160..249 tokens instead of 256..447")
    ap.add_argument("-m", "--model", help="prefill: the model (e.g. the widened 1.1B)")
    ap.add_argument("-r", "--reps", type=int, default=5, help="prefill: alternated repetitions")
    a = ap.parse_args()
    a.keep = [int(x) for x in a.keep.split(",")]
    a.ratio = [int(x) for x in a.ratio.split(",")]
    {"kv": run_kv, "pc": run_pc, "prefill": run_prefill}[a.what](a)


if __name__ == "__main__":
    main()
