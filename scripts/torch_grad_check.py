#!/usr/bin/python3
"""torch_grad_check.py MODEL.gguf DIR -- octo's gradient of a sequence's loss with respect to a LoRA
adapter, against PyTorch's autograd (an independent implementation, in float64).

DIR holds what tests/test_backward.c writes when OCTO_GRAD_DUMP=DIR is set: adapter.gguf, grad.f32
(octo's gradient in lora_values' layout: per adapted matrix, A's [rank][n_in] then B's transpose,
[rank][n_out]) and case.txt (the scale, octo's loss, the tokens). The model is a dense llama-family
GGUF with F32 tensors (stories260K). Needs Debian's python3-torch and python3-numpy
(apt-get install python3-torch); not part of the test suite. docs/training.md has the figures.

    mkdir -p /tmp/grad && OCTO_GRAD_DUMP=/tmp/grad OCTO_SOURCE_DIR=$PWD build/test_backward
    scripts/torch_grad_check.py models/stories260K.gguf /tmp/grad
"""
import math
import struct
import sys

try:
    import numpy as np
    import torch
except ImportError as e:
    sys.exit(f"torch_grad_check: {e.name} is missing (apt-get install python3-torch python3-numpy)")

# GGUF value types (the spec's numbering) and their struct formats
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9


class Reader:
    """The metadata and F32 tensors of a GGUF file (versions 2 and 3), in file order."""

    def __init__(self, path):
        self.b = open(path, "rb").read()
        self.at = 4
        if self.b[:4] != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        _, n_tensors, n_kv = self.take("<IQQ")
        self.kv = {}
        for _ in range(n_kv):
            key = self.string()
            self.kv[key] = self.value(self.take("<I")[0])
        infos = []
        for _ in range(n_tensors):
            name = self.string()
            dims = self.take("<I")[0]
            ne = self.take("<" + "Q" * dims)
            ttype, offset = self.take("<IQ")
            infos.append((name, ne, ttype, offset))
        align = self.kv.get("general.alignment", 32)
        base = (self.at + align - 1) // align * align
        self.tensors = {}
        for name, ne, ttype, offset in infos:
            if ttype != 0:
                sys.exit(f"{path}: tensor {name} is not F32 (type {ttype}): this check reads F32 models")
            n = math.prod(ne)
            a = np.frombuffer(self.b, dtype="<f4", count=n, offset=base + offset)
            self.tensors[name] = a.reshape(tuple(reversed(ne)))

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.at)
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")[0]
        s = self.b[self.at:self.at + n].decode("utf-8", "replace")
        self.at += n
        return s

    def value(self, vtype):
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype, n = self.take("<IQ")
            return [self.value(etype) for _ in range(n)]
        return self.take("<" + SCALARS[vtype])[0]


def t64(a):
    return torch.tensor(np.array(a, dtype=np.float64))


def rms_norm(x, w, eps):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rope(x, base, n_rot):
    """llama's rotation of adjacent pairs (x[2i], x[2i+1]) by pos * base^(-2i / n_rot); x: (n, heads, hd)."""
    n = x.shape[0]
    i = torch.arange(0, n_rot, 2, dtype=torch.float64)
    ang = torch.arange(n, dtype=torch.float64)[:, None] * base ** (-i / n_rot)
    c, s = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x0, x1 = x[..., 0:n_rot:2], x[..., 1:n_rot:2]
    out = x.clone()
    out[..., 0:n_rot:2] = x0 * c - x1 * s
    out[..., 1:n_rot:2] = x0 * s + x1 * c
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    model, d = Reader(sys.argv[1]), sys.argv[2]
    adapter = Reader(f"{d}/adapter.gguf")
    case = dict(line.split(" ", 1) for line in open(f"{d}/case.txt").read().splitlines())
    scale, octo_loss = float(case["scale"]), float(case["loss"])
    tokens = [int(t) for t in case["tokens"].split()]
    kv, W = model.kv, model.tensors
    arch = kv["general.architecture"]
    E, L = kv[f"{arch}.embedding_length"], kv[f"{arch}.block_count"]
    H, KV = kv[f"{arch}.attention.head_count"], kv[f"{arch}.attention.head_count_kv"]
    eps, base = kv[f"{arch}.attention.layer_norm_rms_epsilon"], kv.get(f"{arch}.rope.freq_base", 10000.0)
    hd = E // H
    n_rot = kv.get(f"{arch}.rope.dimension_count", hd)
    alpha = adapter.kv.get("adapter.lora.alpha", 0.0)
    # the adapter's pairs, in file order, as leaves of the graph
    pairs = {}
    for name, a in adapter.tensors.items():
        if name.endswith(".lora_a"):
            base_name = name[: -len(".lora_a")]
            A = t64(a).requires_grad_()
            B = t64(adapter.tensors[base_name + ".lora_b"]).requires_grad_()
            pairs[base_name] = (A, B)

    def lin(x, name):
        y = x @ t64(W[name]).T
        if name in pairs:
            A, B = pairs[name]
            r = A.shape[0]
            s = scale * (alpha / r if alpha else 1.0)
            y = y + s * (x @ A.T) @ B.T
        return y

    n = len(tokens)
    x = t64(W["token_embd.weight"])[tokens]
    mask = torch.triu(torch.full((n, n), float("-inf"), dtype=torch.float64), 1)
    for l in range(L):
        p = f"blk.{l}."
        h = rms_norm(x, t64(W[p + "attn_norm.weight"]), eps)
        q = rope(lin(h, p + "attn_q.weight").view(n, H, hd), base, n_rot)
        k = rope(lin(h, p + "attn_k.weight").view(n, KV, hd), base, n_rot)
        v = lin(h, p + "attn_v.weight").view(n, KV, hd)
        k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        att = torch.softmax(torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask, dim=-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(n, E)
        x = x + lin(o, p + "attn_output.weight")
        h = rms_norm(x, t64(W[p + "ffn_norm.weight"]), eps)
        x = x + lin(torch.nn.functional.silu(lin(h, p + "ffn_gate.weight")) * lin(h, p + "ffn_up.weight"),
                    p + "ffn_down.weight")
    out = W["output.weight"] if "output.weight" in W else W["token_embd.weight"]
    logits = rms_norm(x, t64(W["output_norm.weight"]), eps) @ t64(out).T
    loss = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(tokens[1:]))
    loss.backward()
    # PyTorch's gradient in octo's layout: per pair A, then B transposed
    want = np.concatenate([np.concatenate([A.grad.numpy().ravel(), B.grad.numpy().T.ravel()])
                           for A, B in pairs.values()])
    got = np.fromfile(f"{d}/grad.f32", dtype="<f4").astype(np.float64)
    if got.shape != want.shape:
        sys.exit(f"octo's gradient has {got.size} values, PyTorch's {want.size}")
    diff = got - want
    rel = np.linalg.norm(diff) / np.linalg.norm(want)
    worst = np.max(np.abs(diff)) / np.max(np.abs(want))
    print(f"loss: octo {octo_loss:.9f}, PyTorch (float64) {loss.item():.9f}, relative difference "
          f"{abs(octo_loss - loss.item()) / loss.item():.3g}")
    print(f"gradient: {want.size} values of {len(pairs)} matrices; |octo - torch| / |torch| = {rel:.3g}; "
          f"largest difference / largest value = {worst:.3g}")
    sys.exit(0 if rel < 1e-4 else 1)


main()
