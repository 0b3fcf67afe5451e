#!/usr/bin/env python3
"""bench/cpu_timeline.py — token speed and latency while the CPU quota changes (docs/adaptation.md, issue 38).

Run it inside ../shared/tools/throttled.sh; it changes its own cgroup's quota every --window seconds
along --pattern (per cent of one CPU), as a device that throttles and recovers would:

    throttled.sh 200 -- python3 bench/cpu_timeline.py MODEL --threads 0   # octo picks (zero-config)
    throttled.sh 200 -- python3 bench/cpu_timeline.py MODEL --threads 2   # fixed

It generates greedily, --tokens at a time, back to back, for len(pattern) windows, and records the
time between consecutive tokens of a generation (what an app waits for a token; the prompt of each
generation is not counted). Per window: the quota, tok/s, p50 and p95 of those gaps, and the threads
octo computed on at its end. Then the spread of the windows' p95 (standard deviation, ms). Needs root,
libocto (OCTO_LIBRARY, or build/lib) and a cgroup-v1 cpu controller or cgroup v2.
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


def quota_file():
    """This process's cgroup CPU quota file (v1 cpu.cfs_quota_us, v2 cpu.max)."""
    mounts = [l.split() for l in open("/proc/self/mounts")]
    for line in open("/proc/self/cgroup"):
        _, ctrl, path = line.rstrip("\n").split(":", 2)
        for m in mounts:
            if m[2] == "cgroup" and "cpu" in m[3].split(",") and "cpu" in ctrl.split(","):
                return os.path.join(m[1], path.lstrip("/"), "cpu.cfs_quota_us"), 1
            if m[2] == "cgroup2" and ctrl == "":
                return os.path.join(m[1], path.lstrip("/"), "cpu.max"), 2
    sys.exit("no cpu cgroup: run this inside throttled.sh")


def set_quota(qf, pct):
    path, version = qf
    with open(path, "w") as f:
        f.write(str(pct * 1000) if version == 1 else "%d 100000" % (pct * 1000))


def pct(xs, p):
    xs = sorted(xs)
    return xs[max(0, -(-len(xs) * p // 100) - 1)] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--window", type=float, default=10)
    ap.add_argument("--pattern", default="200,100,50,200,100,50")
    ap.add_argument("--tokens", type=int, default=128)
    a = ap.parse_args()
    qf = quota_file()
    pattern = [int(x) for x in a.pattern.split(",")]
    m = octo.Model(a.model, n_threads=a.threads)
    windows = [[] for _ in pattern]
    threads = [0] * len(pattern)
    set_quota(qf, pattern[0])
    t0 = time.monotonic()
    end = t0 + a.window * len(pattern)
    w = 0
    while time.monotonic() < end:
        last = None
        for _ in m.generate("Once upon a time", max_tokens=a.tokens, temperature=0):
            now = time.monotonic()
            if now >= end:
                break
            k = int((now - t0) // a.window)
            if k != w:  # the next window: the device changes
                threads[w] = m.stats().cpu_threads
                w = k
                set_quota(qf, pattern[w])
                last = None  # a gap across the change belongs to neither window
            if last is not None:
                windows[w].append((now - last) * 1e3)
            last = now
    threads[w] = m.stats().cpu_threads
    print("window quota%% tokens tok/s  p50_ms  p95_ms threads")
    p95s = []
    for i, gaps in enumerate(windows):
        p95s.append(pct(gaps, 95))
        print("%-6d %-6d %-6d %-6.1f %-7.2f %-7.2f %d" % (i, pattern[i], len(gaps), len(gaps) / a.window,
                                                       pct(gaps, 50), p95s[-1], threads[i]))
    print("threads %s: p95 across windows: mean %.2f ms, standard deviation %.2f ms, variance %.2f ms^2" % (
        a.threads or "auto", statistics.mean(p95s), statistics.pstdev(p95s), statistics.pvariance(p95s)))
    print("cpu_note: %s" % m.stats().cpu_note)
    m.close()


if __name__ == "__main__":
    main()
