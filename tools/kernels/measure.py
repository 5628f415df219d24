#!/usr/bin/env python3
"""Measures, on the GPU it runs on, the kernels simtrain's compute model costs, at the shapes of the validation cases.

Writes CSV files that tools/kernels/build_tables.py reads like the public measurements (one row per kernel and shape):

  gemm.csv       m,n,k,batch,layout,tflops,source     the linear layers' forward (Y = X W^T), data-gradient (dX = dY W)
                                                      and weight-gradient (dW = dY^T X) GEMMs, bf16, per TP rank
  attention.csv  gpu,impl,direction,causal,head_dim,seq_len,batch,tflops,...   fused attention forward and backward
                                                      (flash_attn when installed, else PyTorch SDPA), FLOPs as
                                                      FlashAttention's benchmark counts them
  memory.csv     gpu,kernel_class,implementation,direction,hidden_or_n,dtype,gbps,source
                                                      LayerNorm / RMSNorm (torch; apex and Transformer Engine when
                                                      installed), softmax, dropout, GeLU, SwiGLU, residual add, RoPE,
                                                      fused AdamW, at minimal bytes (read + write) per kernel

Usage (on a GPU machine with PyTorch):
  python3 tools/kernels/measure.py CASES.json --out DIR [--quick]

Every GPU of the node should be busy with the same script (or every other GPU idle, and the report says which): the
sustained clock depends on it (see topologies/gpus/*.json sustained_compute_ratio). Times are medians of CUDA-event
timings after warm-up, with an L2 flush between repetitions.
"""

import argparse
import csv
import json
import math
import os
import statistics
import sys

import torch

DTYPE = torch.bfloat16


def timed(fn, reps=20, warmup=5):
    """Median seconds of fn() over reps, each after flushing the L2 cache."""
    flush = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def case_shapes(cases):
    """The per-rank linear-layer shapes and attention shapes of every case simtrain can express."""
    gemms, attention, hidden = set(), set(), set()
    for c in cases:
        m, p = c.get("model", {}), c.get("plan", {})
        try:
            h, heads, seq = int(m["hidden"]), int(m["heads"]), int(m["seq_len"])
            tp = int(p.get("tp") or 1)
        except (KeyError, TypeError, ValueError):
            continue
        f = int(m.get("ffn_hidden") or 4 * h)
        kv = int(m.get("kv_heads") or heads)
        d = h // heads
        tokens = int(p.get("micro_batch") or 1) * seq
        gated = str(m.get("activation", "")).lower() in ("swiglu", "silu")
        linear = [((heads + 2 * kv) * d // tp, h), (h, heads * d // tp), ((2 if gated else 1) * f // tp, h),
                  (h, f // tp)]
        for n_out, k_in in linear:
            gemms.add((tokens, n_out, k_in))
        attention.add((seq, d, max(1, heads // tp) * int(p.get("micro_batch") or 1)))
        hidden.add((tokens, h))
    return sorted(gemms), sorted(attention), sorted(hidden)


def measure_gemms(shapes, out, name):
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["m", "n", "k", "batch", "layout", "tflops", "source"])
        for tokens, n_out, k_in in shapes:
            x = torch.randn(tokens, k_in, dtype=DTYPE, device="cuda")
            wt = torch.randn(n_out, k_in, dtype=DTYPE, device="cuda")
            dy = torch.randn(tokens, n_out, dtype=DTYPE, device="cuda")
            flops = 2.0 * tokens * n_out * k_in
            for layout, fn, shape in (
                ("fwd", lambda: torch.nn.functional.linear(x, wt), (tokens, n_out, k_in)),
                ("dgrad", lambda: dy @ wt, (tokens, k_in, n_out)),
                ("wgrad", lambda: dy.t() @ x, (n_out, k_in, tokens)),
            ):
                t = timed(fn)
                w.writerow([*shape, 1, layout, "%.1f" % (flops / t / 1e12), name])
            fh.flush()


def measure_attention(shapes, out, gpu):
    try:
        from flash_attn import flash_attn_func  # noqa: F401
        impl = "flash_attn_2"
    except ImportError:
        flash_attn_func = None
        impl = "torch_sdpa"
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["gpu", "impl", "direction", "causal", "head_dim", "seq_len", "batch", "tflops",
                    "flop_convention", "source"])
        for seq, d, batch_heads in shapes:
            q, k, v = (torch.randn(1, seq, batch_heads, d, dtype=DTYPE, device="cuda", requires_grad=True)
                       for _ in range(3))
            if flash_attn_func is not None:
                forward = lambda: flash_attn_func(q, k, v, causal=True)  # noqa: E731
            else:
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
                forward = lambda: torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)  # noqa: E731
            flops = 4.0 * seq * seq * batch_heads * d / 2.0  # causal: half the score matrix
            t_fwd = timed(forward)
            o = forward()
            grad = torch.randn_like(o)
            t_bwd = timed(lambda: torch.autograd.grad(o, (q, k, v), grad, retain_graph=True))
            for direction, t, f in (("fwd", t_fwd, flops), ("bwd", t_bwd, 2.5 * flops)):
                w.writerow([gpu, impl, direction, "true", d, seq, batch_heads, "%.1f" % (f / t / 1e12),
                            "fwd = 4 s^2 h d, halved when causal; bwd = 2.5 x fwd", "tools/kernels/measure.py"])
            fh.flush()


def measure_memory(shapes, out, gpu):
    rows = []
    for tokens, h in shapes[:8]:
        x = torch.randn(tokens, h, dtype=DTYPE, device="cuda", requires_grad=True)
        e = x.element_size()
        ln = torch.nn.LayerNorm(h, device="cuda", dtype=DTYPE)
        rms = torch.nn.RMSNorm(h, device="cuda", dtype=DTYPE) if hasattr(torch.nn, "RMSNorm") else None
        y = ln(x)
        dy = torch.randn_like(y)
        rows.append(("layernorm", "torch", "fwd", h, 2 * e * x.numel(), timed(lambda: ln(x))))
        rows.append(("layernorm", "torch", "bwd", h, 3 * e * x.numel(),
                     timed(lambda: torch.autograd.grad(y, x, dy, retain_graph=True))))
        if rms is not None:
            r = rms(x)
            rows.append(("rmsnorm", "torch", "fwd", h, 2 * e * x.numel(), timed(lambda: rms(x))))
            rows.append(("rmsnorm", "torch", "bwd", h, 3 * e * x.numel(),
                         timed(lambda: torch.autograd.grad(r, x, dy, retain_graph=True))))
        plain = x.detach()
        rows.append(("dropout", "torch", "fwd", h, (2 * e + 1) * plain.numel(),
                     timed(lambda: torch.nn.functional.dropout(plain, 0.1, True))))
        rows.append(("gelu", "torch", "fwd", h, 2 * e * plain.numel(),
                     timed(lambda: torch.nn.functional.gelu(plain, approximate="tanh"))))
        rows.append(("residual_add", "torch", "fwd", h, 3 * e * plain.numel(), timed(lambda: plain + plain)))
        gate = torch.randn(tokens, 2 * h, dtype=DTYPE, device="cuda")
        rows.append(("swiglu", "torch", "fwd", h, 3 * e * plain.numel(),
                     timed(lambda: torch.nn.functional.silu(gate[:, :h]) * gate[:, h:])))
        rows.append(("softmax", "torch", "fwd", h, 2 * e * plain.numel(), timed(lambda: torch.softmax(plain, -1))))
    params = [torch.randn(64 * 1024 * 1024, device="cuda", requires_grad=True) for _ in range(4)]
    for p in params:
        p.grad = torch.randn_like(p)
    adam = torch.optim.AdamW(params, fused=True)
    n = sum(p.numel() for p in params)
    rows.append(("adam", "torch_fused", "step", n, 28 * n, timed(adam.step)))
    with open(out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["gpu", "kernel_class", "implementation", "direction", "hidden_or_n", "dtype", "gbps", "source"])
        for cls, impl, direction, size, nbytes, t in rows:
            w.writerow([gpu, cls, impl, direction, size, "bf16", "%.0f" % (nbytes / t / 1e9),
                        "tools/kernels/measure.py"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", help="a validation cases file (JSON array)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="a few shapes of each kind")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure.py: no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    cases = json.load(open(args.cases))
    cases = cases["cases"] if isinstance(cases, dict) else cases
    gemms, attention, hidden = case_shapes(cases)
    if args.quick:
        gemms, attention, hidden = gemms[::max(1, len(gemms) // 8)], attention[:4], hidden[:2]
    gpu = torch.cuda.get_device_name().replace(" ", "_")
    print("measure.py: %s, %d GEMM shapes, %d attention shapes" % (gpu, len(gemms), len(attention)), file=sys.stderr)
    measure_gemms(gemms, os.path.join(args.out, "gemm.csv"), "measure.py:" + gpu)
    measure_attention(attention, os.path.join(args.out, "attention.csv"), gpu)
    measure_memory(hidden, os.path.join(args.out, "memory.csv"), gpu)


if __name__ == "__main__":
    main()
