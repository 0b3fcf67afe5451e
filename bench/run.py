#!/usr/bin/env python3
"""bench/run.py — octo's speed on ~1B-parameter synthetic models, written to docs/benchmarks.md.

Makes the models with `octo synth` (once; they are kept in --models, never committed), runs
`octo bench` on each, and writes a table: decode tokens/s, decode as a percentage of the read
bandwidth measured in the same run, prefill tokens/s, the cost of verify batches, peak RSS.

With --llama-bench PATH it also runs llama.cpp's llama-bench on the same files, alternating
with octo run by run, and reports octo's figures as a ratio of it (same machine, same run).

    python3 bench/run.py [--octo build/octo] [--models /tmp/octo-bench] [--reps 3] [--threads 2]
                         [--only q4_0,q8_0] [--llama-bench PATH] [--out docs/benchmarks.md]
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

DENSE = ["--vocab", "32000", "--embd", "2048", "--layers", "22", "--heads", "32", "--kv-heads", "4",
         "--ff", "5632", "--ctx", "2048", "--seed", "1"]
MOE = ["--vocab", "32000", "--embd", "1024", "--layers", "8", "--heads", "16", "--kv-heads", "4", "--ff", "1536",
       "--experts", "8", "--experts-used", "2", "--ctx", "2048", "--seed", "2"]
MODELS = [  # name, synth arguments, description
    ("dense-q4_0", DENSE + ["--type", "q4_0"], "TinyLlama-1.1B shape, Q4_0"),
    ("dense-q8_0", DENSE + ["--type", "q8_0"], "TinyLlama-1.1B shape, Q8_0"),
    ("dense-q4_k", DENSE + ["--type", "q4_k"], "TinyLlama-1.1B shape, Q4_K"),
    ("dense-f16", DENSE + ["--type", "f16"], "TinyLlama-1.1B shape, F16"),
    ("moe-q4_0", MOE + ["--type", "q4_0"], "Mixtral-style MoE 1024 x 8 layers, 8 experts top-2, Q4_0"),
    ("moe-f16", MOE + ["--type", "f16"], "Mixtral-style MoE 1024 x 8 layers, 8 experts top-2, F16"),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def cpu_name():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def llama_bench(path, model, threads, p, n):
    out = run([path, "-m", model, "-p", str(p), "-n", str(n), "-t", str(threads), "-r", "1", "-o", "json"]).stdout
    pp = tg = None
    for r in json.loads(out):
        if r.get("n_prompt") == p and r.get("n_gen") == 0:
            pp = r["avg_ts"]
        if r.get("n_gen") == n and r.get("n_prompt") == 0:
            tg = r["avg_ts"]
    return pp, tg


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--models", default="/tmp/octo-bench")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--only", default="")
    ap.add_argument("--llama-bench", default="")
    ap.add_argument("--out", default="docs/benchmarks.md")
    a = ap.parse_args()
    os.makedirs(a.models, exist_ok=True)
    chosen = [m for m in MODELS if not a.only or m[0] in a.only.split(",")]
    rows = []
    for name, synth, desc in chosen:
        path = os.path.join(a.models, name + ".gguf")
        if not os.path.exists(path):
            print(f"making {path} ...", file=sys.stderr, flush=True)
            run([a.octo, "synth", "-o", path + ".tmp"] + synth)
            os.rename(path + ".tmp", path)
        print(f"benchmarking {name} ...", file=sys.stderr, flush=True)
        octo_runs, other = [], []
        for rep in range(a.reps if a.llama_bench else 1):
            r = json.loads(run([a.octo, "bench", "-m", path, "-p", str(a.prompt), "-n", str(a.gen),
                                "-t", str(a.threads), "-r", "1" if a.llama_bench else str(a.reps), "--json"]).stdout)
            octo_runs.append(r)
            if a.llama_bench:  # alternate: octo, other, octo, other, ...
                other.append(llama_bench(a.llama_bench, path, a.threads, a.prompt, a.gen))
        med = lambda key: statistics.median(r[key]["median"] if isinstance(r[key], dict) else r[key] for r in octo_runs)
        row = {
            "name": name, "desc": desc, "file_mib": os.path.getsize(path) / 2**20,
            "tg": med("gen_tokens_per_s"), "pp": med("prompt_tokens_per_s"),
            "gbps": med("achieved_gbps"), "bw": statistics.median(r["read_bandwidth_gbps"] for r in octo_runs),
            "bw_lo": min(r["read_bandwidth_min_gbps"] for r in octo_runs),
            "bw_hi": max(r["read_bandwidth_max_gbps"] for r in octo_runs),
            "pct": statistics.median(r["roofline_pct"] for r in octo_runs),  # decode median / probe median
            "rss_mib": max(r["peak_rss_bytes"] for r in octo_runs) / 2**20,
            "batch": octo_runs[-1]["batch_cost"], "batch_s": octo_runs[-1]["batch_seconds"],
            "path": octo_runs[-1]["cpu_path"],
            "bytes_tok_mib": octo_runs[-1]["weight_bytes_per_token"] / 2**20,
            "kv_mib": octo_runs[-1]["kv_bytes"] / 2**20,
        }
        if other:
            row["other_pp"] = statistics.median(o[0] for o in other if o[0])
            row["other_tg"] = statistics.median(o[1] for o in other if o[1])
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)

    lines = ["# Benchmarks", "",
             f"Measured by `python3 bench/run.py` on {time.strftime('%Y-%m-%d')}: {cpu_name()}, "
             f"{os.cpu_count()} cores, {a.threads} threads, kernels `{rows[0]['path'] if rows else '?'}`. "
             f"Prompt {a.prompt} tokens, generation {a.gen} tokens, medians of {a.reps} repetitions. "
             "Read bandwidth is measured in the same run by `octo bench` (1 GiB streamed by every thread, "
             "best of 5, just before and just after each repetition's decode); the percentage is the decode's "
             "median against the probes' median, since a shared host's bandwidth moves within seconds, faster "
             "than a decode run lasts (the range of all probes is given). Every model is larger than the "
             "last-level cache. Synthetic models with random weights (`octo synth`): speed does not "
             "depend on the values.", "",
             "| model | file MiB | read/token MiB | decode tok/s | GB/s | % of read bandwidth | prefill tok/s | "
             "prefill / decode | peak RSS MiB | weights + KV MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['name']} ({r['desc']}) | {r['file_mib']:.0f} | {r['bytes_tok_mib']:.0f} | {r['tg']:.2f} | "
                     f"{r['gbps']:.1f} | {r['pct']:.0f}% (of {r['bw']:.1f}, {r['bw_lo']:.0f}..{r['bw_hi']:.0f}) | {r['pp']:.1f} | "
                     f"{r['pp'] / r['tg']:.1f}x | {r['rss_mib']:.0f} | {r['file_mib'] + r['kv_mib']:.0f} |")
    lines += ["", "Cost of forwarding T tokens at once (after 64 tokens of context), as a multiple of one token "
              "(the one token's time in ms first):", "",
              "| model | T=1 ms | " + " | ".join(f"T={k}" for k in rows[0]["batch"]) + " |" if rows else "",
              "|---|---:|" + "---:|" * (len(rows[0]["batch"]) if rows else 0)]
    for r in rows:
        lines.append(f"| {r['name']} | {1e3 * r['batch_s'].get('1', 0):.1f} | "
                     + " | ".join(f"{v:.2f}x" for v in r["batch"].values()) + " |")
    if any("other_tg" in r for r in rows):
        lines += ["", f"Against llama.cpp (`{a.llama_bench}`), alternating run by run:", "",
                  "| model | octo decode / llama.cpp | octo prefill / llama.cpp |", "|---|---:|---:|"]
        for r in rows:
            if "other_tg" in r:
                lines.append(f"| {r['name']} | {r['tg'] / r['other_tg']:.2f}x | {r['pp'] / r['other_pp']:.2f}x |")
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    # Only the measured part is rewritten: text outside the markers (the reading of the
    # figures) is kept.
    begin, end = "<!-- bench/run.py: begin -->", "<!-- bench/run.py: end -->"
    table = begin + "\n" + "\n".join(lines[2:]) + "\n" + end
    old = open(a.out).read() if os.path.exists(a.out) else ""
    if begin in old and end in old:
        text = old[:old.index(begin)] + table + old[old.index(end) + len(end):]
    else:
        text = "\n".join(lines[:2]) + "\n" + table + "\n"
    with open(a.out, "w") as f:
        f.write(text)
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
