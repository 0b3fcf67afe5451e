#!/usr/bin/env python3
"""octo's --lora against llama.cpp's own tools, with adapters written by llama.cpp's gguf-py.

Not part of the test suite (it needs gguf-py, numpy and a llama.cpp build, which the project
does not install). For each case it writes random A and B for every projection of BASE (q, k,
v, o, gate, up, down of every layer) with gguf-py's GGUFWriter, merges them into BASE with
llama-export-lora, and compares `octo logits BASE --lora ...` with `octo logits MERGED`:
the largest and the rms difference over every position's logits, beside how far the adapters
move the base's logits (so a check that compares two unchanged models cannot pass unnoticed).
Last, a scale of 0 must give the base's logits bit for bit. Exits 1 when a difference is past its
bound: 1e-4 where the merge is written in F32 (an F32 base), else the golden tolerance (0.3 largest,
0.07 rms: the merge rounds W + s B A to F16), or when scale 0 differs.

    /usr/bin/python3 scripts/lora_ggufpy_check.py --gguf-py LLAMA_SRC/gguf-py \
        --export-lora LLAMA_BUILD/bin/llama-export-lora --octo build/octo BASE.gguf WORKDIR
"""
import argparse
import os
import subprocess
import sys

PROJECTIONS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")
PROMPT = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."


def projections(reader):
    """(name, n_in, n_out) of every projection matrix of the base, in file order."""
    out = []
    for t in reader.tensors:
        parts = t.name.split(".")
        if len(parts) == 4 and parts[0] == "blk" and parts[2] in PROJECTIONS and parts[3] == "weight":
            out.append((t.name[: -len(".weight")], int(t.shape[0]), int(t.shape[1])))
    return out


def write_adapter(gguf, np, arch, mats, rank, dtype, seed, path):
    """A random rank-`rank` adapter in `dtype` for every matrix in `mats`, alpha = rank / 2."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(path, arch)
    w.add_string("general.type", "adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", rank / 2.0)
    for name, n_in, n_out in mats:
        a = rng.normal(0.0, 1.0 / np.sqrt(n_in), size=(rank, n_in))     # ggml [n_in, rank]
        b = rng.normal(0.0, 0.05, size=(n_out, rank))                    # ggml [rank, n_out]
        w.add_tensor(name + ".weight.lora_a", a.astype(dtype))
        w.add_tensor(name + ".weight.lora_b", b.astype(dtype))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def logits(np, octo, model, loras, out):
    cmd = [octo, "logits", "-m", model, "--prompt", PROMPT, "--out", out]
    for path, scale in loras:
        cmd += ["--lora-scaled", path, repr(scale)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return np.fromfile(out, dtype="<f4")


def merge(export_lora, base, loras, out):
    cmd = [export_lora, "-m", base, "-o", out, "-t", "2"]
    for path, scale in loras:
        cmd += ["--lora-scaled", path, repr(scale)]
    env = dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(export_lora))
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True, help="llama.cpp's gguf-py folder")
    ap.add_argument("--export-lora", required=True, help="llama.cpp's llama-export-lora binary")
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("base")
    ap.add_argument("work")
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import numpy as np
    import gguf

    os.makedirs(a.work, exist_ok=True)
    reader = gguf.GGUFReader(a.base)
    arch = bytes(reader.fields["general.architecture"].parts[-1]).decode()
    mats = projections(reader)
    if not mats:
        sys.exit("no projection matrices found in " + a.base)
    p = lambda name: os.path.join(a.work, name)
    write_adapter(gguf, np, arch, mats, 8, np.float32, 1, p("r8-f32.gguf"))
    write_adapter(gguf, np, arch, mats, 64, np.float16, 2, p("r64-f16.gguf"))
    base = logits(np, a.octo, a.base, [], p("base.f32"))
    cases = [("rank 8 F32", [(p("r8-f32.gguf"), 1.0)]),
             ("rank 64 F16", [(p("r64-f16.gguf"), 1.0)]),
             ("both at 0.5 and 1.5", [(p("r8-f32.gguf"), 0.5), (p("r64-f16.gguf"), 1.5)])]
    print(f"{a.base}: {arch}, {len(mats)} matrices adapted, {base.size} logits")
    adapted = {name + ".weight" for name, _, _ in mats}
    f32 = all(int(t.tensor_type) == 0 for t in reader.tensors if t.name in adapted)  # GGML_TYPE_F32
    bound_max, bound_rms = (1e-4, 1e-4) if f32 else (0.3, 0.07)
    failed = False
    for label, loras in cases:
        merge(a.export_lora, a.base, loras, p("merged.gguf"))
        ours = logits(np, a.octo, a.base, loras, p("lora.f32"))
        theirs = logits(np, a.octo, p("merged.gguf"), [], p("merged.f32"))
        d = np.abs(ours - theirs)
        moved = np.abs(ours - base).max()
        rms = float(np.sqrt((d * d).mean()))
        print(f"{label:22s} max|octo --lora - merged| {d.max():.3g}  rms {rms:.3g}"
              f"  (max |logit| {np.abs(ours).max():.3g}; the adapters move the base's logits by up to {moved:.3g})")
        failed |= bool(d.max() > bound_max or rms > bound_rms or moved < 0.1)
    zero = logits(np, a.octo, a.base, [(p("r8-f32.gguf"), 0.0)], p("zero.f32"))
    same = bool(np.array_equal(zero.view("<u4"), base.view("<u4")))
    print("scale 0 equals the base bit for bit:", same)
    print(f"bounds: max {bound_max:g}, rms {bound_rms:g}:", "passed" if same and not failed else "FAILED")
    sys.exit(0 if same and not failed else 1)


if __name__ == "__main__":
    main()
