#!/usr/bin/env python3
"""bench/cpu_timeline.py — token speed and latency while the CPU quota changes (docs/adaptation.md, issue 38).

Run it inside ../shared/tools/throttled.sh; it changes its own cgroup's quota every --window seconds
along --pattern (per cent of one CPU), as a device that throttles and recovers would:

    throttled.sh 200 -- python3 bench/cpu_timeline.py MODEL --threads 0   # octo picks (zero-config)
    throttled.sh 200 -- python3 bench/cpu_timeline.py MODEL --threads 2   # fixed

With --busy, the pattern is instead how many other processes spin on a core in each window (a
neighbour that the cgroup files do not show: octo's measured signal has to find it); no quota is
changed and throttled.sh is not needed:

    python3 bench/cpu_timeline.py MODEL --busy --pattern 0,1,0,1,0,1

It generates greedily, --tokens at a time, back to back, for len(pattern) windows, and records the
time between consecutive tokens of a generation (what an app waits for a token; the prompt of each
generation is not counted). Per window: the quota, tok/s, p50 and p95 of those gaps, and the threads
octo computed on at its end. Then the spread of the windows' p95 (standard deviation, ms). Needs root,
libocto (OCTO_LIBRARY, or build/lib) and a cgroup-v1 cpu controller or cgroup v2.
"""
import argparse
import os
import subprocess
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


SPIN = "import ctypes\nctypes.CDLL(None).prctl(1, 9)\nwhile True: pass"


class Neighbours:
    """Processes that each spin on a core, as many as a window asks."""

    def __init__(self):
        self.procs = []

    def set(self, n):
        while len(self.procs) < n:
            # prctl(PR_SET_PDEATHSIG, SIGKILL): a neighbour never outlives this script
            self.procs.append(subprocess.Popen([sys.executable, "-c", SPIN]))
        while len(self.procs) > n:
            self.procs.pop().kill()


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
    ap.add_argument("--busy", action="store_true", help="the pattern is spinning neighbours, not a quota")
    a = ap.parse_args()
    neighbours = Neighbours()
    qf = None if a.busy else quota_file()
    change = neighbours.set if a.busy else lambda pct_: set_quota(qf, pct_)
    pattern = [int(x) for x in a.pattern.split(",")]
    m = octo.Model(a.model, n_threads=a.threads)
    windows = [[] for _ in pattern]
    threads = [0] * len(pattern)
    change(pattern[0])
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
                change(pattern[w])
                last = None  # a gap across the change belongs to neither window
            if last is not None:
                windows[w].append((now - last) * 1e3)
            last = now
    threads[w] = m.stats().cpu_threads
    neighbours.set(0)
    print("window %s tokens tok/s  p50_ms  p95_ms threads" % ("busy  " if a.busy else "quota%"))
    p95s = []
    for i, gaps in enumerate(windows):
        p95s.append(pct(gaps, 95))
        print("%-6d %-6d %-6d %-6.1f %-7.2f %-7.2f %d" % (i, pattern[i], len(gaps), len(gaps) / a.window,
                                                       pct(gaps, 50), p95s[-1], threads[i]))
    print("all windows: %d tokens, %.1f tok/s" % (sum(len(g) for g in windows), sum(len(g) for g in windows) / (
        a.window * len(pattern))))
    print("threads %s: p95 across windows: mean %.2f ms, standard deviation %.2f ms, variance %.2f ms^2" % (
        a.threads or "auto", statistics.mean(p95s), statistics.pstdev(p95s), statistics.pvariance(p95s)))
    print("cpu_note: %s (%d probes)" % (m.stats().cpu_note, m.stats().cpu_probes))
    m.close()


if __name__ == "__main__":
    main()
