#!/usr/bin/env python3
"""bench/cpu_sweep.py — prompt and decode speed under CPU quotas (docs/adaptation.md, issue 38).

    python3 bench/cpu_sweep.py --octo build/octo --model MODEL.gguf --text PROMPT.txt
                               [--llama-bench llama-bench] [--quotas 200,150,100,75,50] [--reps 3]
                               [--gen 128] [--prompt 128]

At each quota (per cent of one CPU, ../shared/tools/throttled.sh: a fresh cgroup per run): octo
zero-config (the threads it picks), octo -t 1 and octo -t 2, each `octo run -f PROMPT.txt -n GEN
--stats --json` run --reps times, the three alternated with their order rotated each round, the
medians kept; then, when given, llama.cpp's `llama-bench -t 1` and `-t 2` (its own -r reps, a
--prompt-token prompt). Prints a row per quota and arm, then zero-config against the best fixed octo
count and against llama.cpp's best. Needs root (cgroups).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
THROTTLED = os.path.join(HERE, "..", "..", "shared", "tools", "throttled.sh")
if not os.path.exists(THROTTLED):
    THROTTLED = "/work/shared/tools/throttled.sh"


def run(quota, cmd):
    p = subprocess.run([THROTTLED, str(quota), "--"] + cmd, capture_output=True, text=True)
    last = p.stdout.strip().splitlines()[-1:] or [""]
    if not last[0].startswith("rc=0"):
        sys.exit("failed under quota %d: %s\n%s" % (quota, " ".join(cmd), p.stderr[-2000:]))
    return p.stdout


def octo(a, quota, threads):
    """One `octo run` (decode and prompt tok/s, p95 token latency, the threads it computed on)."""
    cmd = [a.octo, "run", "-m", a.model, "-f", a.text, "-n", str(a.gen), "--temp", "0", "--stats", "--json"] + (
        ["-t", str(threads)] if threads else [])
    p = subprocess.run([THROTTLED, str(quota), "--"] + cmd, capture_output=True, text=True)
    lines = [l for l in p.stderr.splitlines() if l.startswith("{")]
    if not p.stdout.strip().splitlines()[-1].startswith("rc=0") or not lines:
        sys.exit("octo failed under quota %d: %s" % (quota, p.stderr[-2000:]))
    d = json.loads(lines[-1])
    return (d["prefill_tokens_per_s"], d["decode_tokens_per_s"], d["decode_latency_p95_ms"],
            d["cpu_threads"] if not threads else threads)


def median_of(runs):
    """The median of each figure over runs (the threads: the last run's)."""
    return tuple(statistics.median(r[i] for r in runs) for i in range(3)) + (runs[-1][3],)


def llama(a, quota, threads):
    out = run(quota, [a.llama_bench, "-m", a.model, "-p", str(a.prompt), "-n", str(a.gen), "-r", str(a.reps),
                      "-t", str(threads), "-o", "json"])
    rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    pp = [r["avg_ts"] for r in rows if r["n_prompt"] and not r["n_gen"]]
    tg = [r["avg_ts"] for r in rows if r["n_gen"] and not r["n_prompt"]]
    return (pp[0], tg[0], -1, threads)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-bench")
    ap.add_argument("--quotas", default="200,150,100,75,50")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=128, help="llama-bench's prompt tokens")
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--text", required=True, help="the prompt, a file (octo run -f)")
    a = ap.parse_args()
    arms = [("octo auto", octo, 0), ("octo -t 1", octo, 1), ("octo -t 2", octo, 2)]
    if a.llama_bench:
        arms += [("llama.cpp -t 1", llama, 1), ("llama.cpp -t 2", llama, 2)]
    print("%-6s %-15s %-8s %-9s %-9s %s" % ("quota", "arm", "threads", "pp tok/s", "tg tok/s", "p95 ms"))
    summary = []
    for q in [int(x) for x in a.quotas.split(",")]:
        res, runs = {}, {}
        octo_arms = [x for x in arms if x[1] is octo]
        for r in range(a.reps):  # the octo arms alternated, their order rotated each round
            for name, fn, t in octo_arms[r % len(octo_arms):] + octo_arms[:r % len(octo_arms)]:
                runs.setdefault(name, []).append(fn(a, q, t))
        for name, fn, t in arms:
            res[name] = median_of(runs[name]) if fn is octo else fn(a, q, t)
            pp, tg, p95, th = res[name]
            print("%-6d %-15s %-8d %-9.1f %-9.1f %s" % (q, name, th, pp, tg, "%.1f" % p95 if p95 >= 0 else "-"),
                  flush=True)
        best = max(res["octo -t 1"][1], res["octo -t 2"][1])
        best_pp = max(res["octo -t 1"][0], res["octo -t 2"][0])
        line = "%d%%: zero-config decode %.2f of the best fixed count, prompt %.2f" % (
            q, res["octo auto"][1] / best, res["octo auto"][0] / best_pp)
        if a.llama_bench:
            lb = max(res["llama.cpp -t 1"][1], res["llama.cpp -t 2"][1])
            lp = max(res["llama.cpp -t 1"][0], res["llama.cpp -t 2"][0])
            line += "; against llama.cpp's best: decode %.2fx, prompt %.2fx" % (res["octo auto"][1] / lb,
                                                                              res["octo auto"][0] / lp)
        summary.append(line)
    print("\n".join(summary))


if __name__ == "__main__":
    main()
