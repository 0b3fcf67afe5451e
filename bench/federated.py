#!/usr/bin/env python3
"""bench/federated.py — federated averaging simulated with a real model, for docs/federated.md.

    /usr/bin/python3 bench/federated.py --base models/stories260K.gguf --text TEXT --work DIR
        [--devices 8] [--rounds 5] [--experts 8] [--used 2] [--epochs 1] [--batch 4] [--seq-len 64]
        [--rank 8] [--lr 3e-3] [--targets gate,up,down,router] [--held 12]

The base is upcycled to an MoE (`octo upcycle`, no healing). TEXT's paragraphs are dealt to the devices by
topic (the first of the devices' words a paragraph holds; the others unused), each device's last HELD
paragraphs held out. Each round every device trains from the previous global (`octo finetune --fl-round`,
A frozen) for EPOCHS passes over its own shard (so a larger shard trains on more tokens and weighs more)
and uploads an update; `octo fedavg` averages them. Measured:
  - bandwidth: per device and round, the update's bytes against a dense one's, and the experts it reached;
  - exactness: each global against the dense weighted average computed here from the update files (numpy,
    absent experts at weight 0), and against the global of two partial aggregates (halves) averaged;
  - quality: the mean held-out loss (nats per token, `octo eval`) of the base and of each round's global on
    every device's held-out paragraphs, and of centralized fine-tuning on all shards together with the same
    token budget (the steps of every device and round, on the shards pooled), with A frozen as in the federation
    and with A trained.
Prints markdown tables and writes DIR/federated.json. Machine: say which one in the docs.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np

OCTO = os.environ.get("OCTO_BIN", "build/octo")
WORDS = ["dog", "cat", "bird", "ball", "tree", "fish", "car", "cake", "flower", "boat", "bear", "sun"]


def octo(*args):
    r = subprocess.run([OCTO, *map(str, args)], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"octo {' '.join(map(str, args))}: {r.stderr.strip()}")
    return r


# ---------------------------------------------------------------- a GGUF's keys and F32 tensors

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf(path):
    b = open(path, "rb").read()
    pos = 4

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, b, pos)[0]
        pos += struct.calcsize(fmt)
        return v

    def string():
        nonlocal pos
        n = take("<Q")
        pos += n
        return b[pos - n:pos].decode()

    def value(t):
        if t == 8:
            return string()
        if t == 9:
            et, n = take("<I"), take("<Q")
            return [value(et) for _ in range(n)]
        return take(SCALARS[t])

    _, n_t, n_kv = take("<I"), take("<Q"), take("<Q")
    kv = {}
    for _ in range(n_kv):
        k = string()
        kv[k] = value(take("<I"))
    infos = []
    for _ in range(n_t):
        name, nd = string(), take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, ne, take("<I"), take("<Q")))
    align = kv.get("general.alignment", 32)
    base = (pos + align - 1) // align * align
    tensors = {}
    for name, ne, t, off in infos:
        assert t == 0, f"{path}: {name} is not F32"
        n = int(np.prod(ne))
        tensors[name] = np.frombuffer(b, np.float32, n, base + off).reshape(list(reversed(ne))).astype(np.float64)
    return kv, tensors


def group_b(tensors, name):
    """A group's B ([rows, rank]) in a global adapter: 'X.lora_b' or expert e of 'X.lora_b' ('X.lora_b.e')."""
    m = re.fullmatch(r"(.*\.lora_b)(?:\.(\d+))?", name)
    t = tensors[m.group(1)]
    return t[int(m.group(2))] if m.group(2) else t


def dense_average(prev, updates):
    """prev's B plus each group's weighted mean over all updates (an update without it: weight 0)."""
    out = {k: v.copy() for k, v in prev.items()}
    sums, weights = {}, {}
    for kv, t in updates:
        for i, name in enumerate(t):
            w = kv["fl.weights"][i]
            sums[name] = sums.get(name, 0) + w * t[name]
            weights[name] = weights.get(name, 0) + w
    for name in sums:
        group_b(out, name)[...] += sums[name] / weights[name]
    return out


def max_diff(a, b):
    return max(float(np.max(np.abs(a[k] - b[k]))) for k in a if k.endswith(".lora_b"))


# ---------------------------------------------------------------- data

def shards(text, devices, held):
    paras = [p.strip() for p in open(text, encoding="utf-8").read().split("\n\n") if len(p.split()) > 20]
    words = WORDS[:devices]
    got = {w: [] for w in words}
    for p in paras:
        low = p.lower()
        for w in words:
            if re.search(rf"\b{w}s?\b", low):
                got[w].append(p)
                break
    return [(w, got[w][:-held], got[w][-held:]) for w in words]


def held_loss(model, lora, files):
    """Mean loss (nats per token) over the held-out paragraph files (each scored by `octo eval`)."""
    nll = n = 0.0
    for f in files:
        args = ["eval", "-m", model, "-f", f, "--json", "--kv-plain"] + (["--lora", lora] if lora else [])
        j = json.loads([x for x in octo(*args).stdout.splitlines() if x.startswith("{")][0])
        nll += j["scored"] * np.log(j["ppl"])
        n += j["scored"]
    return nll / n


# ---------------------------------------------------------------- the federation

def train(a, moe, data, out, round_, from_, device, steps, extra=()):
    args = ["finetune", "-m", moe, "-f", data, "-o", out, "--steps", steps, "--batch", a.batch, "--seq-len",
            a.seq_len, "--rank", a.rank, "--lr", a.lr, "--targets", a.targets, "--quiet", "--restart", *extra]
    if round_:
        args += ["--fl-round", round_, "--fl-device", device, "--seed", 1 if round_ == 1 else round_]
    if from_:
        args += ["--from", from_]
    err = octo(*args).stderr
    m = re.search(r"update: (\d+) of (\d+) groups sent, ([\d.]+) KiB of values \(a dense update: ([\d.]+) KiB", err)
    e = re.search(r"experts: (\d+) of (\d+) reached", err)
    return {"groups_sent": int(m.group(1)), "groups": int(m.group(2)), "kib": float(m.group(3)),
            "dense_kib": float(m.group(4)), "experts_reached": int(e.group(1)), "experts": int(e.group(2))} if m else {}


def local_steps(a, moe, path):
    """EPOCHS passes over the file: its sequences of seq-len tokens, batch a step."""
    n = len(octo("tokenize", "-m", moe, "-f", path).stdout.split())
    return max(1, round(a.epochs * (n / a.seq_len) / a.batch))


def federation(a, moe, devs, held_files):
    rows, quality, exact = [], [], []
    quality.append([held_loss(moe, None, f) for f in held_files])
    prev = None
    for r in range(1, a.rounds + 1):
        ups = []
        for d, (word, train_f, _) in enumerate(devs):
            u = f"{a.work}/u{r}-{d}.gguf"
            steps = local_steps(a, moe, train_f)
            rows.append({"round": r, "device": d, "topic": word, "steps": steps,
                         **train(a, moe, train_f, u, r, prev, f"dev{d}", steps)})
            ups.append(u)
        g = f"{a.work}/global{r}.gguf"
        base_args = ["--from", prev] if prev else []
        octo("fedavg", "-m", moe, *base_args, "-o", g, *ups)
        half = len(ups) // 2
        octo("fedavg", "-m", moe, "--partial", "-o", f"{a.work}/p1.gguf", *ups[:half])
        octo("fedavg", "-m", moe, "--partial", "-o", f"{a.work}/p2.gguf", *ups[half:])
        octo("fedavg", "-m", moe, *base_args, "-o", f"{a.work}/halves.gguf", f"{a.work}/p1.gguf", f"{a.work}/p2.gguf")
        got = read_gguf(g)[1]
        start = read_gguf(prev)[1] if prev else {k: np.zeros_like(v) for k, v in got.items()}
        want = dense_average(start, [read_gguf(u) for u in ups])
        exact.append({"round": r, "vs_dense": max_diff(got, want), "vs_halves": max_diff(got, read_gguf(f"{a.work}/halves.gguf")[1]),
                      "largest_b": max(float(np.max(np.abs(v))) for k, v in got.items() if k.endswith(".lora_b"))})
        quality.append([held_loss(moe, g, f) for f in held_files])
        print(f"round {r}: held-out {np.mean(quality[-1]):.4f} (base {np.mean(quality[0]):.4f}); exact {exact[-1]}",
              file=sys.stderr)
        prev = g
    return rows, quality, exact, prev


def centralized(a, moe, devs, held_files):
    pool = f"{a.work}/all-train.txt"
    with open(pool, "w", encoding="utf-8") as f:
        for _, t, _ in devs:
            f.write(open(t, encoding="utf-8").read())
    steps = a.rounds * sum(local_steps(a, moe, t) for _, t, _ in devs)
    u, g, free = f"{a.work}/central-u.gguf", f"{a.work}/central-frozen.gguf", f"{a.work}/central-free.gguf"
    train(a, moe, pool, u, 1, None, "central", steps)
    octo("fedavg", "-m", moe, "-o", g, u)
    train(a, moe, pool, free, 0, None, None, steps)
    return [held_loss(moe, g, f) for f in held_files], [held_loss(moe, free, f) for f in held_files]


def write_shards(a, parts):
    devs, held_files = [], []
    for d, (word, tr, he) in enumerate(parts):
        t = f"{a.work}/train-{d}.txt"
        open(t, "w", encoding="utf-8").write("\n\n".join(tr) + "\n")
        files = []
        for i, p in enumerate(he):
            files.append(f"{a.work}/held-{d}-{i}.txt")
            open(files[-1], "w", encoding="utf-8").write(p + "\n")
        devs.append((word, t, files))
        held_files.append(files)
        print(f"device {d} ({word}): {len(tr)} paragraphs to train on, {len(he)} held out", file=sys.stderr)
    return devs, held_files


def main():
    ap = argparse.ArgumentParser()
    for k, v in [("--base", None), ("--text", None), ("--work", None), ("--devices", 8), ("--rounds", 5),
                 ("--experts", 8), ("--used", 2), ("--epochs", 1.0), ("--batch", 4), ("--seq-len", 64), ("--rank", 8),
                 ("--lr", "3e-3"), ("--targets", "gate,up,down,router"), ("--held", 12)]:
        ap.add_argument(k, default=v, required=v is None, type=type(v) if isinstance(v, (int, float)) else str)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    moe = f"{a.work}/moe.gguf"
    octo("upcycle", "-m", a.base, "-o", moe, "--experts", a.experts, "--experts-used", a.used, "-f", a.text)
    devs, held_files = write_shards(a, shards(a.text, a.devices, a.held))
    dense = [held_loss(a.base, None, f) for f in held_files]
    rows, quality, exact, _ = federation(a, moe, devs, held_files)
    central_frozen, central_free = centralized(a, moe, devs, held_files)
    report(a, rows, quality, exact, central_frozen, central_free, dense)


def report(a, rows, quality, exact, central_frozen, central_free, dense):
    print("| round | device (topic) | groups sent | KiB sent | dense KiB | bytes sent | experts reached |")
    print("|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['round']} | {x['device']} ({x['topic']}) | {x['groups_sent']} of {x['groups']} | {x['kib']:.1f} | "
              f"{x['dense_kib']:.1f} | {100 * x['kib'] / x['dense_kib']:.1f} % | "
              f"{x['experts_reached']} of {x['experts']} ({100 * x['experts_reached'] / x['experts']:.1f} %) |")
    print("\n| held-out loss | " + " | ".join(f"dev {d}" for d in range(len(quality[0]))) + " | mean |")
    print("|---|" + "---|" * (len(quality[0]) + 1))
    named = [("the dense model upcycled", dense), ("base (upcycled)", quality[0])] + [(f"global, round {r}", q) for r, q in enumerate(quality[1:], 1)]
    named += [("centralized, A frozen", central_frozen), ("centralized, A trained", central_free)]
    for name, q in named:
        print(f"| {name} | " + " | ".join(f"{x:.4f}" for x in q) + f" | {np.mean(q):.4f} |")
    print("\n| round | global vs dense weighted average | vs halves averaged | largest |B| |")
    print("|---|---|---|---|")
    for e in exact:
        print(f"| {e['round']} | {e['vs_dense']:.2g} | {e['vs_halves']:.2g} | {e['largest_b']:.3g} |")
    json.dump({"args": vars(a), "rows": rows, "quality": quality, "exact": exact, "central_frozen": central_frozen,
               "central_free": central_free, "dense": dense}, open(f"{a.work}/federated.json", "w"), indent=1)


if __name__ == "__main__":
    main()
