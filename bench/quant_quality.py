#!/usr/bin/env python3
"""bench/quant_quality.py — what `octo quantize` costs in quality (docs/quantize.md).

For a model (F32 or F16 GGUF) and each type: quantize it plainly and with an importance matrix
(`-f CALIB`, the calibration text: the END of TEXT, disjoint from the evaluated start), then
`octo eval --ref MODEL` on the first N tokens of TEXT: perplexity, mean KL divergence and top-1
agreement against the unquantized model, with the KV cache uncompressed (--kv-plain) so only
the weights differ. One markdown row per type.

--llama DIR compares with llama.cpp's own quantizer instead: for each DIR/PREFIX-TYPE.gguf that
llama-quantize made from MODEL, octo quantizes MODEL with the same type per tensor
(--types-from) and both are evaluated the same way.

    python3 bench/quant_quality.py MODEL TEXT [--types q8_0,q4_0,...] [--ctx 512] [--calib-tokens 4096]
                                   [--llama DIR --prefix synth-dense] [--octo build/octo] [--scratch /tmp]
"""
import argparse
import json
import os
import subprocess
import tempfile

TYPES = "q8_0,q4_0,q4_1,q5_0,q5_1,q2_k,q3_k,q4_k,q5_k,q6_k"


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def evaluate(a, model, ref):
    out = run([a.octo, "eval", "-m", model, "--ref", ref, "-f", a.text, "--ctx", str(a.ctx), "--batch", "128",
               "--kv-plain", "--json"])
    return json.loads(out)


def quantize(a, out, t, calib=None, types_from=None):
    cmd = [a.octo, "quantize", "-q", "-m", a.model, "-o", out, "--type", t]
    if calib:
        cmd += ["-f", calib, "--calib-tokens", str(a.calib_tokens)]
    if types_from:
        cmd += ["--types-from", types_from]
    run(cmd)
    return os.path.getsize(out)


def row(name, size, e):
    return (f"| {name} | {size / 2**20:.1f} MiB | {e['ppl']:.4f} | {e['kld_mean']:.5f} | "
            f"{100 * e['top1_agreement']:.1f} % |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--types", default=TYPES)
    ap.add_argument("--ctx", type=int, default=512)
    ap.add_argument("--calib-tokens", type=int, default=4096)
    ap.add_argument("--calib-bytes", type=int, default=200000)
    ap.add_argument("--llama", default=None)
    ap.add_argument("--prefix", default="synth-dense")
    ap.add_argument("--octo", default="build/octo")
    ap.add_argument("--scratch", default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="octo-qq-", dir=a.scratch)
    calib = os.path.join(tmp, "calib.txt")
    with open(a.text, "rb") as f:
        data = f.read()
    with open(calib, "wb") as f:
        f.write(data[-a.calib_bytes:])
    ref = evaluate(a, a.model, a.model)
    print(f"{os.path.basename(a.model)}: perplexity {ref['ppl_ref']:.4f} over {ref['tokens']} tokens\n")
    if a.llama:
        print("| type | llama-quantize KLD | octo KLD | octo + imatrix KLD | llama / octo top-1 |")
        print("|---|---:|---:|---:|---:|")
    else:
        print("| type | size | perplexity | mean KLD | top-1 |")
        print("|---|---:|---:|---:|---:|")
    for t in a.types.split(","):
        out, out_im = os.path.join(tmp, f"{t}.gguf"), os.path.join(tmp, f"{t}-im.gguf")
        if a.llama:
            theirs = os.path.join(a.llama, f"{a.prefix}-{t}.gguf")
            if not os.path.exists(theirs):
                continue
            quantize(a, out, t, types_from=theirs)
            quantize(a, out_im, t, calib=calib, types_from=theirs)
            el, eo, ei = evaluate(a, theirs, a.model), evaluate(a, out, a.model), evaluate(a, out_im, a.model)
            print(f"| {t} | {el['kld_mean']:.5f} | {eo['kld_mean']:.5f} | {ei['kld_mean']:.5f} | "
                  f"{100 * el['top1_agreement']:.1f} / {100 * eo['top1_agreement']:.1f} % |", flush=True)
        else:
            size = quantize(a, out, t)
            e = evaluate(a, out, a.model)
            os.remove(out)
            size_im = quantize(a, out_im, t, calib=calib)
            ei = evaluate(a, out_im, a.model)
            os.remove(out_im)
            print(row(t, size, e), flush=True)
            print(row(t + " + imatrix", size_im, ei), flush=True)
        for p in (out, out_im):
            if os.path.exists(p):
                os.remove(p)
    os.remove(calib)
    os.rmdir(tmp)


if __name__ == "__main__":
    main()
