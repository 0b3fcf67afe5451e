#!/usr/bin/env python3
"""bench/serve_load.py — N concurrent streaming clients against `octo serve` (docs/server.md).

Starts `octo serve -m MODEL --parallel P` on a free loopback port, then for each N in --clients
runs N client threads that together send --requests streaming completions (max_tokens tokens,
temperature 0.8, a different seed each). Per N: requests/s, median time to first token, median
tokens/s per client (completion tokens over the request's time after its first token), and how
many responses completed with [DONE] and the full usage — nothing may be lost.

    python3 bench/serve_load.py MODEL [--octo build/octo] [--parallel 4] [--clients 1,2,4,8]
                                [--requests 32] [--max-tokens 64]
"""
import argparse
import json
import statistics
import subprocess
import threading
import time
import urllib.request


def one(url, seed, max_tokens):
    body = json.dumps({"prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0.8, "seed": seed,
                       "stream": True}).encode()
    t0 = time.perf_counter()
    first = None
    done = False
    usage = None
    with urllib.request.urlopen(urllib.request.Request(url + "/v1/completions", data=body), timeout=600) as r:
        for line in r:
            line = line.strip()
            if not line:
                continue
            if first is None:
                first = time.perf_counter()
            if line == b"data: [DONE]":
                done = True
                break
            ev = json.loads(line[6:])
            usage = ev.get("usage", usage)
    end = time.perf_counter()
    n = usage["completion_tokens"] if usage else 0
    return {"ttft": (first or end) - t0, "tps": n / max(end - (first or end), 1e-9), "ok": done and usage is not None}


def run(url, clients, requests, max_tokens):
    results, lock, seeds = [], threading.Lock(), iter(range(requests))

    def worker():
        while True:
            with lock:
                seed = next(seeds, None)
            if seed is None:
                return
            res = one(url, seed, max_tokens)
            with lock:
                results.append(res)

    t0 = time.perf_counter()
    ts = [threading.Thread(target=worker) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    wall = time.perf_counter() - t0
    ok = sum(r["ok"] for r in results)
    return (f"| {clients} | {len(results) / wall:.2f} | {1000 * statistics.median(r['ttft'] for r in results):.0f} ms | "
            f"{statistics.median(r['tps'] for r in results):.1f} | {ok} / {requests} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--max-tokens", type=int, default=64)
    a = ap.parse_args()
    srv = subprocess.Popen([a.octo, "serve", "-m", a.model, "--port", "0", "--parallel", str(a.parallel)],
                           stderr=subprocess.PIPE, text=True)
    try:
        line = srv.stderr.readline()
        url = line.split(" on ")[1].split(" ")[0]
        print(f"{a.model}: --parallel {a.parallel}, {a.requests} streaming requests of {a.max_tokens} tokens per row\n")
        print("| clients | requests/s | time to first token (median) | tokens/s per client (median) | completed |")
        print("|---:|---:|---:|---:|---:|")
        for n in [int(x) for x in a.clients.split(",")]:
            print(run(url, n, a.requests, a.max_tokens), flush=True)
    finally:
        srv.terminate()
        srv.wait()


if __name__ == "__main__":
    main()
