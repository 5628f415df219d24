#!/usr/bin/env python3
"""Build GEMM throughput tables for A100 / H100 from public measurements.

Python 3 standard library only.

Usage:
  python3 extract.py VIDUR XLA_HEADER [--cudal2 DIR] [--out DIR]

  VIDUR       microsoft/vidur checkout (work tree) or bare git dir; CSVs are read
              from data/profiling/compute/{a100,h100}/<org>/<model>/mlp.csv
              (bare git dir: read with `git show HEAD:<path>`).
  XLA_HEADER  xla/service/gpu/model/matmul_interpolator_data.h (openxla/xla or
              ROCm/xla), a text-proto table of FLOP/s per (b, m, n, k) per GPU key.
  --cudal2    optional deepreinforce-ai/CUDA-L2 checkout or bare git dir; its
              eval_results/*_speedup_offline.csv give cuBLAS NN vs TN timings
              (as ratios) -> layout_ratio.csv.
  --out       output directory (default: the directory of this script).

Writes: a100.csv, h100.csv (m,n,k,batch,layout,tflops,source),
smallkernels.csv, extra_gemm.csv (transcribed rows from other sources),
layout_ratio.csv (if --cudal2), summary.txt (statistics quoted in NOTES.md).
"""

import argparse
import csv
import io
import os
import re
import statistics
import subprocess
import sys

PEAK_TFLOPS = {"a100": 312.0, "h100": 989.0}  # dense fp16/bf16 tensor core, SXM
GPUS = ("a100", "h100")
BYTES = 2  # fp16 (vidur profiles in torch.float16)

# --------------------------------------------------------------------------- io


class Tree:
    """Read files from a work tree or a bare git directory."""

    def __init__(self, root):
        self.root = root
        self.bare = not os.path.isdir(os.path.join(root, "data")) and not os.path.isdir(
            os.path.join(root, "eval_results")) and (
            os.path.isfile(os.path.join(root, "HEAD")) or os.path.isdir(os.path.join(root, ".git")))

    def _git(self, *args):
        gd = self.root if os.path.isfile(os.path.join(self.root, "HEAD")) else os.path.join(self.root, ".git")
        return subprocess.run(["git", "--git-dir", gd] + list(args), check=True,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode("utf-8")

    def commit(self):
        try:
            return self._git("rev-parse", "HEAD").strip()
        except Exception:
            return "unknown"

    def list(self, prefix):
        if self.bare:
            out = self._git("ls-tree", "-r", "--name-only", "HEAD", prefix)
            return [p for p in out.splitlines() if p]
        res = []
        base = os.path.join(self.root, prefix)
        for d, _, files in os.walk(base):
            for f in files:
                res.append(os.path.relpath(os.path.join(d, f), self.root).replace(os.sep, "/"))
        return sorted(res)

    def read(self, path):
        if self.bare:
            return self._git("show", "HEAD:" + path)
        with open(os.path.join(self.root, path), encoding="utf-8") as fh:
            return fh.read()


def write_csv(path, header, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow(r)


def fmt(x, nd=2):
    return ("%%.%df" % nd) % x


# ------------------------------------------------------------------------ vidur

GEMM_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
SMALL_OPS = ("emb", "input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")


def gemm_shape(op, T, tp, h, nq, nkv, ffn, gated):
    """(m, n, k) of one vidur linear layer, per TP rank (Y[m,n] = X[m,k] W[n,k]^T)."""
    hd = h // nq
    if op == "attn_pre_proj":      # ColumnParallelLinear(h, (nq+2nkv)*hd)
        return T, (nq + 2 * nkv) * hd // tp, h
    if op == "attn_post_proj":     # RowParallelLinear(nq*hd, h)
        return T, h, nq * hd // tp
    if op == "mlp_up_proj":        # ColumnParallelLinear(h, 2*ffn if gated else ffn)
        return T, (2 if gated else 1) * ffn // tp, h
    if op == "mlp_down_proj":      # RowParallelLinear(ffn, h)
        return T, h, ffn // tp
    raise ValueError(op)


def small_bytes(op, T, tp, h, nq, nkv, ffn, gated, model):
    """Estimated HBM bytes moved by one small op (fp16), see NOTES.md."""
    hd = h // nq
    if op == "emb":                # F.embedding: read T ids (int64), T rows, write T rows
        return 2 * T * h * BYTES + 8 * T
    if op in ("input_layernorm", "post_attention_layernorm"):
        # RMSNorm (LayerNorm for phi-2): read x, write y, read weight (+bias)
        return 2 * T * h * BYTES + (2 if "phi" in model else 1) * h * BYTES
    if op == "attn_rope":
        # in-place rotary on q and k (read + write), positions int64, cos/sin cache row
        qk = T * (nq + nkv) // tp * hd
        return 2 * qk * BYTES + 8 * T + T * hd * BYTES
    if op == "mlp_act":
        f = ffn // tp
        if gated:                  # SiluAndMul: read 2f, write f
            return 3 * T * f * BYTES
        return 2 * T * f * BYTES   # GELU: read f, write f
    if op == "add":
        if "phi" in model:         # attn + mlp + residual: two binary adds
            return 6 * T * h * BYTES
        return 3 * T * h * BYTES   # residual + hidden
    raise ValueError(op)


def read_vidur(tree):
    """Yield dicts: gpu, model, op, T, tp, h, nq, nkv, ffn, gated, median_ms."""
    out = []
    for gpu in GPUS:
        for path in tree.list("data/profiling/compute/%s" % gpu):
            if not path.endswith("/mlp.csv"):
                continue
            model = path.split("/")[-2]
            text = tree.read(path)
            for r in csv.DictReader(io.StringIO(text)):
                T = int(r["num_tokens"])
                tp = int(r["num_tensor_parallel_workers"])
                h, nq, nkv = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
                ffn = int(r["n_expanded_embd"])
                gated = r["use_gated_mlp"].strip().lower() == "true"
                for op in GEMM_OPS + SMALL_OPS:
                    col = "time_stats.%s.median" % op
                    if col not in r or r[col] in ("", None):
                        continue
                    out.append(dict(gpu=gpu, model=model, op=op, T=T, tp=tp, h=h, nq=nq,
                                    nkv=nkv, ffn=ffn, gated=gated, ms=float(r[col]), path=path))
    return out


# -------------------------------------------------------------------------- xla


def parse_xla(text):
    """Return {gpu_key: [(b, m, n, k, {dtype_key: flops})]} from the text proto."""
    res = {}
    gpu = None
    cur = None
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r'key:\s*"([^"]+)"\s*$', s)
        if m:
            gpu = m.group(1)
            res.setdefault(gpu, [])
            continue
        m = re.match(r"(b|m|n|k):\s*(\d+)\s*$", s)
        if m and gpu is not None:
            if m.group(1) == "b":
                cur = {"b": int(m.group(2)), "fl": {}}
                res[gpu].append(cur)
            elif cur is not None:
                cur[m.group(1)] = int(m.group(2))
            continue
        m = re.match(r'flops\s*\{\s*key:\s*"([^"]+)"\s*value:\s*(\d+)', s)
        if m and cur is not None:
            cur["fl"][m.group(1).lower()] = int(m.group(2))
    return res


def xla_gpu(key):
    if key.startswith("sm_80"):
        return "a100"
    if key.startswith("sm_90"):
        return "h100"
    return None


# -------------------------------------------------------------- transcriptions
# Rows copied by hand from public files (see NOTES.md for paths and commits).
# gpu, dtype, m, n, k, batch, layout, tflops, stat, source
EXTRA = [
    # stas00/ml-engineering compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS
    # comparison table" (BF16); best shape "MxNxK" of a sweep; mean of 100 iters after 50 warmup;
    # mamf-finder.py computes torch.mm(A[m,k], B[n,k].t()) -> forward (TN) layout.
    ("a100", "bf16", 1024, 10240, 5120, 1, "fwd", 271.2, "mean,best-of-sweep", "mamf:a100-sxm:torch2.6.0+cu126"),
    ("a100_pcie", "bf16", 2048, 5120, 6144, 1, "fwd", 252.9, "mean,best-of-sweep", "mamf:a100-pcie:torch2.5.1+cu124"),
    ("h100", "bf16", 2048, 2048, 13312, 1, "fwd", 794.5, "mean,best-of-sweep", "mamf:h100-sxm:torch2.7.0+cu126"),
    ("h100", "fp8e4m3", 1024, 9216, 14336, 1, "fwd", 1402.6, "mean,best-of-sweep", "mamf:h100-sxm:fp8:torch2.7.0+cu126"),
    # Azure/AI-benchmarking-guide Azure_Results/ND_A100_v4_results.md, GEMM CuBLASLt, FP16,
    # A100-SXM4-80GB, random init, 10000 warmup; superbench cublaslt_gemm (OP_T, OP_N) = fwd layout;
    # flops counted as m*n*(2k-1).
    ("a100", "fp16", 1024, 1024, 1024, 1, "fwd", 119.4, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 2048, 2048, 2048, 1, "fwd", 221.8, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 4096, 4096, 4096, 1, "fwd", 228.0, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 8192, 8192, 8192, 1, "fwd", 253.7, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 16384, 16384, 16384, 1, "fwd", 256.5, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 1024, 2145, 1024, 1, "fwd", 132.8, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 6144, 12288, 12288, 1, "fwd", 250.8, "superbench", "azure:nd_a100_v4"),
    ("a100", "fp16", 802816, 192, 768, 1, "fwd", 157.8, "superbench", "azure:nd_a100_v4"),
    # Azure ND_H100_v5_results.md: the H100 table is FP8 (e4m3), not bf16 - kept for reference only.
    ("h100", "fp8e4m3", 1024, 1024, 1024, 1, "fwd", 274.1, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 2048, 2048, 2048, 1, "fwd", 1011.3, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 4096, 4096, 4096, 1, "fwd", 1216.9, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 8192, 8192, 8192, 1, "fwd", 1290.1, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 16384, 16384, 16384, 1, "fwd", 1377.3, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 32768, 32768, 32768, 1, "fwd", 1382.2, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 1024, 2145, 1024, 1, "fwd", 410.7, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 6144, 12288, 12288, 1, "fwd", 1351.4, "superbench", "azure:nd_h100_v5:fp8"),
    ("h100", "fp8e4m3", 802816, 192, 768, 1, "fwd", 663.8, "superbench", "azure:nd_h100_v5:fp8"),
    # EleutherAI/cookbook benchmarks/sizing/sample_results/transformer.out (GPU not named; rates
    # fit an A100). fp16, F.linear(A[b=2048,4,in], W[out,in]) -> GEMM m=8192; min of iterations.
    ("a100?", "fp16", 8192, 12288, 4096, 1, "fwd", 241.616, "min", "cookbook:transformer.out:qkv_transform"),
    ("a100?", "fp16", 8192, 4096, 4096, 1, "fwd", 234.852, "min", "cookbook:transformer.out:attention_linear_projection"),
    ("a100?", "fp16", 8192, 16384, 4096, 1, "fwd", 241.128, "min", "cookbook:transformer.out:mlp_h_to_4h"),
    ("a100?", "fp16", 8192, 4096, 16384, 1, "fwd", 252.764, "min", "cookbook:transformer.out:mlp_4h_to_h"),
    ("a100?", "fp16", 8192, 51200, 4096, 1, "fwd", 255.380, "min", "cookbook:transformer.out:logit_block"),
    # torch.bmm(A[b,m,n], B[b,n,k]) in the cookbook's naming (b x m x n x k), NN layout:
    # attention_score: b=64, (2048x256)@(256x2048); attention_over_value: (2048x2048)@(2048x256).
    ("a100?", "fp16", 2048, 2048, 256, 64, "nn", 130.182, "min", "cookbook:transformer.out:attention_score"),
    ("a100?", "fp16", 2048, 256, 2048, 64, "nn", 218.952, "min", "cookbook:transformer.out:attention_over_value"),
    # benchmarks/sizing/sample_results/bmm.out
    ("a100?", "fp16", 1024, 1024, 1024, 128, "nn", 227.295, "min", "cookbook:bmm.out"),
    ("a100?", "fp16", 1024, 1024, 2048, 128, "nn", 243.258, "min", "cookbook:bmm.out"),
]


# ----------------------------------------------------------------------- CUDA-L2


def read_cudal2(tree):
    """t_nn / t_tn for cuBLAS and cuBLASLt from CUDA-L2's speedup tables.

    Each column is speedup = t_baseline / t_cudaL2 for one (m,n,k), so the ratio of
    two baseline columns is the ratio of the baseline times.
    """
    rows = []
    for path in tree.list("eval_results"):
        mm = re.search(r"cuda_l2_(a100|h100|3090)_(F\w+?)_speedup_offline\.csv$", path)
        if not mm or mm.group(1) not in GPUS:
            continue
        gpu, acc = mm.group(1), mm.group(2)
        for r in csv.DictReader(io.StringIO(tree.read(path))):
            m, n, k = (int(x) for x in r["mnk"].split("_"))
            out = [gpu, acc, m, n, k]
            for a, b in (("cuBLAS-nn", "cuBLAS-tn"),
                         ("cuBLASLt-heuristic-nn", "cuBLASLt-heuristic-tn"),
                         ("cuBLASLt-auto-tuning-nn", "cuBLASLt-auto-tuning-tn")):
                out.append(float(r[a]) / float(r[b]))
            rows.append(out)
    return rows


# -------------------------------------------------------------------------- main


def pct(vals, q):
    v = sorted(vals)
    if not v:
        return float("nan")
    i = (len(v) - 1) * q
    lo = int(i)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (i - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vidur")
    ap.add_argument("xla_header")
    ap.add_argument("--cudal2")
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    summary = []

    # ---- vidur
    vt = Tree(a.vidur)
    recs = read_vidur(vt)
    summary.append("vidur commit: %s (%d op records)" % (vt.commit(), len(recs)))
    gemm = {g: {} for g in GPUS}      # (m,n,k,source) -> [tflops]
    detail = {g: [] for g in GPUS}    # for statistics: (T, tp, model, op, m, n, k, tflops)
    small = {}                        # (gpu, op, T, tp, model) -> [ (bytes, us) ]
    for r in recs:
        if r["op"] in GEMM_OPS:
            m, n, k = gemm_shape(r["op"], r["T"], r["tp"], r["h"], r["nq"], r["nkv"], r["ffn"], r["gated"])
            tf = 2.0 * m * n * k / (r["ms"] * 1e-3) / 1e12
            src = "vidur:%s:%s:tp%d" % (r["model"], r["op"], r["tp"])
            gemm[r["gpu"]].setdefault((m, n, k, src), []).append(tf)
        else:
            b = small_bytes(r["op"], r["T"], r["tp"], r["h"], r["nq"], r["nkv"], r["ffn"], r["gated"], r["model"])
            small.setdefault((r["gpu"], r["op"], r["T"], r["tp"], r["model"]), []).append((b, r["ms"] * 1e3))

    # ---- xla
    with open(a.xla_header, encoding="utf-8") as fh:
        xl = parse_xla(fh.read())
    summary.append("XLA GPU keys: %s" % ", ".join("%s(%d entries)" % (k, len(v)) for k, v in xl.items()))
    for key, entries in xl.items():
        g = xla_gpu(key)
        if g is None:
            continue
        for e in entries:
            fl = e["fl"].get("bf16xbf16->bf16")
            if fl is None:
                continue
            gemm[g].setdefault((e["m"], e["n"], e["k"], "xla:%s" % key, e["b"]), []).append(fl / 1e12)

    # ---- write a100.csv / h100.csv
    for g in GPUS:
        rows = []
        for key, vals in gemm[g].items():
            if key[3].startswith("xla:"):
                m, n, k, src, b = key
                layout = "any"
            else:
                m, n, k, src = key
                b, layout = 1, "fwd"
            rows.append((m, n, k, b, layout, fmt(statistics.median(vals), 3), src))
        rows.sort(key=lambda r: (r[6].split(":")[0], r[6], r[0], r[1], r[2], r[3]))
        write_csv(os.path.join(a.out, "%s.csv" % g), ["m", "n", "k", "batch", "layout", "tflops", "source"], rows)
        nv = sum(1 for r in rows if r[6].startswith("vidur:"))
        nx = sum(1 for r in rows if r[6].startswith("xla:"))
        summary.append("%s.csv: %d rows (vidur %d, xla %d); max vidur %.1f TF/s; max xla %s" % (
            g, len(rows), nv, nx, max(float(r[5]) for r in rows if r[6].startswith("vidur:")),
            ("%.1f" % max(float(r[5]) for r in rows if r[6].startswith("xla:"))) if nx else "-"))

    # ---- smallkernels.csv
    srows = []
    for (g, op, T, tp, model), lst in small.items():
        b = lst[0][0]
        us = statistics.median(x[1] for x in lst)
        srows.append((g, op, T, tp, model, b, fmt(us, 3), fmt(b / (us * 1e-6) / 1e9, 1) if us > 0 else ""))
    srows.sort(key=lambda r: (r[0], r[1], r[4], r[3], r[2]))
    write_csv(os.path.join(a.out, "smallkernels.csv"),
              ["gpu", "op", "num_tokens", "tp", "model", "bytes", "time_us", "GBps"], srows)

    # ---- extra_gemm.csv
    write_csv(os.path.join(a.out, "extra_gemm.csv"),
              ["gpu", "dtype", "m", "n", "k", "batch", "layout", "tflops", "stat", "source"], EXTRA)

    # ---- statistics for NOTES.md
    for g in GPUS:
        peak = PEAK_TFLOPS[g]
        summary.append("")
        summary.append("== %s (peak %.0f TF/s)" % (g, peak))
        big = []
        for key, vals in gemm[g].items():
            if key[3].startswith("xla:"):
                continue
            m, n, k, src = key
            big.append((m, n, k, src, statistics.median(vals)))
        sel = [x for x in big if x[0] == 4096 and 2.0 * x[0] * x[1] * x[2] >= 100e9]
        tfs = [x[4] for x in sel]
        if tfs:
            summary.append("vidur T=4096, GEMM >= 100 GFLOP: n=%d median %.1f TF/s (%.1f%% of peak); "
                           "p10 %.1f p90 %.1f min %.1f max %.1f" % (
                               len(tfs), statistics.median(tfs), 100 * statistics.median(tfs) / peak,
                               pct(tfs, .1), pct(tfs, .9), min(tfs), max(tfs)))
            t4 = [x[4] for x in sel if ":mlp_down_proj:" not in x[3]]
            summary.append("   excluding mlp_down_proj (all-zero input, see NOTES): n=%d median %.1f (%.1f%%); "
                           "p10 %.1f (%+.1f%%) p90 %.1f (%+.1f%%)" % (
                               len(t4), statistics.median(t4), 100 * statistics.median(t4) / peak,
                               pct(t4, .1), 100 * (pct(t4, .1) / statistics.median(t4) - 1),
                               pct(t4, .9), 100 * (pct(t4, .9) / statistics.median(t4) - 1)))
            for op in GEMM_OPS:
                t2 = [x[4] for x in sel if (":%s:" % op) in x[3]]
                if t2:
                    summary.append("   %-15s n=%2d median %.1f min %.1f max %.1f" % (
                        op, len(t2), statistics.median(t2), min(t2), max(t2)))
        # efficiency by m (all vidur GEMMs with n,k >= 1024)
        for T in (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768):
            t3 = [x[4] for x in big if x[0] == T and x[1] >= 1024 and x[2] >= 1024]
            if t3:
                summary.append("   m=%5d (n,k>=1024): n=%3d median %.1f TF/s (%.1f%%) p10 %.1f p90 %.1f" % (
                    T, len(t3), statistics.median(t3), 100 * statistics.median(t3) / peak, pct(t3, .1), pct(t3, .9)))
        # best vidur rows
        bst = sorted(big, key=lambda x: -x[4])[:5]
        for x in bst:
            summary.append("   top: %dx%dx%d %s %.1f" % x)
        # xla large shapes
        xr = [(key, statistics.median(v)) for key, v in gemm[g].items() if key[3].startswith("xla:")]
        if xr:
            big_x = [v for key, v in xr if key[0] * key[1] * key[2] * key[4] >= 4096 * 4096 * 2048]
            summary.append("xla: %d rows; b*m*n*k >= 4096*4096*2048: n=%d median %.1f; max %.1f" % (
                len(xr), len(big_x), statistics.median(big_x) if big_x else float("nan"), max(v for _, v in xr)))
            for key, v in sorted(xr):
                if key[4] == 1 and key[0] == key[1] == key[2]:
                    summary.append("   xla square b=1 %d^3: %.1f" % (key[0], v))
        # vidur vs xla at overlapping shapes (same m,n,k, b=1)
        xmap = {(key[0], key[1], key[2]): v for key, v in xr if key[4] == 1}
        pairs = [(x, xmap[(x[0], x[1], x[2])]) for x in big if (x[0], x[1], x[2]) in xmap]
        if pairs:
            rat = [p[0][4] / p[1] for p in pairs]
            summary.append("vidur/xla at identical shapes: n=%d median ratio %.3f (min %.3f max %.3f)" % (
                len(rat), statistics.median(rat), min(rat), max(rat)))
            for p in pairs:
                summary.append("   %dx%dx%d %s vidur %.1f xla %.1f" % (p[0][0], p[0][1], p[0][2], p[0][3], p[0][4], p[1]))

    # small-kernel summary (T=4096, tp=1)
    summary.append("")
    summary.append("== small kernels, median GB/s over models, T>=2048")
    for g in GPUS:
        for op in SMALL_OPS:
            v = [float(r[7]) for r in srows if r[0] == g and r[1] == op and r[2] >= 2048 and r[7]]
            if v:
                summary.append("   %s %-25s n=%3d median %.0f GB/s p10 %.0f p90 %.0f" % (
                    g, op, len(v), statistics.median(v), pct(v, .1), pct(v, .9)))

    # ---- CUDA-L2 layout ratios
    if a.cudal2:
        ct = Tree(a.cudal2)
        lrows = read_cudal2(ct)
        write_csv(os.path.join(a.out, "layout_ratio.csv"),
                  ["gpu", "acc", "m", "n", "k", "cublas_nn_over_tn", "cublaslt_heur_nn_over_tn",
                   "cublaslt_autotune_nn_over_tn"],
                  [r[:5] + [fmt(x, 4) for x in r[5:]] for r in lrows])
        summary.append("")
        summary.append("== CUDA-L2 (commit %s): time(NN)/time(TN) for cuBLAS, by 2mnk" % ct.commit())
        for g in GPUS:
            for acc in sorted(set(r[1] for r in lrows if r[0] == g)):
                sub = [r for r in lrows if r[0] == g and r[1] == acc]
                for lo, hi, lab in ((0, 1e9, "<1 GFLOP"), (1e9, 1e11, "1-100 GFLOP"), (1e11, 1e20, ">=100 GFLOP")):
                    s2 = [r for r in sub if lo <= 2.0 * r[2] * r[3] * r[4] < hi]
                    if not s2:
                        continue
                    for idx, nm in ((5, "cublasGemmEx"), (6, "cublasLt-heur"), (7, "cublasLt-autotune")):
                        v = [r[idx] for r in s2]
                        summary.append("   %s %s %-12s %-17s n=%3d median %.3f p10 %.3f p90 %.3f" % (
                            g, acc, lab, nm, len(v), statistics.median(v), pct(v, .1), pct(v, .9)))

    with open(os.path.join(a.out, "summary.txt"), "w") as fh:
        fh.write("\n".join(summary) + "\n")
    print("\n".join(summary))


if __name__ == "__main__":
    sys.exit(main())
