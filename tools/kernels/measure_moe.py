#!/usr/bin/env python3
"""Measures, on the GPU it runs on, the kernels of a MoE layer's expert half at the shapes real runs give them: the
local experts' GEMMs at per-expert token counts from 128 to 8,192, balanced and as a random router spreads them, in
the ways frameworks launch them; and the token permutation, un-permutation and routing kernels.

Writes, in --out:

  grouped_gemm.csv  model,gemm,layout,impl,counts,experts,m_mean,m_max,M,N,K,time_us,tflops,source
                one expert-parallel rank's GEMMs of one expert projection (fc1: hidden -> 2 x FFN, SwiGLU's gate and
                up; fc2: FFN -> hidden) for all its local experts, in one pass (fwd Y = X W^T, dgrad dX = dY W,
                wgrad dW = dY^T X); M, N, K are one expert's GEMM at the mean count, in the row convention of
                gemm.csv (output M x N, inner K); tflops counts the useful FLOPs (2 sum(m) N K, summed over experts)
                  loop       one cuBLAS GEMM per expert on one stream, bf16 (Megatron-core's SequentialMLP)
                  loop4      the same on four streams, round robin (Transformer Engine's GroupedLinear: its
                             multi-stream cuBLAS grouped GEMM, 4 streams by default)
                  grouped    torch._grouped_mm, bf16: one CUTLASS kernel for all experts (torchtitan's experts)
                  fp8_loop4  FP8 E4M3 per expert on four streams, per-tensor scales, bf16 output (torch._scaled_mm;
                             what GroupedLinear runs under FP8 with operands already cast)
                  dense      one bf16 GEMM of all the rank's tokens (sum m) at the same N, K: the rate the experts'
                             GEMMs would have as one
                counts: balanced (every expert the mean) or routed (the counts top-k of a random router gives the
                rank's experts, padded to multiples of 16 as Megatron-core pads for FP8)
  token_kernels.csv  kernel,tokens,hidden,top_k,bytes,time_us,gbps,source   permute (gather each token copy's row by
                the sorted expert order: index_select); unpermute (scatter the copies back and add the top-k weighted
                ones per token: index_add_, PyTorch's atomic scatter-add, Megatron-core's unfused path) and
                unpermute_gather (gather each token's copies by the inverse order, weigh and sum them: what a fused
                un-permutation computes, here in three kernels); router (fp32 softmax over the experts, top-k, the
                argsort of the copies by expert and the histogram), and its two halves router_topk and router_sort;
                bytes as simtrain counts them (permute 2 e pairs h, unpermute 3 e pairs h, router 12 T E)
  env.txt       torch and CUDA versions, the GPU's clocks and power before and after

Times are medians of CUDA-event timings after warm-up, each repetition after an L2 flush and a GPU spin that keeps
the host's launches out of the timing (measure.py's `timed`; 4 ms for the GEMMs).

Usage (on a GPU machine with PyTorch):
  python3 tools/kernels/measure_moe.py --out DIR [--deadline SECONDS]
"""

import argparse
import os
import time

import torch
import torch.nn.functional as F

import measure  # measure.py, beside this script
from measure import Table, gpu_state, log, section, timed

BF16 = torch.bfloat16
F8 = torch.float8_e4m3fn
E = 2  # bytes of a bf16 element

# One expert-parallel rank of each MoE model the validation cases and presets train: hidden, expert FFN width, the
# model's experts and top-k, the rank's local experts, and the per-expert counts its cases give first.
MODELS = [
    # name, hidden, ffn, experts, top_k, local experts, counts of the validation cases
    ("qwen3-30b-a3b", 2048, 768, 128, 8, 16, (2048, 4096)),  # Megatron-Bridge H100, EP 8
    ("qwen3-235b-a22b", 4096, 1536, 128, 8, 4, (4096,)),  # Megatron-Bridge H100, EP 32
    ("deepseek-v3", 7168, 2048, 256, 8, 4, (8192,)),  # DeepSeek-V3 H800 and AutoModel H100, EP 64
    ("gpt-oss-120b", 2880, 2880, 128, 4, 16, (4096,)),  # Megatron-Bridge B200, EP 8
    ("gpt-oss-20b", 2880, 2880, 32, 4, 32, (1024,)),  # AutoModel H100, EP 1
    ("mixtral-8x7b", 4096, 14336, 8, 2, 8, (2048,)),  # the mixtral preset, EP 1
]
COUNTS = (128, 256, 512, 1024, 2048, 4096, 8192)
STREAMS = 4


def pad16(c):
    return (int(c) + 15) // 16 * 16


def routed_counts(mean, experts, top_k, local, gen):
    """The token copies top-k of a random router sends to one rank's `local` experts, for as many tokens as give
    `mean` copies per expert on average; padded to multiples of 16."""
    tokens = mean * experts // top_k
    logits = torch.randn(tokens, experts, device="cuda", generator=gen)
    chosen = logits.topk(top_k, dim=1).indices.flatten()
    counts = torch.bincount(chosen, minlength=experts)[:local].tolist()
    return [max(16, pad16(c)) for c in counts]


class Experts:
    """One projection's tensors for a rank's local experts: inputs X (sum m, k), output gradients dY (sum m, n),
    weights W (E, n, k), and the per-expert views."""

    def __init__(self, counts, n, k):
        self.counts, self.n, self.k = counts, n, k
        total = sum(counts)
        self.x = torch.randn(total, k, dtype=BF16, device="cuda")
        self.dy = torch.randn(total, n, dtype=BF16, device="cuda")
        self.w = torch.randn(len(counts), n, k, dtype=BF16, device="cuda") * 0.02
        self.xs = list(torch.split(self.x, counts))
        self.dys = list(torch.split(self.dy, counts))
        self.ends = torch.tensor(torch.tensor(counts).cumsum(0).tolist(), dtype=torch.int32, device="cuda")
        self.streams = [torch.cuda.Stream() for _ in range(STREAMS)]

    def per_expert(self, layout):
        if layout == "fwd":
            return [lambda i=i: F.linear(self.xs[i], self.w[i]) for i in range(len(self.counts))]
        if layout == "dgrad":
            return [lambda i=i: torch.matmul(self.dys[i], self.w[i]) for i in range(len(self.counts))]
        return [lambda i=i: torch.matmul(self.dys[i].t(), self.xs[i]) for i in range(len(self.counts))]

    def loop(self, layout, streams=1):
        calls = self.per_expert(layout)
        if streams == 1:
            return lambda: [c() for c in calls]
        main = torch.cuda.current_stream()

        def run():
            for s in self.streams:
                s.wait_stream(main)
            for i, c in enumerate(calls):
                with torch.cuda.stream(self.streams[i % len(self.streams)]):
                    c()
            for s in self.streams:
                main.wait_stream(s)
        return run

    def grouped(self, layout):
        if layout == "fwd":
            w = self.w.transpose(-2, -1)  # (E, k, n), column-major: torchtitan's w.transpose(-2, -1)
            return lambda: torch._grouped_mm(self.x, w, offs=self.ends)
        if layout == "dgrad":
            return lambda: torch._grouped_mm(self.dy, self.w, offs=self.ends)
        dyt = self.dy.t()  # (n, sum m): 2d x 2d, groups along the inner dimension, as grouped_mm's own backward
        return lambda: torch._grouped_mm(dyt, self.x, offs=self.ends)

    def fp8_loop(self, layout):
        """Out (M, N) = A (M, K) B (N, K)^T per expert, A and B in FP8 row-major (Hopper's FP8 GEMMs take only this
        layout; Transformer Engine keeps the transposed copies it needs)."""
        one = torch.ones((), device="cuda")
        ops = []
        for i, m in enumerate(self.counts):
            if layout == "fwd":
                shape = (m, self.n, self.k)
            elif layout == "dgrad":
                shape = (m, self.k, self.n)
            else:
                shape = (self.n, self.k, m)
            mm, nn, kk = shape
            a = torch.randn(mm, kk, dtype=BF16, device="cuda").to(F8)
            b = torch.randn(nn, kk, dtype=BF16, device="cuda").to(F8)
            ops.append((a, b))
        main = torch.cuda.current_stream()

        def run():
            for s in self.streams:
                s.wait_stream(main)
            for i, (a, b) in enumerate(ops):
                with torch.cuda.stream(self.streams[i % len(self.streams)]):
                    torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=BF16)
            for s in self.streams:
                main.wait_stream(s)
        return run

    def dense(self, layout):
        if layout == "fwd":
            w = self.w[0]
            return lambda: F.linear(self.x, w)
        if layout == "dgrad":
            w = self.w[0]
            return lambda: torch.matmul(self.dy, w)
        return lambda: torch.matmul(self.dy.t(), self.x)


def row_shape(layout, m, n, k):
    return {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (n, k, m)}[layout]


def measure_grouped(table, source, deadline, impls):
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    # The validation cases' counts first (balanced and routed), then the curve.
    work = []
    for name, hidden, ffn, experts, top_k, local, case_counts in MODELS:
        for m in case_counts:
            work.append((name, hidden, ffn, experts, top_k, local, m, ("balanced", "routed")))
    for name, hidden, ffn, experts, top_k, local, case_counts in MODELS:
        for m in COUNTS:
            if m not in case_counts:
                work.append((name, hidden, ffn, experts, top_k, local, m, ("balanced",)))
    for name, hidden, ffn, experts, top_k, local, m, modes in work:
        for mode in modes:
            if time.monotonic() > deadline:
                log("grouped: deadline, stopped before %s m %d" % (name, m))
                return
            counts = [m] * local if mode == "balanced" else routed_counts(m, experts, top_k, local, gen)
            for gemm, n, k in (("fc1", 2 * ffn, hidden), ("fc2", hidden, ffn)):
                if sum(counts) * max(n, k) * E * 3 > 12e9:
                    continue
                ex = Experts(counts, n, k)
                flops = 2.0 * sum(counts) * n * k
                for layout in ("fwd", "dgrad", "wgrad"):
                    for impl in impls:
                        try:
                            if impl == "loop":
                                fn = ex.loop(layout)
                            elif impl == "loop4":
                                fn = ex.loop(layout, STREAMS)
                            elif impl == "grouped":
                                fn = ex.grouped(layout)
                            elif impl == "fp8_loop4":
                                fn = ex.fp8_loop(layout)
                            else:
                                fn = ex.dense(layout)
                            t = timed(fn, budget=0.1, max_reps=20, min_reps=5)
                        except Exception as err:  # noqa: BLE001: record the others
                            log("%s %s %s %s: %s" % (name, gemm, layout, impl, str(err).splitlines()[0][:160]))
                            continue
                        M, N, K = row_shape(layout, m, n, k)
                        table.row(name, gemm, layout, impl, mode, local, m, max(counts), M, N, K,
                                  "%.2f" % (t * 1e6), "%.1f" % (flops / t / 1e12), source)
                del ex
            torch.cuda.empty_cache()
        log("grouped: %s m %d done" % (name, m))


def measure_token_kernels(table, source, deadline):
    for tokens in (4096, 8192, 16384):
        for hidden, top_k, experts in ((2048, 8, 128), (2880, 4, 128), (4096, 8, 128), (7168, 8, 256)):
            if time.monotonic() > deadline:
                log("token kernels: deadline")
                return
            pairs = tokens * top_k
            x = torch.randn(tokens, hidden, dtype=BF16, device="cuda")
            logits = torch.randn(tokens, experts, dtype=BF16, device="cuda")
            probs, chosen = torch.softmax(logits.float(), dim=-1).topk(top_k, dim=-1)
            order = torch.argsort(chosen.flatten(), stable=True)
            source_row = order // top_k  # the token each sorted copy comes from
            copies = torch.randn(pairs, hidden, dtype=BF16, device="cuda")
            weights = probs.flatten()[order].to(BF16).unsqueeze(1)

            def permute():
                return x.index_select(0, source_row)

            def unpermute():
                out = torch.zeros(tokens, hidden, dtype=BF16, device="cuda")
                return out.index_add_(0, source_row, copies * weights)

            inverse = torch.argsort(order)  # each copy's place in the sorted order
            token_weights = probs.to(BF16).unsqueeze(-1)

            def unpermute_gather():
                back = copies.index_select(0, inverse).view(tokens, top_k, hidden)
                return (back * token_weights).sum(1)

            def router():
                p, c = torch.softmax(logits.float(), dim=-1).topk(top_k, dim=-1)
                flat = c.flatten()
                return torch.argsort(flat, stable=True), torch.bincount(flat, minlength=experts)

            def router_topk():
                return torch.softmax(logits.float(), dim=-1).topk(top_k, dim=-1)

            def router_sort():
                flat = chosen.flatten()
                return torch.argsort(flat, stable=True), torch.bincount(flat, minlength=experts)

            for kernel, fn, nbytes in (("permute", permute, 2 * E * pairs * hidden),
                                       ("unpermute", unpermute, 3 * E * pairs * hidden),
                                       ("unpermute_gather", unpermute_gather, 3 * E * pairs * hidden),
                                       ("router", router, 12 * tokens * experts),
                                       ("router_topk", router_topk, 12 * tokens * experts),
                                       ("router_sort", router_sort, 12 * tokens * experts)):
                t = timed(fn, budget=0.1, max_reps=20, min_reps=5)
                table.row(kernel, tokens, hidden, top_k, nbytes, "%.2f" % (t * 1e6), "%.0f" % (nbytes / t / 1e9),
                          source)
            del x, logits, probs, chosen, order, source_row, copies, weights, inverse, token_weights
    torch.cuda.empty_cache()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds after which sections stop early")
    parser.add_argument("--impls", default="loop,loop4,grouped,fp8_loop4,dense")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("measure_moe.py: no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    measure.FLUSH = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    gpu = torch.cuda.get_device_name()
    source = "measure_moe.py:%s:torch%s:cuda%s" % (gpu.replace(" ", "_"), torch.__version__, torch.version.cuda)
    env = open(os.path.join(args.out, "env_moe.txt"), "w")
    env.write("gpu %s, %d SMs\ntorch %s, CUDA %s\nbefore:\n%s\n" % (
        gpu, torch.cuda.get_device_properties(0).multi_processor_count, torch.__version__, torch.version.cuda,
        gpu_state()))
    env.flush()
    deadline = measure.START + args.deadline
    tokens = Table(os.path.join(args.out, "token_kernels.csv"),
                   ["kernel", "tokens", "hidden", "top_k", "bytes", "time_us", "gbps", "source"])
    section("token kernels", lambda: measure_token_kernels(tokens, source, deadline))
    grouped = Table(os.path.join(args.out, "grouped_gemm.csv"),
                    ["model", "gemm", "layout", "impl", "counts", "experts", "m_mean", "m_max", "M", "N", "K",
                     "time_us", "tflops", "source"])
    impls = [i for i in args.impls.split(",") if i]
    if not hasattr(torch, "_grouped_mm"):
        impls = [i for i in impls if i != "grouped"]
    # A longer spin: Python queues a four-stream loop of 32 experts in over 1 ms, which the default spin would let
    # into the timing.
    measure.SPIN_CYCLES = 8_000_000
    section("grouped GEMMs", lambda: measure_grouped(grouped, source, deadline, impls))
    env.write("at the end:\n%s\n" % gpu_state())
    env.close()
    log("done")


if __name__ == "__main__":
    main()
