#!/usr/bin/env python3
"""bench/moe_belady.py — the best hit rate any expert cache could have had on a trace.

Reads a `--moe-trace` file (src/moe/trace.h: `TOKEN LAYER S1..Sk E1..Ek` per token and MoE
layer, `#` comments, the first giving the cache's slots) and replays its expert lookups through
Belady's MIN (evict the expert whose next use is farthest away: the offline optimum for a cache
of that many experts) and through plain LRU, beside the hit rate the trace itself records.

    python3 bench/moe_belady.py TRACE [--slots N] [--json]

One lookup per (token, layer, expert): exact for traces of one token per forward pass (decode);
a batch looks an expert up once for all its tokens, which this counts as hits after the first.
"""
import argparse
import json
import re
import sys
from collections import OrderedDict


def read_trace(path):
    slots, k, requests, hits = None, None, [], 0
    for line in open(path):
        if line.startswith("#"):
            m = re.search(r"used (\d+) slots (\d+)", line)
            if m:
                k, slots = int(m.group(1)), int(m.group(2))
            continue
        f = line.split()
        if not f:
            continue
        if k is None:
            k = (len(f) - 2) // 2
        layer = int(f[1])
        status, experts = f[2:2 + k], f[2 + k:2 + 2 * k]
        for s, e in zip(status, experts):
            requests.append((layer, int(e)))
            hits += s == "HIT"
    return slots, requests, hits


def belady(requests, slots):
    nxt, last = [0] * len(requests), {}
    for i in range(len(requests) - 1, -1, -1):
        nxt[i] = last.get(requests[i], float("inf"))
        last[requests[i]] = i
    resident, hits = {}, 0  # key -> next use
    for i, r in enumerate(requests):
        if r in resident:
            hits += 1
        elif len(resident) >= slots:
            victim = max(resident, key=resident.get)
            del resident[victim]
        resident[r] = nxt[i]
    return hits


def lru(requests, slots):
    cache, hits = OrderedDict(), 0
    for r in requests:
        if r in cache:
            hits += 1
            cache.move_to_end(r)
        else:
            if len(cache) >= slots:
                cache.popitem(last=False)
            cache[r] = True
    return hits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--slots", type=int, help="the cache's experts (default: the trace's header)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    slots, requests, hits = read_trace(a.trace)
    slots = a.slots or slots
    if not requests or not slots:
        sys.exit(f"{a.trace}: no lookups, or no slot count (give --slots)")
    n = len(requests)
    r = {"lookups": n, "slots": slots, "hit_rate": hits / n, "belady_hit_rate": belady(requests, slots) / n,
         "lru_replay_hit_rate": lru(requests, slots) / n}
    r["share_of_belady"] = r["hit_rate"] / r["belady_hit_rate"] if r["belady_hit_rate"] else 0.0
    if a.json:
        print(json.dumps(r))
    else:
        print(f"{n} lookups, {slots} slots: hit rate {100 * r['hit_rate']:.1f} % "
              f"(Belady's MIN {100 * r['belady_hit_rate']:.1f} %, {100 * r['share_of_belady']:.1f} % of it; "
              f"LRU replayed {100 * r['lru_replay_hit_rate']:.1f} %)")


if __name__ == "__main__":
    main()
