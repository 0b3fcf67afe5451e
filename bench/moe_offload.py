#!/usr/bin/env python3
"""bench/moe_offload.py — an MoE model with its experts on flash: speed against its bounds (docs/moe.md).

1. The model file's read bandwidth: expert-sized direct reads (O_DIRECT, page cache dropped
   first), as the expert cache reads. With the bytes `octo bench` reports read per token, that
   gives the I/O bound (tokens/s if reading were all a token cost).
2. `octo bench` decode speed with every expert resident (the cache warm: the compute bound),
   then with the expert cache at each share of the experts' bytes, under each policy, with
   read-ahead auto, on and off, 2-bit copies off and on (`--int2 off,on`; `on` needs the
   sidecar, `octo moe-prep`); the page caches dropped before each run. Each row: tokens/s,
   bytes read per token, the I/O bound they set, tokens/s as a share of min(compute, I/O
   bound), hit rate, read-ahead recall, stall per token.

    python3 bench/moe_offload.py MODEL [--octo build/octo] [-n 64] [--shares 25,50]
                                 [--policies lhu,lru,lfu] [--prefetch auto,on,off] [--int2 off] [-r 3]

Configurations alternate within each repetition; the table gives each one's median run.
"""
import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import time


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def read_bandwidth(path, chunk=4 << 20, total=1 << 30):
    """Bytes/s of chunk-sized O_DIRECT reads spread over the file."""
    drop_cache(path)
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, chunk)
    n = max(1, min(total, size) // chunk)
    step = (size - chunk) // n // 4096 * 4096
    t0 = time.monotonic()
    got = 0
    for i in range(n):
        got += os.preadv(fd, [buf], i * step)
    dt = time.monotonic() - t0
    os.close(fd)
    return got / dt


def bench(a, model, extra):
    drop_cache(model)
    if os.path.exists(model + ".int2"):
        drop_cache(model + ".int2")
    cmd = [a.octo, "bench", "-m", model, "-p", "1", "-n", str(a.n), "-r", "1", "--batch", "1", "--json"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"{' '.join(cmd)}: {p.stderr.strip()}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def pct(x):
    return "—" if x < 0 else f"{100 * x:.1f} %"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--shares", default="25,50")
    ap.add_argument("--policies", default="lhu,lru,lfu")
    ap.add_argument("--prefetch", default="auto,on,off")
    ap.add_argument("--int2", default="off", help="2-bit copies: off, on or off,on")
    ap.add_argument("-r", type=int, default=3, help="repetitions (alternated)")
    a = ap.parse_args()
    bw = read_bandwidth(a.model)
    print(f"file read bandwidth (4 MiB direct reads, cold): {bw / 2**20:.0f} MiB/s\n")
    full = bench(a, a.model, ["--moe-cache", "100%", "--moe-prefetch", "off", "--moe-int2", "off"])
    # warm: a second run in one process is what bench's repetitions do; -r 1 here, so the
    # compute bound is the all-resident run with the cold reads taken out of its time
    print("| cache | policy | read-ahead | 2-bit copies | tokens/s | MiB read / token | I/O bound tok/s | "
          "share of min(compute, I/O) | hit rate | read-ahead recall | stall ms / token | copies read |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    tg = full["gen_tokens_per_s"]["median"]
    stall_s = full["expert_stall_ms_per_token"] / 1e3
    compute = 1.0 / max(1.0 / tg - stall_s, 1e-9)
    print(f"| 100 % | — | off | off | {tg:.2f} | {full['expert_bytes_read_per_token'] / 2**20:.1f} | — | "
          f"compute bound {compute:.1f} tok/s (stall removed) | {pct(full['expert_cache_hit_rate'])} | — | "
          f"{full['expert_stall_ms_per_token']:.1f} | — |")
    configs = [(sh, po, pf, i2) for sh in a.shares.split(",") for po in a.policies.split(",")
               for pf in a.prefetch.split(",") for i2 in a.int2.split(",")]
    runs = {c: [] for c in configs}
    for _ in range(a.r):
        for sh, po, pf, i2 in configs:
            runs[(sh, po, pf, i2)].append(bench(a, a.model, ["--moe-cache", sh + "%", "--moe-policy", po,
                                                             "--moe-prefetch", pf, "--moe-int2", i2]))
    for sh, po, pf, i2 in configs:
        rs = sorted(runs[(sh, po, pf, i2)], key=lambda r: r["gen_tokens_per_s"]["median"])
        r = rs[len(rs) // 2]
        t = r["gen_tokens_per_s"]["median"]
        per = r["expert_bytes_read_per_token"]
        io = bw / per if per > 0 else float("inf")
        bound = min(compute, io)
        spread = f"{rs[0]['gen_tokens_per_s']['median']:.2f}..{rs[-1]['gen_tokens_per_s']['median']:.2f}"
        print(f"| {sh} % | {po} | {pf} | {i2} | {t:.2f} ({spread}) | {per / 2**20:.1f} | {io:.1f} | {pct(t / bound)} | "
              f"{pct(r['expert_cache_hit_rate'])} | {pct(r['expert_prefetch_recall'])} | "
              f"{r['expert_stall_ms_per_token']:.1f} | {r.get('expert_int2_loads', 0)} |")


if __name__ == "__main__":
    main()
