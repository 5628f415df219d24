#!/usr/bin/env python3
"""Measures, on the GPU machine it runs on, what the host costs a training step beside the kernels: the CPU time
PyTorch takes to launch one operation, a device-to-host synchronisation, a CUDA graph's replay, and a dropless MoE
block at the validation cases' shapes launched three ways. Evidence for the one effect simtrain does not simulate,
a step bound by the CPU launching kernels (sim/validation/README.md: Megatron-Bridge's Qwen3-30B-A3B).

Writes, in --out:

  dispatch.csv  op,calls,host_us_per_call,source   CPU time per call of eager PyTorch operations on tensors so small
                that the GPU keeps up (the launch queue never fills): perf_counter around 2,000 calls, median of 5
  sync.csv      what,us,source   a device-to-host copy of a small tensor (.tolist()) and torch.cuda.synchronize() on an
                idle GPU; a CUDA graph of 100 small kernels replayed, per kernel
  moe.csv       model,variant,tokens,local_experts,wall_us,host_us,gpu_us,kernels,source   the MoE block of one layer
                (router, top-k, permutation, the local experts' SwiGLU MLPs, un-permutation), forward and backward,
                on one GPU as one expert-parallel rank sees it with the router force-balanced (no all-to-all):
                  sync-loop   Megatron-core's dropless path: tokens per expert copied to the host (.tolist()), one
                              GEMM per expert (SequentialMLP; Transformer Engine's GroupedLinear also takes the
                              splits as a host list)
                  fixed-loop  the same kernels with the splits known in advance (no synchronisation: token dropping
                              to a fixed capacity)
                  grouped     torch._grouped_mm with the offsets on the device (one kernel for all experts)
                wall_us: median wall time of forward and backward with one synchronisation at the end; host_us: the
                CPU time to issue them (perf_counter before the final synchronisation); gpu_us: the kernels' own time
                (torch.profiler, sum of device time); kernels: how many ran
  gpu_gap.csv   op,kernels_per_call,gpu_us_per_call,source   the GPU's own time per call of tiny operations launched
                back to back (the host queues 200 of them behind a 5 ms spin, so that no launch waits on it): the
                fixed cost of a kernel on the GPU, from launch to the next kernel's start, which simtrain's
                kernel_overhead stands for
  autograd.csv  op,kernels,forward_host_us,backward_host_us,source   the CPU time per operation of a chain of like
                operations (64 and 8 of them; the difference over 56, so that the call's fixed cost drops out), in
                forward and in the autograd backward that follows (the engine's own thread, timed from
                .backward() until it returns, the GPU kept ahead by tiny tensors): linear (F.linear), rms_norm,
                silu_mul (SwiGLU's silu and mul), add, sdpa_flash and sdpa_cudnn (scaled_dot_product_attention,
                causal, through each backend), scaled_mm_fp8 (forward only); and the host cost of launching
                one NCCL all-reduce (a one-rank group: the launch path without peers), forward_host_us
  env.txt       torch and CUDA versions, the GPU, the CPU model

Usage (on a GPU machine with PyTorch):
  python3 tools/kernels/measure_host.py --out DIR [--sections dispatch,sync,gpu_gap,moe,autograd]
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

from measure import Table, log  # measure.py, beside this script

BF16 = torch.bfloat16

# The MoE blocks of the validation cases (tests/data/validation/cases.json, Megatron-Bridge's DGX-H100 rows), as one
# expert-parallel rank runs them: its tokens per micro-batch at the router, the experts it holds, and the token copies
# it receives with the router force-balanced (tokens x top-k over the group's ranks, each rank's share the same).
#   Qwen3-30B-A3B: hidden 2048, 128 experts of FFN 768, top-8; TP 1, EP 8, micro-batch 2 x 4096 tokens.
#   Qwen3-235B-A22B: hidden 4096, 128 experts of FFN 1536, top-8; TP 2 with sequence parallelism (2,048 tokens of a
#   4,096-token micro-batch at each rank's router), EP 32.
MODELS = [
    # name, hidden, ffn, experts, top_k, ep, router tokens
    ("qwen3-30b-a3b", 2048, 768, 128, 8, 8, 8192),
    ("qwen3-235b-a22b", 4096, 1536, 128, 8, 32, 2048),
]


def source_tag():
    name = torch.cuda.get_device_name().replace(" ", "_")
    return "measure_host.py:%s:torch%s:cuda%s" % (name, torch.__version__, torch.version.cuda)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def host_per_call(fn, calls=2000, batches=5):
    """Median CPU microseconds per call of fn, the GPU idle before each batch."""
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(batches):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        per.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(per)


def measure_dispatch(table, source):
    dev = "cuda"
    x = torch.randn(64, 64, device=dev, dtype=BF16)
    w = torch.randn(64, 64, device=dev, dtype=BF16)
    idx = torch.randint(0, 64, (64,), device=dev)
    norm_w = torch.ones(64, device=dev, dtype=BF16)
    fp8 = getattr(torch, "float8_e4m3fn", None)
    ops = {
        "add": lambda: x + x,
        "mul_scalar": lambda: x * 2.0,
        "linear": lambda: F.linear(x, w),
        "rms_norm": lambda: F.rms_norm(x, (64,), norm_w),
        "layer_norm": lambda: F.layer_norm(x, (64,), norm_w),
        "softmax": lambda: torch.softmax(x, dim=-1),
        "silu_mul": lambda: F.silu(x) * x,
        "topk": lambda: torch.topk(x, 8, dim=-1),
        "argsort": lambda: torch.argsort(idx),
        "bincount": lambda: torch.bincount(idx, minlength=64),
        "index_select": lambda: x.index_select(0, idx),
        "index_add": lambda: torch.zeros_like(x).index_add_(0, idx, x),
        "cat": lambda: torch.cat([x, x]),
        "split_16": lambda: torch.split(x, [4] * 16),
    }
    if fp8 is not None and hasattr(torch, "_scaled_mm"):
        a8 = x.to(fp8)
        b8 = w.to(fp8).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        ops["scaled_mm_fp8"] = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=BF16)
    xa = x.clone().requires_grad_(True)
    wa = w.clone().requires_grad_(True)

    def linear_fwd_bwd():
        F.linear(xa, wa).sum().backward()

    ops["linear_forward_backward"] = linear_fwd_bwd
    for name, fn in ops.items():
        try:
            table.row(name, 2000, "%.2f" % host_per_call(fn), source)
            log("dispatch %s" % name)
        except Exception:  # one op missing from this build must not lose the others
            traceback.print_exc()


def chain_host_us(step, backward, n):
    """CPU microseconds of n chained operations' forward (and, with backward, of the backward that follows)."""
    fwd, bwd = [], []
    for _ in range(7):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        y = step(n)
        t1 = time.perf_counter()
        if backward:
            y.backward()
        t2 = time.perf_counter()
        torch.cuda.synchronize()
        fwd.append((t1 - t0) * 1e6)
        bwd.append((t2 - t1) * 1e6)
    return statistics.median(fwd[2:]), statistics.median(bwd[2:])


def measure_autograd(table, source):
    dev = "cuda"
    x0 = torch.randn(16, 64, device=dev, dtype=BF16, requires_grad=True)
    w = torch.randn(64, 64, device=dev, dtype=BF16, requires_grad=True)
    norm_w = torch.ones(64, device=dev, dtype=BF16, requires_grad=True)
    q0 = torch.randn(1, 2, 16, 64, device=dev, dtype=BF16, requires_grad=True)

    def chain(op):
        def run(n):
            y = x0
            for _ in range(n):
                y = op(y)
            return y.float().sum()
        return run

    def attention(backend):
        from torch.nn.attention import sdpa_kernel

        def run(n):
            with sdpa_kernel(backend):
                y = q0
                for _ in range(n):
                    y = F.scaled_dot_product_attention(y, y, y, is_causal=True)
            return y.float().sum()
        return run

    from torch.nn.attention import SDPBackend
    ops = [("linear", 1, chain(lambda y: F.linear(y, w)), True),
           ("rms_norm", 1, chain(lambda y: F.rms_norm(y, (64,), norm_w)), True),
           ("silu_mul", 2, chain(lambda y: F.silu(y) * y), True),
           ("add", 1, chain(lambda y: y + x0), True),
           ("sdpa_flash", 1, attention(SDPBackend.FLASH_ATTENTION), True),
           ("sdpa_cudnn", 1, attention(SDPBackend.CUDNN_ATTENTION), True)]
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None and hasattr(torch, "_scaled_mm"):
        b8 = torch.randn(64, 64, device=dev).to(fp8).t()
        one = torch.ones((), device=dev, dtype=torch.float32)
        ops.append(("scaled_mm_fp8", 1, chain(lambda y: torch._scaled_mm(y.detach().to(fp8), b8, scale_a=one,
                                                                          scale_b=one, out_dtype=BF16)), False))
    for name, kernels, run, backward in ops:
        try:
            chain_host_us(run, backward, 8)
            f8, b8_ = chain_host_us(run, backward, 8)
            f64, b64 = chain_host_us(run, backward, 64)
            table.row(name, kernels, "%.2f" % ((f64 - f8) / 56), "%.2f" % ((b64 - b8_) / 56) if backward else "",
                      source)
            log("autograd %s" % name)
        except Exception:  # noqa: BLE001: a backend missing from this build must not lose the others
            traceback.print_exc()
    try:
        import torch.distributed as dist
        dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
        t = torch.randn(64, 64, device=dev, dtype=BF16)
        dist.all_reduce(t)
        table.row("nccl_all_reduce", 1, "%.2f" % host_per_call(lambda: dist.all_reduce(t), calls=500), "", source)
        dist.destroy_process_group()
        log("autograd nccl")
    except Exception:  # noqa: BLE001
        traceback.print_exc()


def measure_sync(table, source):
    t = torch.arange(128, device="cuda")
    torch.cuda.synchronize()
    for what, fn in [("tolist_128_idle", lambda: t.tolist()), ("synchronize_idle", torch.cuda.synchronize)]:
        samples = []
        for _ in range(200):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t0) * 1e6)
        table.row(what, "%.2f" % statistics.median(samples), source)
    x = torch.randn(64, 64, device="cuda", dtype=BF16)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y = x
        for _ in range(3):
            y = x + 1
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            y = x
            for _ in range(100):
                y = y + 1
    torch.cuda.synchronize()
    per = host_per_call(graph.replay, calls=200)
    table.row("cuda_graph_replay_host_per_kernel", "%.3f" % (per / 100), source)
    samples = []
    for _ in range(20):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        samples.append((time.perf_counter() - t0) * 1e6 / 100)
    table.row("cuda_graph_replay_wall_per_kernel", "%.3f" % statistics.median(samples), source)


def measure_gpu_gap(table, source, calls=200):
    dev = "cuda"
    x = torch.randn(64, 64, device=dev, dtype=BF16)
    a = torch.randn(256, 256, device=dev, dtype=BF16)
    b = torch.randn(256, 256, device=dev, dtype=BF16)
    idx = torch.randint(0, 64, (64,), device=dev)
    norm_w = torch.ones(64, device=dev, dtype=BF16)
    ops = {
        "add_64x64": lambda: x + x,
        "rms_norm_64x64": lambda: F.rms_norm(x, (64,), norm_w),
        "softmax_64x64": lambda: torch.softmax(x, dim=-1),
        "index_select_64": lambda: x.index_select(0, idx),
        "linear_256": lambda: F.linear(a, b),
    }
    if hasattr(torch, "_scaled_mm"):
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev, dtype=torch.float32)
        ops["scaled_mm_fp8_256"] = lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=BF16)
    for name, fn in ops.items():
        try:
            for _ in range(20):
                fn()
            kernels = ""
            try:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    fn()
                    torch.cuda.synchronize()
                kernels = len([e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA])
            except Exception:
                traceback.print_exc()
            samples = []
            for _ in range(5):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                torch.cuda._sleep(10_000_000)  # about 5 ms at 1.98 GHz: the host queues every call meanwhile
                start.record()
                for _ in range(calls):
                    fn()
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end) * 1e3 / calls)
            table.row(name, kernels, "%.2f" % statistics.median(samples), source)
            log("gpu gap %s: %.2f us a call" % (name, statistics.median(samples)))
        except Exception:
            traceback.print_exc()


class MoeBlock:
    """One expert-parallel rank's MoE block: router over its own tokens, and the experts it holds over the token
    copies it receives (force-balanced, so every local expert gets the same number)."""

    def __init__(self, hidden, ffn, experts, top_k, ep, tokens):
        dev = "cuda"
        self.hidden, self.ffn, self.top_k = hidden, ffn, top_k
        self.local = experts // ep
        self.tokens = tokens
        self.received = tokens * top_k  # copies a rank receives, force-balanced
        self.per_expert = self.received // self.local
        self.router = (torch.randn(experts, hidden, device=dev, dtype=BF16) * 0.02).requires_grad_(True)
        self.fc1 = [(torch.randn(2 * ffn, hidden, device=dev, dtype=BF16) * 0.02).requires_grad_(True)
                    for _ in range(self.local)]
        self.fc2 = [(torch.randn(hidden, ffn, device=dev, dtype=BF16) * 0.02).requires_grad_(True)
                    for _ in range(self.local)]
        self.fc1_stacked = torch.stack([w.detach().t() for w in self.fc1]).contiguous().requires_grad_(True)
        self.fc2_stacked = torch.stack([w.detach().t() for w in self.fc2]).contiguous().requires_grad_(True)
        self.x = torch.randn(tokens, hidden, device=dev, dtype=BF16).requires_grad_(True)
        # The received copies' local expert, each expert the same count (what the all-to-all would deliver).
        self.expert_of = torch.arange(self.received, device=dev) % self.local
        self.splits = [self.per_expert] * self.local
        self.offsets = torch.tensor([self.per_expert * (i + 1) for i in range(self.local)], device=dev,
                                    dtype=torch.int32)

    def route(self):
        logits = F.linear(self.x, self.router)
        probs = torch.softmax(logits.float(), dim=-1)
        weights, _ = torch.topk(probs, self.top_k, dim=-1)
        # Stand-in for the all-to-all: the rank's received copies are its own tokens, top_k times, weighted.
        received = self.x.repeat(self.top_k, 1) * weights.t().reshape(-1, 1).to(BF16)
        order = torch.argsort(self.expert_of, stable=True)
        return received.index_select(0, order), order

    def experts_loop(self, permuted, splits):
        outs = []
        for i, chunk in enumerate(torch.split(permuted, splits)):
            h = F.linear(chunk, self.fc1[i])
            gate, up = h.chunk(2, dim=-1)
            outs.append(F.linear(F.silu(gate) * up, self.fc2[i]))
        return torch.cat(outs)

    def experts_grouped(self, permuted):
        h = torch._grouped_mm(permuted, self.fc1_stacked, offs=self.offsets)
        gate, up = h.chunk(2, dim=-1)
        return torch._grouped_mm(F.silu(gate) * up, self.fc2_stacked, offs=self.offsets)

    def combine(self, out, order):
        unpermuted = torch.zeros_like(out).index_copy(0, order, out)
        return unpermuted.reshape(self.top_k, self.tokens, self.hidden).sum(0)

    def step(self, variant):
        permuted, order = self.route()
        if variant == "sync-loop":
            splits = torch.bincount(self.expert_of, minlength=self.local).tolist()
            out = self.experts_loop(permuted, splits)
        elif variant == "fixed-loop":
            out = self.experts_loop(permuted, self.splits)
        else:
            out = self.experts_grouped(permuted)
        self.combine(out, order).float().pow(2).mean().backward()


def measure_moe(table, source, reps):
    have_grouped = hasattr(torch, "_grouped_mm")
    for name, hidden, ffn, experts, top_k, ep, tokens in MODELS:
        block = MoeBlock(hidden, ffn, experts, top_k, ep, tokens)
        for variant in ["sync-loop", "fixed-loop"] + (["grouped"] if have_grouped else []):
            try:
                for _ in range(3):
                    block.step(variant)
                torch.cuda.synchronize()
                walls, hosts = [], []
                for _ in range(reps):
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    block.step(variant)
                    t1 = time.perf_counter()
                    torch.cuda.synchronize()
                    t2 = time.perf_counter()
                    hosts.append((t1 - t0) * 1e6)
                    walls.append((t2 - t0) * 1e6)
                gpu_us, kernels = "", ""
                try:
                    from torch.profiler import ProfilerActivity, profile

                    with profile(activities=[ProfilerActivity.CUDA]) as prof:
                        block.step(variant)
                        torch.cuda.synchronize()
                    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
                    gpu_us = "%.1f" % sum(getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
                                          for e in events)
                    kernels = len(events)
                except Exception:
                    traceback.print_exc()
                table.row(name, variant, tokens, block.local, "%.1f" % statistics.median(walls),
                          "%.1f" % statistics.median(hosts), gpu_us, kernels, source)
                log("moe %s %s: wall %.0f us, host %.0f us, gpu %s us, %s kernels" % (
                    name, variant, statistics.median(walls), statistics.median(hosts), gpu_us, kernels))
            except Exception:
                traceback.print_exc()
        del block
        torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--sections", default="dispatch,sync,gpu_gap,moe,autograd", help="which to run (comma-separated)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    source = source_tag()
    with open(os.path.join(args.out, "env.txt"), "w") as f:
        f.write("gpu %s\n" % torch.cuda.get_device_name())
        f.write("torch %s, CUDA %s\n" % (torch.__version__, torch.version.cuda))
        f.write("cpu %s, %d logical CPUs, python %s\n" % (cpu_model(), os.cpu_count() or 0, platform.python_version()))
        try:
            f.write(subprocess.run(["nvidia-smi", "--query-gpu=name,clocks.sm,clocks.max.sm,power.limit",
                                    "--format=csv"], capture_output=True, text=True, timeout=20).stdout)
        except Exception:
            pass
    sections = set(args.sections.split(","))
    if "dispatch" in sections:
        log("dispatch")
        measure_dispatch(Table(os.path.join(args.out, "dispatch.csv"), ["op", "calls", "host_us_per_call", "source"]),
                         source)
    if "sync" in sections:
        log("sync")
        measure_sync(Table(os.path.join(args.out, "sync.csv"), ["what", "us", "source"]), source)
    if "gpu_gap" in sections:
        log("gpu gap")
        measure_gpu_gap(Table(os.path.join(args.out, "gpu_gap.csv"), ["op", "kernels_per_call", "gpu_us_per_call",
                                                                      "source"]), source)
    if "autograd" in sections:
        log("autograd")
        measure_autograd(Table(os.path.join(args.out, "autograd.csv"), ["op", "kernels", "forward_host_us",
                                                                       "backward_host_us", "source"]), source)
    if "moe" in sections:
        log("moe")
        measure_moe(Table(os.path.join(args.out, "moe.csv"), ["model", "variant", "tokens", "local_experts",
                                                             "wall_us", "host_us", "gpu_us", "kernels", "source"]),
                    source, args.reps)
    log("done")


if __name__ == "__main__":
    sys.exit(main())
