#!/usr/bin/env python3
"""Lists the per-GPU kernel shapes of the validation cases, for measure.py (which runs where no ../shared is).

Reads the scenarios `simtrain validate ... --keep DIR` writes (DIR/*.scenario.json) and writes one JSON file:
  gemm       [m, n, k, gpu, cases]    the linear layers' forward GEMM per tensor-parallel rank (Y[m,n] = X[m,k] W^T):
                                      QKV, attention projection, fc1, fc2 and the logits; measure.py derives the
                                      data- and weight-gradient GEMMs from it
  attention  [seq, head_dim, heads, gpu, cases]   fused attention per rank: heads = micro-batch x heads / TP
  tokens     [tokens, hidden, ffn, gated, gpu, cases]   the memory-bound kernels' sizes per rank (tokens / TP with
                                      sequence parallelism)
gpu is "a100" or "h100" (H100 and H800 cases); cases counts the scenarios that use the shape. Expert GEMMs of MoE
cases are left out (their token counts depend on routing).

Usage:
  build/simtrain validate ../shared/validation/cases.json tests/data/validation/cases.json --keep /tmp/keep
  python3 tools/kernels/validation_shapes.py /tmp/keep --out tools/kernels/data/validation_shapes.json
"""

import argparse
import collections
import glob
import json
import os


def gpu_family(topology):
    text = json.dumps(topology).lower()
    return "h100" if ("h100" in text or "h800" in text) else "a100"


def shapes(scenario):
    m, p = scenario["model"], scenario["plan"]
    h, a, s = m["hidden_size"], m["num_attention_heads"], m["seq_length"]
    kv = m.get("num_kv_heads", a)
    d = m.get("head_dim", h // a)
    f = m.get("ffn_hidden_size", 4 * h)
    gated = m.get("ffn_kind", "gelu") in ("swiglu", "geglu")
    t, b, cp = p.get("tp", 1), p.get("micro_batch", 1), p.get("cp", 1)
    tokens = b * s // cp
    gemm = [(tokens, (a + 2 * kv) * d // t, h), (tokens, h, a * d // t), (tokens, h, f // t),
            (tokens, m["vocab_size"] // t, h)]
    if "moe" not in m:
        gemm.append((tokens, (2 if gated else 1) * f // t, h))
    sp = p.get("sequence_parallel", False) and t > 1
    return gemm, (s // cp, d, b * a // t), (tokens // t if sp else tokens, h, f // t, gated)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("keep_dir")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    counts = {"gemm": collections.Counter(), "attention": collections.Counter(), "tokens": collections.Counter()}
    for path in sorted(glob.glob(os.path.join(args.keep_dir, "*.scenario.json"))):
        with open(path) as fh:
            scenario = json.load(fh)
        gpu = gpu_family(scenario["topology"])
        gemm, attention, tokens = shapes(scenario)
        for g in gemm:
            counts["gemm"][(*g, gpu)] += 1
        counts["attention"][(*attention, gpu)] += 1
        counts["tokens"][(*tokens, gpu)] += 1
    doc = {key: [[*k, n] for k, n in sorted(c.items())] for key, c in counts.items()}
    with open(args.out, "w") as fh:
        fh.write("{\n" + ",\n".join('  "%s": [\n    %s\n  ]' % (key, ",\n    ".join(json.dumps(r) for r in rows))
                                   for key, rows in doc.items()) + "\n}\n")
    print("%s: %s" % (args.out, ", ".join("%d %s" % (len(v), k) for k, v in doc.items())))


if __name__ == "__main__":
    main()
