#!/usr/bin/env python3
"""bench/spec.py — speculative decoding's figures for docs/speculative.md.

Every figure is one `octo bench --spec ... --json` run: plain and speculative generation
alternated in the same process, medians over the pairs, so each speedup is a ratio against a
baseline measured in the same run.

    python3 bench/spec.py trees --model WIDE.gguf --draft DRAFT.gguf [--reps 3] [--tokens 128]
        trees against lines (`--versus-lines`: the three arms alternated in one run), adaptive and at
        the same pass sizes, the draft and the self-draft, greedy and sampled; tokens and cost per pass
    python3 bench/spec.py auto --wide WIDE.gguf --stories stories260K.gguf --text TEXT
                               [--models /tmp/octo-bench] [--reps 3]
        `--spec auto` on the eight workloads of docs/speculative.md (makes the synthetic models
        in --models once; they are never committed)

Machine: say which one in the docs; the figures depend on it.
"""
import argparse
import json
import os
import subprocess
import sys

OCTO = "build/octo"
DENSE = ["--vocab", "32000", "--embd", "2048", "--layers", "22", "--heads", "32", "--kv-heads", "4",
         "--ff", "5632", "--ctx", "2048", "--seed", "1"]
MOE = ["--vocab", "32000", "--embd", "1024", "--layers", "8", "--heads", "16", "--kv-heads", "4", "--ff", "1536",
       "--experts", "8", "--experts-used", "2", "--ctx", "2048", "--seed", "2"]


def bench(model, spec, extra, reps, tokens):
    """One `octo bench --spec` run: its JSON object, and the lines arm's when --versus-lines was given."""
    cmd = [OCTO, "bench", "-m", model, "--spec", spec, "-n", str(tokens), "-r", str(reps), "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    objs = [json.loads(line) for line in out.stdout.strip().splitlines() if line.startswith("{")]
    return objs[0], (objs[1] if len(objs) > 1 else None)


def trees(a):
    print("| run | plain tok/s | trees: tok/s, speedup (range) | tokens a pass, pass cost | lines: tok/s, speedup "
          "| tokens a pass, pass cost | trees / lines, per triple (range) |\n|---|---:|---:|---:|---:|---:|---:|")
    runs = [("draft, adaptive", "draft", [], 0)]
    runs += [(f"draft, {n} nodes against a line of {n}", "draft", ["--spec-tree", str(n)], n) for n in a.sizes]
    runs += [("draft sampled (temperature 0.8), adaptive", "draft", ["--temp", "0.8", "--seed", "7"], 0),
             ("self-draft, adaptive", "self", [], 0)]
    for label, spec, extra, k in runs:
        if a.only and not any(o in label for o in a.only.split(";")):
            continue
        d = ["--draft", a.draft] if spec == "draft" else []
        r, v = bench(a.model, spec, d + extra + ["--versus-lines", str(k)], a.reps, a.tokens)
        p, s, o = r["plain_tokens_per_s"]["median"], r["speedup"], v["spec_over_versus"]
        print(f"| {label} | {p:.2f} | {r['spec_tokens_per_s']['median']:.2f}, **{s['median']:.2f}x** "
              f"({s['min']:.2f}-{s['max']:.2f}) | {r['tokens_per_pass']:.2f}, {r['pass_cost']:.2f} | "
              f"{v['tokens_per_s']['median']:.2f}, {v['tokens_per_s']['median'] / p:.2f}x | "
              f"{v['tokens_per_pass']:.2f}, {v['pass_cost']:.2f} | **{o['median']:.2f}** ({o['min']:.2f}-{o['max']:.2f}) |",
              flush=True)


def grounded(text):
    """A story of about 480 characters, then its first 60 characters again."""
    with open(text, encoding="utf-8") as f:
        story = f.read()[:480]
    return story + "\n" + story[:60]


def auto(a):
    os.makedirs(a.models, exist_ok=True)
    made = {}
    for name, args in [("dense-q4_0", DENSE + ["--type", "q4_0"]), ("dense-f16", DENSE + ["--type", "f16"]),
                       ("moe-q4_0", MOE + ["--type", "q4_0"])]:
        path = os.path.join(a.models, name + ".gguf")
        if not os.path.exists(path):
            subprocess.run([OCTO, "synth", "-o", path] + args, check=True, capture_output=True)
        made[name] = path
    g = grounded(a.text)
    work = [("widened F16, \"Once upon a time\"", a.wide, []),
            ("widened F16, sampled (temperature 0.8)", a.wide, ["--temp", "0.8", "--seed", "7"]),
            ("widened F16, input-grounded prompt", a.wide, ["--prompt", g]),
            ("synthetic 1.1B Q4_0 (random weights)", made["dense-q4_0"], []),
            ("synthetic 1.1B F16 (random weights)", made["dense-f16"], []),
            ("synthetic MoE Q4_0", made["moe-q4_0"], []),
            ("stories260K (not memory-bound)", a.stories, []),
            ("stories260K, input-grounded prompt", a.stories, ["--prompt", g])]
    print("| workload | auto chose | speedup (range over pairs) | note |\n|---|---|---:|---|")
    for label, model, extra in work:
        if a.only and not any(o in label for o in a.only.split(";")):
            continue
        r, _ = bench(model, "auto", extra, a.reps, a.tokens)
        s = r["speedup"]
        print(f"| {label} | {r['spec']} | {s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f}) | "
              f"{r.get('note', '')} |", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--octo", default="build/octo")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tokens", type=int, default=128)
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("trees")
    t.add_argument("--model", required=True)
    t.add_argument("--draft", required=True)
    t.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[2, 3, 4, 5, 6])
    t.add_argument("--only", default="", help="semicolon-separated substrings of the run labels to keep")
    u = sub.add_parser("auto")
    u.add_argument("--wide", required=True)
    u.add_argument("--stories", required=True)
    u.add_argument("--text", required=True)
    u.add_argument("--models", default="/tmp/octo-bench")
    u.add_argument("--only", default="", help="semicolon-separated substrings of the workload labels to keep")
    a = p.parse_args()
    global OCTO
    OCTO = a.octo
    trees(a) if a.cmd == "trees" else auto(a)


if __name__ == "__main__":
    sys.exit(main())
