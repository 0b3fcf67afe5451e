#!/usr/bin/env python3
"""bench/deploy.py — what a deploy bundle saves at start and in memory (docs/deploy.md).

For each model (a GGUF file), `octo deploy --device host` writes its bundle into a scratch
folder, then:

1. Cold start: process start to the first token, i.e. the wall time of
   `octo run -m X -p PROMPT -n 1 --temp 0 --spec none`, for the GGUF and for the bundle,
   alternated, -r repetitions after one warm-up pair (the page cache warm for both: the
   time measured is what a load does, not what the disk does). Medians and their ratio.
2. Sharing: two processes decoding from the same file at once. For each, the resident (Rss)
   and proportional (Pss) bytes of its weight mappings (/proc/PID/smaps): a page the two
   share counts half in each one's Pss. Packed at load the pages are each process's own
   (Pss = Rss); mapped read-only from the bundle they are the page cache's, shared.

    python3 bench/deploy.py MODEL.gguf [MODEL2.gguf ...] [--octo build/octo] [-r 5] [--scratch DIR]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PROMPT = "Once upon a time"


def first_token_s(octo, model):
    t = time.perf_counter()
    subprocess.run([octo, "run", "-m", model, "-p", PROMPT, "-n", "1", "--temp", "0", "--spec", "none"],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def mapped_kib(pid, names):
    """Rss and Pss (KiB) of the mappings of files whose name ends with one of names."""
    rss = pss = 0
    inside = False
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if head and "-" in head[0] and len(head) >= 5:  # a mapping's first line
                inside = len(head) >= 6 and any(head[-1].endswith(n) for n in names)
            elif inside and head[0] == "Rss:":
                rss += int(head[1])
            elif inside and head[0] == "Pss:":
                pss += int(head[1])
    return rss, pss


def sharing(octo, model, names):
    """Two decoding processes at once: [(rss, pss)] of their weight mappings, in KiB."""
    cmd = [octo, "run", "-m", model, "-p", PROMPT, "-n", "100000", "--temp", "0", "--spec", "none", "--ctx", "512"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        time.sleep(1.0)
        last = None
        for _ in range(40):  # until both have touched every weight page (two equal readings)
            time.sleep(0.5)
            now = [mapped_kib(p.pid, names) for p in procs]
            if now == last:
                break
            last = now
        return now
    finally:
        for p in procs:
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("models", nargs="+")
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--scratch", default=None)
    a = ap.parse_args()
    scratch = tempfile.mkdtemp(prefix="octo-deploy-", dir=a.scratch)
    try:
        for model in a.models:
            bundle = os.path.join(scratch, os.path.basename(model) + ".bundle")
            subprocess.run([a.octo, "deploy", "-q", "-m", model, "--device", "host", "-o", bundle], check=True,
                           stdout=subprocess.DEVNULL)
            times = {"gguf": [], "bundle": []}
            for i in range(a.r + 1):
                for kind, path in (("gguf", model), ("bundle", bundle)):
                    s = first_token_s(a.octo, path)
                    if i:
                        times[kind].append(s)
            g, b = statistics.median(times["gguf"]), statistics.median(times["bundle"])
            print(f"{os.path.basename(model)}: first token  gguf {g:.3f} s  bundle {b:.3f} s  "
                  f"ratio {b / g:.3f}  (medians of {a.r}, alternated)")
            for kind, path, names in (("gguf", model, [os.path.basename(model)]),
                                      ("bundle", bundle, ["weights.octo"])):
                (r1, p1), (r2, p2) = sharing(a.octo, path, names)
                print(f"  two processes, {kind:6s}: weights Rss {r1 / 1024:.0f} + {r2 / 1024:.0f} MiB, "
                      f"Pss {p1 / 1024:.0f} + {p2 / 1024:.0f} MiB (Pss/Rss {p1 / max(r1, 1):.2f}, {p2 / max(r2, 1):.2f})")
            sys.stdout.flush()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
