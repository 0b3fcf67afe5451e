#!/usr/bin/env python3
"""bench/pressure_timeline.py — decode speed before, during and after memory pressure (docs/adaptation.md).

Loads MODEL once (zero-config, the memory watcher on) and generates greedy runs of --tokens tokens
back to back for --seconds, printing one row per run: when it started, its decode tokens/s, the
memory level in force, the packed weights' MiB, the expert cache's and the KV cache's bytes. Run it
inside ../shared/tools/pressure.sh so that another process takes memory from the same cgroup in the
middle:

    pressure.sh 1400 MODEL 900 8 10 -- python3 bench/pressure_timeline.py MODEL --seconds 40

At the end it prints the medians of three phases, read from octo's own stats rather than from the
clock: before (level none, no trim yet), during (a level above none) and after (level none again
after a regrow). Needs libocto (OCTO_LIBRARY, or build/lib on the path) and python/ on PYTHONPATH.
"""
import argparse
import os
import statistics
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "python"))
os.environ.setdefault("OCTO_LIBRARY", os.path.join(here, "..", "build", "lib", "libocto.so"))
import octo  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--tokens", type=int, default=48)
    ap.add_argument("--draft", default=None)
    ap.add_argument("--prompt", default="Once upon a time")
    a = ap.parse_args()
    m = octo.Model(a.model, draft_model=a.draft)
    t0 = time.monotonic()
    rows = []
    print("t_s    tok/s   level packed_mib experts_mib kv_mib trims regrows")
    while time.monotonic() - t0 < a.seconds:
        start = time.monotonic() - t0
        text = "".join(m.generate(a.prompt, max_tokens=a.tokens, temperature=0))
        s = m.stats()
        rows.append((start, s.decode_tokens_per_s, s.mem_level, s.mem_trims, s.mem_regrows, text))
        print("%-6.1f %-7.1f %-5d %-10.0f %-11.1f %-6.2f %-5d %d" % (
            start, s.decode_tokens_per_s, s.mem_level, s.weights_packed_bytes / 2**20, s.expert_cache_bytes / 2**20,
            s.kv_bytes / 2**20, s.mem_trims, s.mem_regrows), flush=True)
    phases = {"before": [r for r in rows if r[3] == 0],
              "during": [r for r in rows if r[2] > 0],
              "after": [r for r in rows if r[2] == 0 and r[4] > 0]}
    for name, rs in phases.items():
        tps = [r[1] for r in rs]
        print("%-7s runs %-3d median tok/s %s" % (name, len(rs), "%.1f" % statistics.median(tps) if tps else "-"))
    same = len({r[5] for r in rows}) == 1
    print("text: %s in every run" % ("the same" if same else "NOT the same"))
    print("stats: %s" % m.stats().mem_note)
    m.close()


if __name__ == "__main__":
    main()
