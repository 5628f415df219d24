#!/usr/bin/env python3
"""The GPU catalogue's memory-bound kernel classes measured on a part, from measure.py's memory.csv.

Each class is the central value (midpoint of the range) of its rows at large sizes, as a fraction of the part's
nominal HBM bandwidth, rounded to two places; the sources name the range. The kernel each class stands for is the
one the frameworks run (Megatron-core's jit_fuser is torch.compile from PyTorch 2.2 on, megatron/core/jit.py):

  layernorm_torch, rmsnorm_torch   F.layer_norm / F.rms_norm, eager, forward and backward
  dropout, residual_add            F.dropout, a 16-bit add, eager
  gelu, bias_dropout_add, rope     Megatron's bias-GeLU, bias-dropout-add and a rotary embedding under torch.compile
  embedding                        F.embedding's gather, forward (every row: 4K-16K tokens)
  adam                             torch.optim.AdamW(fused=True), 28 bytes per parameter
  gradient_accumulation            fp32 main gradient += 16-bit gradient (torch._foreach_add_)

Usage: python3 tools/kernels/memory_classes.py GPU NOMINAL_GBPS   (GPU: a folder of tools/kernels/data, e.g. h200)
prints the catalogue's memory_kernels entries and their sources as JSON.
"""

import csv
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LARGE = 100_000_000  # elements: large enough that a kernel runs at its streaming rate (100-420M in the runs)

# class -> (kernel_class, implementation, what the source says it is); every size, or only LARGE and up
CLASSES = {
    "layernorm_torch": ("layernorm", "torch", "F.layer_norm", True),
    "rmsnorm_torch": ("rmsnorm", "torch", "F.rms_norm (a fused kernel in PyTorch 2.11)", True),
    "dropout": ("dropout", "torch", "F.dropout", True),
    "gelu": ("gelu", "torch_compile", "Megatron's bias-GeLU (tanh) under torch.compile (megatron/core/jit.py's "
             "jit_fuser)", True),
    "bias_dropout_add": ("bias_dropout_add", "torch_compile", "Megatron-core's bias_dropout_add under its jit_fuser, "
                         "which is torch.compile from PyTorch 2.2 on (megatron/core/jit.py)", True),
    "residual_add": ("residual_add", "torch", "a 16-bit add", True),
    "rope": ("rope", "torch_compile", "rotary embedding fused by torch.compile (one Triton kernel, standing in for "
             "Transformer Engine's fused RoPE)", True),
    "embedding": ("embedding", "torch", "F.embedding gather, 4K-16K tokens", False),
    "adam": ("adam", "torch_fused", "torch.optim.AdamW(fused=True) on 1 Gi fp32 parameters, 28 bytes per parameter",
             False),
    "gradient_accumulation": ("gradient_accumulation", "torch_foreach", "fp32 main gradient += bf16 gradient "
                              "(torch._foreach_add_)", False),
}


def rows(gpu):
    with open(os.path.join(HERE, "data", gpu, "memory.csv")) as fh:
        return list(csv.DictReader(fh))


def classes(gpu, nominal_gbps):
    """{class: {direction: fraction}}, {class: source text}."""
    table = rows(gpu)
    with open(os.path.join(HERE, "data", gpu, "env.txt")) as fh:
        part = fh.readline().strip().removeprefix("gpu ").split(",")[0]
        software = fh.readline().strip().split(", cuDNN")[0].replace("torch ", "PyTorch ").split("+")[0]
    fractions, sources = {}, {}
    for name, (kernel, impl, what, large_only) in CLASSES.items():
        ranges = {}
        for r in table:
            if r["kernel_class"] == kernel and r["implementation"] == impl and r["direction"] in ("fwd", "bwd", "step"):
                if large_only and int(r["elements"]) < LARGE:
                    continue
                direction = "backward" if r["direction"] == "bwd" else "forward"
                ranges.setdefault(direction, []).append(float(r["gbps"]))
        if not ranges:
            continue
        fractions[name] = {d: round((min(v) + max(v)) / 2 / nominal_gbps, 2) for d, v in sorted(ranges.items(),
                                                                                                 reverse=True)}
        spans = []
        for d, v in sorted(ranges.items(), reverse=True):
            span = "%.0f GB/s" % v[0] if len(v) == 1 else "%.0f-%.0f GB/s (central %.0f)" % (
                min(v), max(v), (min(v) + max(v)) / 2)
            spans.append((d + " " if len(ranges) > 1 else "") + span)
        sources[name] = "tools/kernels/data/%s/memory.csv (tools/kernels/measure.py on one %s, %s): %s: %s" % (
            gpu, part, software, what, ", ".join(spans))
    return fractions, sources


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: memory_classes.py GPU NOMINAL_GBPS")
    fractions, sources = classes(sys.argv[1], float(sys.argv[2]))
    print(json.dumps({"memory_kernels": fractions,
                      "sources": {"memory_kernels/" + k: v for k, v in sources.items()}}, indent=2))


if __name__ == "__main__":
    main()
