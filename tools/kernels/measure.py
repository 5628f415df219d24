#!/usr/bin/env python3
"""Measures, on the GPU it runs on, the kernels simtrain's compute model costs, at the validation cases' shapes.

Reads the shapes validation_shapes.py lists (data/validation_shapes.json) and writes, in --out:

  gemm.csv       m,n,k,batch,layout,tflops,time_us,gpu_family,source   16-bit GEMMs per tensor-parallel rank: forward
                 (Y[m,n] = X[m,k] W^T), data gradient (dX = dY W) and weight gradient (dW = dY^T X), as
                 torch.nn.functional.linear and torch.matmul call cuBLAS; the H100 cases' shapes first
  fp8.csv        the same forward GEMMs in FP8 (E4M3, torch._scaled_mm, per-tensor scales, bf16 output) beside bf16
  fp8_layouts.csv  (--fp8-layouts, instead of the rest) FP8 beside bf16 at the H100 cases' forward, data-gradient and
                 weight-gradient GEMMs, each at its own (m, n, k)
  attention.csv  impl,direction,causal,head_dim,seq_len,heads,tflops,time_us,source   fused attention through
                 torch's scaled_dot_product_attention with one backend forced (flash = FlashAttention-2 as built into
                 PyTorch, cudnn = cuDNN's fused attention, which Transformer Engine calls on Hopper); FLOPs as
                 FlashAttention's benchmark counts them (forward 4 s^2 heads d, halved when causal; backward 2.5x)
  memory.csv     kernel_class,implementation,direction,elements,hidden,bytes,time_us,gbps,source   memory-bound
                 kernels at simtrain's byte counts (sim/workload/layer_program.cpp), eager PyTorch and, where it
                 fuses what eager runs as several kernels, torch.compile (Inductor's Triton kernels)
  env.txt        torch, CUDA and cuDNN versions; the GPU's clocks, power limit and temperature before and after

Times are medians of CUDA-event timings after warm-up, each repetition after a 256 MiB write that flushes the L2
cache; the number of repetitions adapts to the kernel's length. Only this one GPU is loaded: a node under load runs
slower clocks (topologies/gpus/*.json sustained_compute_ratio), which simtrain applies on top of these tables.

  memory_sizes.csv   (--sizes, instead of the above) the memory-bound kernels from 256 to 32K tokens, and the
                 embedding's backward: what small kernels cost beyond their bytes

Usage (on a GPU machine with PyTorch):
  python3 tools/kernels/measure.py tools/kernels/data/validation_shapes.json --out DIR [--deadline SECONDS]
      [--sizes | --fp8-layouts]
"""

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

BF16 = torch.bfloat16
E = 2  # bytes per 16-bit element
START = time.monotonic()
FLUSH = None
SPIN_CYCLES = 2_000_000  # about 1 ms at the H100's clocks


def log(msg):
    print("[%6.1f s] %s" % (time.monotonic() - START, msg), flush=True)


def timed(fn, setup=None, budget=0.15, max_reps=30, min_reps=3):
    """Median seconds of fn(*setup()) on the GPU, after warm-up. Each repetition flushes the L2 cache, then holds the
    GPU in a 1 ms spin while the host queues the timed work, so that the host's launch latency stays out of it."""
    def once():
        args = setup() if setup else ()
        fn(*args)

    once()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    once()
    torch.cuda.synchronize()
    estimate = time.perf_counter() - t0
    reps = int(min(max_reps, max(min_reps, budget / max(estimate, 1e-6))))
    times = []
    for _ in range(reps):
        args = setup() if setup else ()
        FLUSH.zero_()
        torch.cuda._sleep(SPIN_CYCLES)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
        del args
    return statistics.median(times)


class Table:
    """A CSV written row by row, so that a run cut short keeps what it measured."""

    def __init__(self, path, columns):
        self.fh = open(path, "w", newline="")
        self.w = csv.writer(self.fh)
        self.w.writerow(columns)

    def row(self, *values):
        self.w.writerow(values)
        self.fh.flush()


def gpu_state():
    query = "name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_event_reasons.active"
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv"], capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        return "nvidia-smi: %s" % err


def ordered_gemms(shapes):
    """The H100 cases' shapes first, then the A100 cases' (both measured here), each by descending case count."""
    rows = sorted(shapes["gemm"], key=lambda r: (r[3] != "h100", -r[4], r[0], r[1], r[2]))
    seen, out = set(), []
    for m, n, k, family, _ in rows:
        if (m, n, k) not in seen:
            seen.add((m, n, k))
            out.append((m, n, k, family))
    return out


def measure_gemms(gemms, table, source, deadline, fp32_wgrad=False):
    for m, n, k, family in gemms:
        if time.monotonic() > deadline:
            log("gemm: deadline, stopped before %s" % ((m, n, k),))
            return
        x = torch.randn(m, k, dtype=BF16, device="cuda")
        w = torch.randn(n, k, dtype=BF16, device="cuda")
        dy = torch.randn(m, n, dtype=BF16, device="cuda")
        flops = 2.0 * m * n * k
        for layout, fn, shape in (("fwd", lambda: F.linear(x, w), (m, n, k)),
                                  ("dgrad", lambda: torch.matmul(dy, w), (m, k, n)),
                                  ("wgrad", lambda: torch.matmul(dy.t(), x), (n, k, m))):
            t = timed(fn)
            table.row(*shape, 1, layout, "%.1f" % (flops / t / 1e12), "%.2f" % (t * 1e6), family, source)
        if fp32_wgrad:  # Megatron's gradient-accumulation fusion: the weight gradient written in fp32
            try:
                t = timed(lambda: torch.mm(dy.t(), x, out_dtype=torch.float32))
                table.row(n, k, m, 1, "wgrad_fp32", "%.1f" % (flops / t / 1e12), "%.2f" % (t * 1e6), family, source)
            except (RuntimeError, TypeError) as err:
                log("fp32 wgrad: %s" % str(err).splitlines()[0][:120])
                fp32_wgrad = False
        del x, w, dy


def measure_fp8(gemms, table, source, deadline, layouts=False):
    """FP8 GEMMs beside bf16 at the forward shapes; with `layouts`, also at the data- and weight-gradient GEMMs' own
    (m, n, k), as Transformer Engine runs them: cast operands in the layout _scaled_mm takes (A row-major, B column
    major), against the bf16 GEMM in that pass's own layout."""
    f8 = torch.float8_e4m3fn
    one = torch.ones((), device="cuda")
    for m, n, k, family in gemms:
        if time.monotonic() > deadline:
            log("fp8: deadline")
            return
        if m % 16 or n % 16 or k % 16:
            continue
        x = torch.randn(m, k, dtype=BF16, device="cuda")
        w = torch.randn(n, k, dtype=BF16, device="cuda")
        dy = torch.randn(m, n, dtype=BF16, device="cuda")
        passes = [("fwd", (m, n, k), lambda: F.linear(x, w))]
        if layouts:
            passes += [("dgrad", (m, k, n), lambda: torch.matmul(dy, w)),
                       ("wgrad", (n, k, m), lambda: torch.matmul(dy.t(), x))]
        for layout, (pm, pn, pk), bf16 in passes:
            a8 = torch.randn(pm, pk, dtype=BF16, device="cuda").to(f8)
            b8 = torch.randn(pn, pk, dtype=BF16, device="cuda").to(f8)
            t8 = timed(lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=BF16))
            t16 = timed(bf16)
            flops = 2.0 * m * n * k
            table.row(pm, pn, pk, 1, layout, "%.1f" % (flops / t8 / 1e12), "%.1f" % (flops / t16 / 1e12),
                      "%.3f" % (t16 / t8), family, source)
            del a8, b8
        del x, w, dy


def attention_shapes(shapes):
    """The validation cases' shapes (H100 cases first), then FlashAttention's benchmark grid (hidden 2048, 16k tokens
    per batch, as its published figures)."""
    rows = sorted(shapes["attention"], key=lambda r: (r[3] != "h100", -r[4], r[0], r[1], r[2]))
    cases = [(s, d, heads, True, family) for s, d, heads, family, _ in rows]
    grid = [(s, d, 16384 // s * 2048 // d, causal, "fa-benchmark")
            for d in (64, 128) for s in (512, 1024, 2048, 4096, 8192, 16384) for causal in (False, True)]
    return [c for c in cases if c[4] == "h100"] + grid, [c for c in cases if c[4] != "h100"]


def measure_attention(shapes, table, source, deadline):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backends = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))
    for s, d, heads, causal, family in shapes:
        if time.monotonic() > deadline:
            log("attention: deadline")
            return
        # Split very many heads into batch entries: the kernels grid over (batch, heads) alike.
        batch = 1
        while heads % 2 == 0 and heads > 256:
            heads, batch = heads // 2, batch * 2
        q, k, v = (torch.randn(batch, heads, s, d, dtype=BF16, device="cuda", requires_grad=True) for _ in range(3))
        flops = 4.0 * s * s * batch * heads * d / (2.0 if causal else 1.0)
        for impl, backend in backends:
            try:
                with sdpa_kernel([backend]):
                    fwd = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                    t_fwd = timed(fwd)
                    grad = torch.randn(batch, heads, s, d, dtype=BF16, device="cuda")
                    t_bwd = timed(lambda o: torch.autograd.grad(o, (q, k, v), grad), lambda: (fwd(),))
            except RuntimeError as err:
                log("attention %s %s: %s" % (impl, (s, d, heads), str(err).splitlines()[0][:120]))
                continue
            for direction, t, f in (("fwd", t_fwd, flops), ("bwd", t_bwd, 2.5 * flops)):
                table.row(impl, direction, str(causal).lower(), d, s, batch * heads, "%.1f" % (f / t / 1e12),
                          "%.2f" % (t * 1e6), family, source)
        del q, k, v


def rotate_half(t):
    a, b = t.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


def rope_eager(t, cos, sin):
    """Megatron-core's unfused apply_rotary_pos_emb (t [s, b, heads, d]; cos, sin [s, 1, 1, d])."""
    return t * cos + rotate_half(t) * sin


def bias_dropout_add(x, bias, residual):
    return residual + F.dropout(x + bias, 0.1, True)


def bias_gelu(y, bias):
    """Megatron's bias-GeLU (tanh approximation)."""
    return F.gelu(y + bias, approximate="tanh")


def swiglu(y):
    a, b = y.chunk(2, dim=-1)
    return F.silu(a) * b


def memory_cases(shapes):
    """Four of the H100 cases' token rows (distinct hidden sizes, most used first) and the A100 cases' two largest:
    six at most, since torch.compile compiles per shape."""
    rows = sorted(shapes["tokens"], key=lambda r: (r[4] != "h100", -r[5]))
    seen, h100 = set(), []
    for tokens, h, f, gated, family, _ in rows:
        if family == "h100" and h not in seen:
            seen.add(h)
            h100.append((tokens, h, f, gated, family))
    a100 = sorted((r[:5] for r in rows if r[4] != "h100" and r[0] * max(r[1], 2 * r[2]) * E < 2e9),
                  key=lambda r: -r[0] * r[1])
    return h100[:4] + [tuple(r) for r in a100[:2]]


def compiled_kernels():
    """torch.compile'd (Inductor, one fused Triton kernel each) versions of what eager PyTorch runs as several
    kernels, compiled afresh for each shape."""
    torch._dynamo.reset()
    return {"layernorm": torch.compile(F.layer_norm, dynamic=False), "rmsnorm": torch.compile(F.rms_norm, dynamic=False),
            "bias_dropout_add": torch.compile(bias_dropout_add, dynamic=False),
            "swiglu": torch.compile(swiglu, dynamic=False), "rope": torch.compile(rope_eager, dynamic=False),
            "gelu": torch.compile(bias_gelu, dynamic=False)}


def measure_memory(cases, table, source, deadline, compiled):
    def record(cls, impl, direction, elements, h, nbytes, fn, setup=None):
        try:
            t = timed(fn, setup)
        except Exception as err:  # noqa: BLE001 (torch.compile raises many kinds)
            log("memory %s %s %s: %s" % (cls, impl, direction, str(err).splitlines()[0][:160]))
            return
        table.row(cls, impl, direction, int(elements), h, int(nbytes), "%.2f" % (t * 1e6), "%.0f" % (nbytes / t / 1e9),
                  source)

    eager = {"layernorm": F.layer_norm, "rmsnorm": F.rms_norm, "bias_dropout_add": bias_dropout_add,
             "swiglu": swiglu, "rope": rope_eager, "gelu": bias_gelu}
    for tokens, h, f, gated, family in cases:
        if time.monotonic() > deadline:
            log("memory: deadline")
            return
        impls = [("torch", eager)]
        if compiled:
            try:
                impls.append(("torch_compile", compiled_kernels()))
            except Exception as err:  # noqa: BLE001
                log("torch.compile unavailable: %s" % err)
        n, nf = tokens * h, tokens * f
        x = torch.randn(tokens, h, dtype=BF16, device="cuda", requires_grad=True)
        w = torch.ones(h, dtype=BF16, device="cuda", requires_grad=True)
        b = torch.zeros(h, dtype=BF16, device="cuda", requires_grad=True)
        dy = torch.randn(tokens, h, dtype=BF16, device="cuda")
        xd = x.detach()
        res = torch.randn_like(xd)
        yin = torch.randn(tokens, (2 if gated else 1) * f, dtype=BF16, device="cuda", requires_grad=True)
        bf = torch.zeros(yin.shape[1], dtype=BF16, device="cuda")
        dout = torch.randn(tokens, f, dtype=BF16, device="cuda")
        # RoPE on the query and key heads of 128-wide heads: [s, b, heads, d] with s * b = tokens.
        d = 128
        qk = torch.randn(tokens, 1, 2 * max(1, h // d), d, dtype=BF16, device="cuda")
        cos = torch.randn(tokens, 1, 1, d, dtype=BF16, device="cuda")
        sin = torch.randn(tokens, 1, 1, d, dtype=BF16, device="cuda")
        for impl, k in impls:
            with torch.no_grad():
                record("layernorm", impl, "fwd", n, h, 2 * E * n, lambda: k["layernorm"](x, (h,), w, b, 1e-5))
                record("rmsnorm", impl, "fwd", n, h, 2 * E * n, lambda: k["rmsnorm"](x, (h,), w, 1e-5))
                record("bias_dropout_add", impl, "fwd", n, h, 3 * E * n + n, lambda: k["bias_dropout_add"](xd, b, res))
                act = "swiglu" if gated else "gelu"
                record(act, impl, "fwd", nf, h, (3 if gated else 2) * E * nf,
                       lambda: k["swiglu"](yin) if gated else k["gelu"](yin, bf))
                record("rope", impl, "fwd", qk.numel(), h, 2 * E * qk.numel(), lambda: k["rope"](qk, cos, sin))
            record("layernorm", impl, "bwd", n, h, 3 * E * n, lambda y: torch.autograd.grad(y, (x, w, b), dy),
                   lambda: (k["layernorm"](x, (h,), w, b, 1e-5),))
            record("rmsnorm", impl, "bwd", n, h, 3 * E * n, lambda y: torch.autograd.grad(y, (x, w), dy),
                   lambda: (k["rmsnorm"](x, (h,), w, 1e-5),))
            record(act, impl, "bwd", nf, h, (5 if gated else 3) * E * nf,
                   lambda y: torch.autograd.grad(y, yin, dout),
                   lambda: (k["swiglu"](yin) if gated else k["gelu"](yin, bf),))
        with torch.no_grad():
            record("dropout", "torch", "fwd", n, h, (2 * E + 1) * n, lambda: F.dropout(xd, 0.1, True))
            record("residual_add", "torch", "fwd", n, h, 3 * E * n, lambda: xd + res)
        del x, w, b, dy, xd, res, yin, bf, dout, qk, cos, sin


def measure_softmax_and_logits(shapes, table, source, deadline):
    # Unfused attention's softmax over [heads, s, s] scores, for the H100 and A100 cases' sequence lengths.
    for s, heads in ((2048, 16), (4096, 8), (8192, 4)):
        if time.monotonic() > deadline:
            return
        scores = torch.randn(heads, s, s, dtype=BF16, device="cuda", requires_grad=True)
        n = scores.numel()
        with torch.no_grad():
            t = timed(lambda: torch.softmax(scores, -1))
        table.row("softmax", "torch", "fwd", n, s, 2 * E * n, "%.2f" % (t * 1e6), "%.0f" % (2 * E * n / t / 1e9), source)
        g = torch.randn_like(scores)
        t = timed(lambda p: torch.autograd.grad(p, scores, g), lambda: (torch.softmax(scores, -1),))
        table.row("softmax", "torch", "bwd", n, s, 3 * E * n, "%.2f" % (t * 1e6), "%.0f" % (3 * E * n / t / 1e9), source)
        del scores, g
    # Embedding gather and the logits' cross entropy (fp32), forward and backward, at two vocabulary shards.
    for tokens, h, vocab in ((4096, 8192, 131072 // 8), (8192, 4096, 128256), (16384, 6144, 51200 // 4)):
        if time.monotonic() > deadline:
            return
        ids = torch.randint(0, vocab, (tokens,), device="cuda")
        table_w = torch.randn(vocab, h, dtype=BF16, device="cuda")
        n = tokens * h
        t = timed(lambda: F.embedding(ids, table_w))
        table.row("embedding", "torch", "fwd", n, h, 2 * E * n, "%.2f" % (t * 1e6), "%.0f" % (2 * E * n / t / 1e9), source)
        logits = torch.randn(tokens, vocab, dtype=BF16, device="cuda", requires_grad=True)
        nl = logits.numel()
        with torch.no_grad():
            t = timed(lambda: F.cross_entropy(logits.float(), ids))
        table.row("cross_entropy", "torch", "fwd", nl, vocab, (E + 4 + 4 + 8 + 8 + 4 + 8) * nl, "%.2f" % (t * 1e6),
                  "%.0f" % ((E + 36) * nl / t / 1e9), source)
        t = timed(lambda loss: torch.autograd.grad(loss, logits), lambda: (F.cross_entropy(logits.float(), ids),))
        table.row("cross_entropy", "torch", "bwd", nl, vocab, (8 + 4 + E) * nl, "%.2f" % (t * 1e6),
                  "%.0f" % ((12 + E) * nl / t / 1e9), source)
        del ids, table_w, logits


def measure_optimizer(table, source):
    """Adam as Megatron-core runs it on fp32 main parameters, on 1 Gi parameters in 64 Mi tensors."""
    n_tensor, count = 64 * 1024 * 1024, 16
    params = [torch.randn(n_tensor, device="cuda", requires_grad=True) for _ in range(count)]
    for p in params:
        p.grad = torch.randn_like(p)
    n = n_tensor * count
    for impl, kwargs in (("torch_fused", {"fused": True}), ("torch_foreach", {"foreach": True})):
        opt = torch.optim.AdamW(params, lr=1e-4, **kwargs)
        t = timed(opt.step, budget=1.0, max_reps=10)
        table.row("adam", impl, "step", n, 0, 28 * n, "%.2f" % (t * 1e6), "%.0f" % (28 * n / t / 1e9), source)
        del opt
    half = [torch.empty(n_tensor, dtype=BF16, device="cuda") for _ in range(count)]
    with torch.no_grad():
        t = timed(lambda: torch._foreach_copy_(half, params), budget=1.0, max_reps=10)
        table.row("param_copy_fp32_to_bf16", "torch_foreach", "step", n, 0, 6 * n, "%.2f" % (t * 1e6),
                  "%.0f" % (6 * n / t / 1e9), source)
        grads = [p.grad for p in params]
        t = timed(lambda: torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))), budget=1.0, max_reps=10)
        table.row("grad_norm", "torch_foreach", "step", n, 0, 4 * n, "%.2f" % (t * 1e6), "%.0f" % (4 * n / t / 1e9),
                  source)
        g16 = [torch.randn(n_tensor, dtype=BF16, device="cuda") for _ in range(count)]
        t = timed(lambda: torch._foreach_add_(grads, g16), budget=1.0, max_reps=10)
        table.row("gradient_accumulation", "torch_foreach", "step", n, 0, 10 * n, "%.2f" % (t * 1e6),
                  "%.0f" % (10 * n / t / 1e9), source)
    del params, half, grads, g16


def size_cases():
    """The memory-bound kernels from small to large (256 to 32K tokens of hidden 4096 with SwiGLU, of hidden 8192 with
    GeLU, FFN width = hidden): what a kernel costs beyond its bytes at the sizes tensor and sequence parallelism
    leave."""
    return [(tokens, h, h, h == 4096, "sizes") for h in (4096, 8192) for tokens in (256, 512, 1024, 2048, 4096, 8192,
                                                                                    16384, 32768)]


def measure_embedding_backward(table, source):
    """The embedding's weight gradient (PyTorch's embedding_dense_backward: a sort and a segmented sum) into a
    32K-row table of hidden 4096, at 256 to 32K tokens."""
    h, vocab = 4096, 32768
    w = torch.randn(vocab, h, dtype=BF16, device="cuda", requires_grad=True)
    for tokens in (256, 1024, 4096, 16384, 32768):
        ids = torch.randint(0, vocab, (tokens,), device="cuda")
        dout = torch.randn(tokens, h, dtype=BF16, device="cuda")
        n = tokens * h
        t = timed(lambda y: torch.autograd.grad(y, w, dout), lambda: (F.embedding(ids, w),))
        table.row("embedding", "torch", "bwd", n, h, 2 * E * n, "%.2f" % (t * 1e6), "%.0f" % (2 * E * n / t / 1e9),
                  source)


def section(name, fn):
    log("%s ..." % name)
    try:
        fn()
    except Exception:  # noqa: BLE001: keep the other sections' rows
        log("%s failed:\n%s" % (name, traceback.format_exc()))
    torch.cuda.empty_cache()


def main():
    global FLUSH
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shapes", help="data/validation_shapes.json (validation_shapes.py)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline", type=float, default=450.0, help="seconds after which sections stop early")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    parser.add_argument("--fp8-layouts", action="store_true",
                        help="only FP8 GEMMs beside bf16 at the H100 cases' forward, data- and weight-gradient "
                             "shapes (fp8_layouts.csv)")
    parser.add_argument("--sizes", action="store_true",
                        help="only the memory-bound kernels from small to large, and the embedding's backward "
                             "(memory_sizes.csv)")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure.py: no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    with open(args.shapes) as fh:
        shapes = json.load(fh)
    FLUSH = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    gpu = torch.cuda.get_device_name()
    source = "measure.py:%s:torch%s:cuda%s" % (gpu.replace(" ", "_"), torch.__version__, torch.version.cuda)
    env = open(os.path.join(args.out, "env.txt"), "w")
    env.write("gpu %s, %d SMs\ntorch %s, CUDA %s, cuDNN %s\nbefore:\n%s\n" % (
        gpu, torch.cuda.get_device_properties(0).multi_processor_count, torch.__version__, torch.version.cuda,
        torch.backends.cudnn.version(), gpu_state()))
    env.flush()
    deadline = START + args.deadline
    if args.fp8_layouts:
        table = Table(os.path.join(args.out, "fp8_layouts.csv"),
                      ["m", "n", "k", "batch", "layout", "tflops", "bf16_tflops", "speedup", "gpu_family", "source"])
        h100 = [g for g in ordered_gemms(shapes) if g[3] == "h100"]
        section("FP8 GEMMs in every pass", lambda: measure_fp8(h100, table, source, deadline, layouts=True))
        env.write("at the end:\n%s\n" % gpu_state())
        env.close()
        log("done")
        return
    if args.sizes:
        sizes_table = Table(os.path.join(args.out, "memory_sizes.csv"),
                            ["kernel_class", "implementation", "direction", "elements", "hidden", "bytes", "time_us",
                             "gbps", "source"])
        section("embedding backward", lambda: measure_embedding_backward(sizes_table, source))
        section("memory-bound kernels by size",
                lambda: measure_memory(size_cases(), sizes_table, source, deadline, not args.no_compile))
        env.write("at the end:\n%s\n" % gpu_state())
        env.close()
        log("done")
        return
    gemms = ordered_gemms(shapes)
    h100 = [g for g in gemms if g[3] == "h100"]
    log("%s; %d GEMM shapes (%d of H100 cases)" % (source, len(gemms), len(h100)))
    gemm_table = Table(os.path.join(args.out, "gemm.csv"),
                       ["m", "n", "k", "batch", "layout", "tflops", "time_us", "gpu_family", "source"])
    attention_table = Table(os.path.join(args.out, "attention.csv"),
                            ["impl", "direction", "causal", "head_dim", "seq_len", "heads", "tflops", "time_us",
                             "shapes_of", "source"])
    memory_table = Table(os.path.join(args.out, "memory.csv"),
                         ["kernel_class", "implementation", "direction", "elements", "hidden", "bytes", "time_us",
                          "gbps", "source"])
    fp8_table = Table(os.path.join(args.out, "fp8.csv"),
                      ["m", "n", "k", "batch", "layout", "tflops", "bf16_tflops", "speedup", "gpu_family", "source"])
    section("GEMMs of the H100 cases", lambda: measure_gemms(h100, gemm_table, source, deadline, fp32_wgrad=True))
    env.write("after the H100 cases' GEMMs:\n%s\n" % gpu_state())
    env.flush()
    attention_first, attention_later = attention_shapes(shapes)
    section("attention", lambda: measure_attention(attention_first, attention_table, source, deadline))
    section("optimizer", lambda: measure_optimizer(memory_table, source))
    section("softmax, embedding, cross entropy",
            lambda: measure_softmax_and_logits(shapes, memory_table, source, deadline))
    section("memory-bound kernels",
            lambda: measure_memory(memory_cases(shapes), memory_table, source, deadline, not args.no_compile))
    section("FP8 GEMMs", lambda: measure_fp8(h100, fp8_table, source, deadline))
    section("GEMMs of the A100 cases", lambda: measure_gemms([g for g in gemms if g[3] != "h100"], gemm_table, source,
                                                             deadline))
    section("attention of the A100 cases",
            lambda: measure_attention(attention_later, attention_table, source, deadline))
    env.write("at the end:\n%s\n" % gpu_state())
    env.close()
    log("done")


if __name__ == "__main__":
    main()
