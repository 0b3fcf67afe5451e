#!/usr/bin/env python3
"""bench/distill.py — a draft distilled from its target (`octo finetune --distill`), for docs/training.md.

    python3 bench/distill.py gen --teacher TARGET.gguf --prompts TEXT --out GEN.txt [--n 800] [--tokens 200]
                                 [--temp 1] [--first 0]
        text the target writes: for each of N lines of TEXT from line FIRST on, its first 4 words as the prompt,
        TOKENS tokens at temperature TEMP (0: greedy) with seed = the line's number (`octo run`, 1 thread)
    python3 bench/distill.py compare --target TARGET.gguf --drafts A.gguf,B.gguf --prompts TEXT
                                     [--first 7000] [--n 8] [--reps 3] [--tokens 128]
        `octo bench --spec draft` with each draft on N held-out prompts (the first 4 words of lines
        FIRST, FIRST + 1, ... of TEXT), the drafts alternated prompt by prompt; each speedup is
        against plain decoding measured in the same `octo bench` run. Prints a row per prompt and
        the medians, and which drafts' greedy text (`octo run --temp 0 -n TOKENS`) differed from
        plain decoding's on which prompts (none should: speculation is lossless).

Machine: say which one in the docs; the figures depend on it.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

OCTO = os.environ.get("OCTO_BIN", "build/octo")  # a copy keeps a long run safe from a rebuild


def prompt_of(line):
    return " ".join(line.split()[:4])


def lines_of(path, first, n):
    out = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= first and len(line.split()) >= 4:
                out.append(prompt_of(line))
            if len(out) == n:
                break
    return out


def gen(a):
    prompts = lines_of(a.prompts, a.first, a.n)
    with open(a.out, "w", encoding="utf-8") as out:
        for i, p in enumerate(prompts):
            r = subprocess.run([OCTO, "run", "-m", a.teacher, "-p", p, "-n", str(a.tokens), "--temp", str(a.temp),
                                "--seed", str(a.first + i + 1), "-t", "1"], check=True, capture_output=True, text=True)
            out.write(p + r.stdout.rstrip() + "\n")
    print(f"{len(prompts)} pieces of up to {a.tokens} tokens to {a.out}")


def bench(target, draft, prompt, reps, tokens):
    cmd = [OCTO, "bench", "-m", target, "--spec", "draft", "--draft", draft, "--prompt", prompt, "-n", str(tokens),
           "-r", str(reps), "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")][0]


def greedy(target, prompt, tokens, draft=None):
    cmd = [OCTO, "run", "-m", target, "-p", prompt, "-n", str(tokens), "--temp", "0"]
    if draft:
        cmd += ["--draft", draft]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def compare(a):
    drafts = a.drafts.split(",")
    prompts = lines_of(a.prompts, a.first, a.n)
    rows = {d: [] for d in drafts}
    differ = []
    head = " | ".join(f"{d.rsplit('/', 1)[-1]}: speedup, accepted, tokens a pass" for d in drafts)
    print(f"| prompt | {head} |\n|---|" + "---:|" * len(drafts))
    for i, p in enumerate(prompts):
        order = drafts if i % 2 == 0 else drafts[::-1]
        got = {d: bench(a.target, d, p, a.reps, a.tokens) for d in order}
        cells = []
        for d in drafts:
            r = got[d]
            rows[d].append(r)
            cells.append(f"{r['speedup']['median']:.2f}x, {100 * r['acceptance']:.1f} %, {r['tokens_per_pass']:.2f}")
        print(f"| {p} | " + " | ".join(cells) + " |", flush=True)
        plain = greedy(a.target, p, a.tokens)
        differ += [f"{d} on {p!r}" for d in drafts if greedy(a.target, p, a.tokens, d) != plain]
    cells = []
    for d in drafts:
        med = lambda k: statistics.median(r[k]["median"] if isinstance(r[k], dict) else r[k] for r in rows[d])
        cells.append(f"**{med('speedup'):.2f}x**, {100 * med('acceptance'):.1f} %, {med('tokens_per_pass'):.2f}")
    print("| median | " + " | ".join(cells) + " |")
    print("greedy text unlike plain decoding's: " + ("; ".join(differ) if differ else "none"))
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("--teacher", required=True)
    g.add_argument("--prompts", required=True)
    g.add_argument("--out", required=True)
    g.add_argument("--n", type=int, default=800)
    g.add_argument("--tokens", type=int, default=200)
    g.add_argument("--temp", type=float, default=1.0)
    g.add_argument("--first", type=int, default=0)
    c = sub.add_parser("compare")
    c.add_argument("--target", required=True)
    c.add_argument("--drafts", required=True)
    c.add_argument("--prompts", required=True)
    c.add_argument("--first", type=int, default=7000)
    c.add_argument("--n", type=int, default=8)
    c.add_argument("--reps", type=int, default=3)
    c.add_argument("--tokens", type=int, default=128)
    a = ap.parse_args()
    return {"gen": gen, "compare": compare}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
