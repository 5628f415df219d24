#!/usr/bin/env python3
"""Writes simtrain's measured kernel tables (topologies/gpus/kernels/*.json, schema kernels/v1).

Inputs, all public measurements:
  - the GEMM CSVs that extract_gemm.py writes from microsoft/vidur (MIT) and OpenXLA's matmul interpolator table
    (Apache-2.0): a100.csv, h100.csv (m,n,k,batch,layout,tflops,source);
  - data/extra_gemm.csv: rows transcribed from the MAMF table (stas00/ml-engineering) and Azure's cuBLASLt runs;
  - data/flash_attention.csv: FlashAttention curves read off the published figures (Dao-AILab/flash-attention
    assets, FA2 and FA3 papers);
  - data/h100/, data/h200/: measure.py's runs on an H100 SXM and an H200 SXM (GEMMs at the validation shapes in all
    three layouts; attention at the published curves' shapes and at the validation shapes, from which each chip's
    occupancy curve is taken). The H200 has no public per-shape GEMM data: its table is its own measurement, with the
    H100's published FlashAttention-1 and -3 curves carried over for the implementations it did not run.

Usage:
  python3 tools/kernels/extract_gemm.py VIDUR XLA_HEADER --out /tmp/gemm    # once, from the fetched sources
  python3 tools/kernels/build_tables.py [/tmp/gemm] [--out topologies/gpus/kernels]
Without the folder, the public GEMM rows are those of the tables already written (the rows of every source but
the measured one), so that a new measurement can join without fetching vidur and XLA again.

The vidur rows are subsampled in the token dimension (m) to the sizes below, which keeps the tables small without
losing the tile-aligned sizes training uses. vidur's mlp_down_proj rows are left out: its benchmark multiplies
all-zero activations (its dummy weights make SiLU*mul underflow in fp16), which runs faster than real data.
"""

import argparse
import csv
import json
import math
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
M_SIZES = {64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768}

CHIPS = {
    "a100-sxm": {
        "gemm_csv": "a100.csv",
        "name": "A100 SXM4 (GA100, 108 SMs, 1410 MHz boost)",
        "description": "Measured 16-bit kernel rates of the A100 SXM4 (40 GB and 80 GB, A800): GEMMs by shape, "
                       "FlashAttention by sequence length and head size.",
        "sms": 108,
        "best": ("271.2Tf", "mamf"),
        "extra_gpu": "a100",
        "attention_gpu": "a100_80gb_sxm4",
        "measured": None,
    },
    "h100-sxm": {
        "gemm_csv": "h100.csv",
        "name": "H100 SXM5 (GH100, 132 SMs, 1980 MHz boost)",
        "description": "Measured 16-bit kernel rates of the H100 SXM5 (H100, H800): GEMMs by shape, FlashAttention-1/2/3 "
                       "and cuDNN attention by sequence length and head size.",
        "sms": 132,
        "best": ("794.5Tf", "mamf"),
        "extra_gpu": "h100",
        "attention_gpu": "h100_80gb_sxm5",
        "measured": "h100",
    },
    "h200-sxm": {
        "gemm_csv": None,
        "name": "H200 SXM (GH100, 132 SMs, 1980 MHz boost, 141 GB HBM3e)",
        "description": "Measured 16-bit kernel rates of the H200 SXM: GEMMs by shape and FlashAttention-2 and cuDNN "
                       "attention by sequence length and head size, measured on the part; FlashAttention-1 and -3 "
                       "from the H100's published curves.",
        "sms": 132,
        "best": ("823.9Tf", "mamf-h200"),
        "extra_gpu": "h200",
        "attention_gpu": "h100_80gb_sxm5",
        "measured": "h200",
        "own_attention": True,
        "occupancy_source": "occupancy-h200",
    },
}

SOURCES = {
    "vidur": "microsoft/vidur (MIT) 7d47513363ec, data/profiling/compute/<gpu>/<model>/mlp.csv: median forward time of "
             "sarathi's linear layers (Y = X W^T, fp16, kernel time under torch.profiler, 20 repeats) for Llama-2/3, "
             "CodeLlama-34B, Qwen-72B, InternLM-20B, phi-2 at TP 1-8; shapes from vidur's model configs "
             "(tools/kernels/extract_gemm.py)",
    "xla": "OpenXLA xla/service/gpu/model/matmul_interpolator_data.h (Apache-2.0; ROCm/xla mirror e3fbb55d737b), sm_90, "
           "bf16xbf16->bf16: median kernel time of dot(lhs[b,m,k], rhs[b,k,n]) through XLA's autotuned pipeline",
    "mamf": "stas00/ml-engineering compute/accelerator/README.md (744d01e), Maximum Achievable Matmul FLOPS: best shape "
            "of a bf16 torch.mm sweep, mean of 100 iterations (A100 SXM 271.2 TF/s at 1024x10240x5120; H100 SXM "
            "794.5 TF/s at 2048x2048x13312)",
    "azure": "Azure/AI-benchmarking-guide (8fd0c6e) Azure_Results/ND_A100_v4_results.md, cuBLASLt FP16 GEMM, "
             "A100-SXM4-80GB, random data, 10,000 warm-up iterations",
    "fa2-a100": "Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png (4f285b35, 2023-07-17; FA2 paper "
                "Fig. 4): A100 80GB SXM4, fp16, hidden 2048, 16k tokens per batch, forward+backward TFLOP/s "
                "(causal counted as half the score matrix); bar labels read off the figure",
    "fa3-h100": "FlashAttention-3 paper (arXiv 2407.08608) figures, as published in Dao-AILab/flash-attention "
                "assets/flash3_fp16_fwd.png (7ef24848) and the paper's backward figure: H100 SXM5, fp16, hidden 2048, "
                "16k tokens per batch; FlashAttention-2, FlashAttention-3 and cuDNN bars read off the figures",
    "fa2-h100": "Dao-AILab/flash-attention assets/flash2_h100_fwd_bwd_benchmark.png (4f285b35, 2023-07-17): H100 SXM5, "
                "fp16, forward+backward TFLOP/s; bar labels read off the figure",
    "mamf-h200": "stas00/ml-engineering PR #137 (996698dd) compute/accelerator/benchmarks/README.md: H200 SXM at its "
                 "700 W limit, best bf16 matmul of a shape sweep in short bursts (MAMF) 823.9 TF/s",
    "h200-measured": "tools/kernels/measure.py on one H200 SXM 141 GB (700 W, PyTorch 2.11, CUDA 13.0, cuDNN 9.19; "
                     "tools/kernels/data/h200/env.txt: it held 1.8 GHz under load): bf16 GEMMs through cuBLAS "
                     "(F.linear and torch.matmul, random data) at the validation cases' per-rank shapes in the forward, "
                     "data-gradient and weight-gradient layouts; attention forward and backward, causal and not, "
                     "through scaled_dot_product_attention's flash (FlashAttention-2) and cuDNN backends at "
                     "FlashAttention's benchmark shapes (16k tokens, hidden 2048); medians of CUDA-event times with the "
                     "L2 flushed",
    "fa3-h100-carried": "the H100's FlashAttention-3 figures (FA3 paper, arXiv 2407.08608; Dao-AILab/flash-attention "
                        "assets/flash3_fp16_fwd.png 7ef24848) carried to the H200, the same GH100 die and SM clocks "
                        "[derived]",
    "fa2-h100-carried": "the H100's FlashAttention-1 forward+backward figure (Dao-AILab/flash-attention "
                        "assets/flash2_h100_fwd_bwd_benchmark.png 4f285b35) carried to the H200, the same GH100 die "
                        "and SM clocks [derived]",
    "h100-fp8": "tools/kernels/measure.py --fp8-layouts on one H100 80GB HBM3 (PyTorch 2.11, CUDA 13.0; "
                "tools/kernels/data/h100/fp8_layouts.csv, env_fp8_layouts.txt): torch._scaled_mm E4M3 x E4M3, "
                "per-tensor scales, bf16 output, against bf16 cuBLAS in the pass's own layout, at the H100 validation "
                "cases' forward, data-gradient and weight-gradient GEMMs; medians of CUDA-event times with the L2 "
                "flushed",
    "h200-fp8": "tools/kernels/measure.py --fp8-layouts on one H200 SXM 141 GB (PyTorch 2.11, CUDA 13.0; "
                "tools/kernels/data/h200/fp8_layouts.csv, env_fp8_layouts.txt): torch._scaled_mm E4M3 x E4M3, "
                "per-tensor scales, bf16 output, against bf16 cuBLAS in the pass's own layout, at the H100 validation "
                "cases' forward, data-gradient and weight-gradient GEMMs; medians of CUDA-event times with the L2 "
                "flushed",
    "occupancy-h200": "tools/kernels/data/h200/attention.csv: the validation cases' attention shapes measured on the "
                      "H200 against the same implementation at FlashAttention's benchmark shapes (16k tokens, hidden "
                      "2048), by waves of (head, 128-query block) tiles over the SMs: medians per half-octave of "
                      "waves, head sizes 64 and 128",
    "h100-measured": "tools/kernels/measure.py on one H100 80GB HBM3 (SXM5, 700 W, driver 580, PyTorch 2.11, CUDA 13.0, "
                     "cuDNN 9.19; tools/kernels/data/h100/env.txt): bf16 GEMMs through cuBLAS (F.linear and "
                     "torch.matmul, random data) at the validation cases' per-rank shapes in the forward, "
                     "data-gradient and weight-gradient layouts; causal attention backward through "
                     "scaled_dot_product_attention's flash (FlashAttention-2) and cuDNN backends at FlashAttention's "
                     "benchmark shapes; medians of CUDA-event times with the L2 flushed",
    "h100-grouped": "tools/kernels/measure_moe.py on one H100 80GB HBM3 (PyTorch 2.11, CUDA 13.0; "
                    "tools/kernels/data/h100/grouped_gemm.csv, env_moe.txt, 2026-11-27): one expert-parallel rank's "
                    "local-expert GEMMs (batch = its experts, m = each expert's tokens, balanced) at the Qwen3, "
                    "DeepSeek-V3, gpt-oss and Mixtral expert shapes from 128 to 8,192 tokens per expert, in the "
                    "forward, data-gradient and weight-gradient layouts, one cuBLAS bf16 GEMM per expert over four "
                    "streams as Transformer Engine's GroupedLinear runs them; medians of CUDA-event times with the L2 "
                    "flushed",
    "h100-grouped-fp8": "tools/kernels/measure_moe.py on one H100 80GB HBM3 (tools/kernels/data/h100/"
                        "grouped_gemm.csv): the same local-expert GEMMs in FP8 (torch._scaled_mm E4M3, per-tensor "
                        "scales, bf16 output, one per expert over four streams) against bf16",
    "h200-grouped": "tools/kernels/measure_moe.py on one H200 SXM 141 GB (PyTorch 2.11, CUDA 13.0; "
                    "tools/kernels/data/h200/grouped_gemm.csv, env_moe.txt, 2026-11-27): the local-expert GEMMs as "
                    "for h100-grouped (batch = the rank's experts, m = each expert's tokens, balanced; one cuBLAS bf16 "
                    "GEMM per expert over four streams); medians of CUDA-event times with the L2 flushed",
    "h200-grouped-fp8": "tools/kernels/measure_moe.py on one H200 SXM 141 GB (tools/kernels/data/h200/"
                        "grouped_gemm.csv): the same local-expert GEMMs in FP8 (torch._scaled_mm E4M3, per-tensor "
                        "scales, bf16 output, one per expert over four streams) against bf16",
    "occupancy": "tools/kernels/data/h100/attention.csv: the validation cases' attention shapes measured on the H100 "
                 "against the same implementation at FlashAttention's benchmark shapes (16k tokens, hidden 2048), "
                 "by waves of (head, 128-query block) tiles over the SMs: medians per half-octave of waves, head "
                 "sizes 64 and 128",
    "occupancy-derived": "the H100's measured occupancy curve (tools/kernels/data/h100/attention.csv) in waves of "
                         "tiles over the SMs, carried to this chip [derived]",
}

IMPLS = {"flash_attn_1_cuda": "flash1", "flash_attn_2": "flash2", "flash_attn_3": "flash3", "cudnn": "cudnn"}


def rate(tflops):
    return "%.1fTf" % float(tflops)


def measured_source(chip):
    """The source key of the rows measure.py measured on the chip itself (h100-measured)."""
    return chip["measured"] + "-measured" if chip["measured"] else None


def grouped_source(chip):
    """The source key of the expert GEMMs measure_moe.py measured on the chip itself (h100-grouped)."""
    return chip["measured"] + "-grouped" if chip["measured"] else None


def grouped_times(chip):
    """{(M, N, K, experts, layout): (bf16 seconds, FP8 seconds)} of the chip's local-expert GEMMs with balanced
    counts (data/GPU/grouped_gemm.csv): Transformer Engine's GroupedLinear, one cuBLAS GEMM per expert over four
    streams (measure_moe.py's loop4 and fp8_loop4); a four-stream time above the one-stream loop's is a timing
    outlier (the streams can only overlap the same GEMMs), and the loop's time stands for it."""
    path = os.path.join(HERE, "data", chip["measured"] or "", "grouped_gemm.csv")
    if not chip["measured"] or not os.path.exists(path):
        return {}
    by_impl = {}
    with open(path) as fh:
        for r in csv.DictReader(fh):
            if r["counts"] != "balanced":
                continue
            key = (int(r["M"]), int(r["N"]), int(r["K"]), int(r["experts"]), r["layout"])
            by_impl.setdefault(key, {})[r["impl"]] = float(r["time_us"]) * 1e-6
    out = {}
    for key, t in sorted(by_impl.items()):
        if "loop4" in t and "loop" in t and "fp8_loop4" in t:
            out[key] = (min(t["loop4"], t["loop"]), t["fp8_loop4"])
    return out


def grouped_rows(chip):
    """The local experts' bf16 GEMMs as table rows, batch = the experts (grouped_times)."""
    rows = []
    for (m, n, k, experts, layout), (bf16, _) in grouped_times(chip).items():
        rows.append([m, n, k, experts, layout, rate(2.0 * m * n * k * experts / bf16 / 1e12), grouped_source(chip)])
    return rows


def public_gemm_rows(chip, chip_id, gemm_dir):
    """{(m, n, k, batch, layout, source): [TFLOP/s]} of the public sources: from extract_gemm.py's CSVs, or from the
    table already written."""
    rows = {}
    if chip["gemm_csv"] is None:
        return rows
    if gemm_dir is None:
        with open(os.path.join(HERE, "..", "..", "topologies", "gpus", "kernels", chip_id + ".json")) as fh:
            for m, n, k, b, layout, rate_text, source in json.load(fh)["gemm"]["rows"]:
                if source not in (measured_source(chip), grouped_source(chip)):
                    rows.setdefault((m, n, k, b, layout, source), []).append(float(rate_text[:-2]))
        return rows
    with open(os.path.join(gemm_dir, chip["gemm_csv"])) as fh:
        for r in csv.DictReader(fh):
            source = r["source"].split(":")[0]
            m, n, k, b = int(r["m"]), int(r["n"]), int(r["k"]), int(r["batch"])
            if source == "vidur":
                if ":mlp_down_proj:" in r["source"] or m not in M_SIZES:
                    continue
                layout = "fwd"
            else:  # XLA: row-major dot(lhs[m,k], rhs[k,n]), the data-gradient (NN) layout
                layout = "dgrad"
            rows.setdefault((m, n, k, b, layout, source), []).append(float(r["tflops"]))
    with open(os.path.join(HERE, "data", "extra_gemm.csv")) as fh:
        for r in csv.DictReader(fh):
            source = r["source"].split(":")[0]
            if r["gpu"] != chip["extra_gpu"] or r["dtype"] not in ("bf16", "fp16") or source not in ("mamf", "azure"):
                continue
            key = (int(r["m"]), int(r["n"]), int(r["k"]), int(r["batch"]), "fwd", source)
            rows.setdefault(key, []).append(float(r["tflops"]))
    return rows


def gemm_rows(chip, chip_id, gemm_dir):
    rows = public_gemm_rows(chip, chip_id, gemm_dir)
    if chip["measured"]:
        with open(os.path.join(HERE, "data", chip["measured"], "gemm.csv")) as fh:
            for r in csv.DictReader(fh):
                if r["layout"] in ("fwd", "dgrad", "wgrad"):  # wgrad_fp32 (an fp32 output) is not a table layout
                    key = (int(r["m"]), int(r["n"]), int(r["k"]), int(r["batch"]), r["layout"],
                           measured_source(chip))
                    rows.setdefault(key, []).append(float(r["tflops"]))
    return [[m, n, k, b, layout, rate(statistics.median(v)), source]
            for (m, n, k, b, layout, source), v in sorted(rows.items())] + grouped_rows(chip)


def fp8_rows(chip):
    """The chip's measured FP8 speed-ups over bf16 (data/GPU/fp8_layouts.csv), a row per GEMM of every pass at its
    own (m, n, k); none for a chip not measured in FP8."""
    path = os.path.join(HERE, "data", chip["measured"] or "", "fp8_layouts.csv")
    if not chip["measured"] or not os.path.exists(path):
        return []
    with open(path) as fh:
        rows = [[int(r["m"]), int(r["n"]), int(r["k"]), int(r["batch"]), r["layout"], round(float(r["speedup"]), 3),
                 chip["measured"] + "-fp8"] for r in csv.DictReader(fh)]
    return rows + [[m, n, k, experts, layout, round(bf16 / fp8, 3), chip["measured"] + "-grouped-fp8"]
                   for (m, n, k, experts, layout), (bf16, fp8) in grouped_times(chip).items()]


MEASURED_IMPLS = {"flash": "flash2", "cudnn": "cudnn"}


def measured_attention(chip):
    if not chip["measured"]:
        return []
    with open(os.path.join(HERE, "data", chip["measured"], "attention.csv")) as fh:
        return list(csv.DictReader(fh))


def attention_rows(chip):
    """The published curves of the chip, and its measured rows at FlashAttention's benchmark shapes. A chip with
    `own_attention` takes every pass of the implementations it measured from its own run, and carries the published
    curves of the others over from the H100; otherwise only the causal backward is measured (the published figures
    show it for no implementation on H100: FlashAttention-2's was derived, cuDNN's absent)."""
    benchmark = [r for r in measured_attention(chip) if r["shapes_of"] == "fa-benchmark"]
    own = chip.get("own_attention", False)
    measured_impls = {MEASURED_IMPLS[r["impl"]] for r in benchmark} if own else set()
    out = []
    with open(os.path.join(HERE, "data", "flash_attention.csv")) as fh:
        for r in csv.DictReader(fh):
            if r["gpu"] != chip["attention_gpu"] or r["impl"] not in IMPLS or IMPLS[r["impl"]] in measured_impls:
                continue
            src = r["source"]
            if "DERIVED" in src or "derived" in src.split(";")[0]:
                if chip["measured"]:
                    continue  # the measured causal backward below replaces the derivation
                source = "derived"
            elif "flash2_a100" in src:
                source = "fa2-a100"
            elif "flash2_h100" in src:
                source = "fa2-h100"
            else:
                source = "fa3-h100"
            if own:
                source += "-carried"
            out.append([IMPLS[r["impl"]], r["direction"], r["causal"] == "true", int(r["head_dim"]),
                        int(r["seq_len"]), rate(r["tflops"]), source])
    for r in benchmark:
        if own or (r["direction"] == "bwd" and r["causal"] == "true"):
            out.append([MEASURED_IMPLS[r["impl"]], r["direction"], r["causal"] == "true", int(r["head_dim"]),
                        int(r["seq_len"]), rate(r["tflops"]), measured_source(chip)])
    out.sort(key=lambda row: (row[0], row[1], row[2], row[3], row[4]))
    return out


def occupancy_rows(chip):
    """The attention rate at a shape over the same implementation's rate at FlashAttention's benchmark shapes (which
    fill the GPU), against the waves of (head, 128-query block) tiles over the SMs: the median per half-octave of
    waves below 16 waves, where it reaches 1; head sizes 64 and 128 (others pad). A chip without measurements of its
    own takes the H100's curve."""
    measuring = chip if chip["measured"] else CHIPS["h100-sxm"]
    measured = measured_attention(measuring)
    sms = measuring["sms"]
    grid = {}
    for r in measured:
        if r["shapes_of"] == "fa-benchmark":
            grid.setdefault((r["impl"], r["direction"], r["causal"], int(r["head_dim"])), {})[int(r["seq_len"])] = \
                float(r["tflops"])
    bins = {}
    for r in measured:
        d, s = int(r["head_dim"]), int(r["seq_len"])
        curve = grid.get((r["impl"], r["direction"], r["causal"], d))
        if r["shapes_of"] == "fa-benchmark" or curve is None or s not in curve:
            continue
        waves = int(r["heads"]) * -(-s // 128) / sms
        if waves < 2 ** 3.75:  # the half-octave bins below 16 waves
            octave = round(2 * math.log2(waves)) / 2
            bins.setdefault((MEASURED_IMPLS[r["impl"]], r["direction"], octave), []).append(
                float(r["tflops"]) / curve[s])
    source = chip.get("occupancy_source", "occupancy") if chip["measured"] else "occupancy-derived"
    rows = [[impl, direction, round(2 ** octave, 3), round(min(1.0, statistics.median(v)), 3), source]
            for (impl, direction, octave), v in sorted(bins.items())]
    for impl in sorted({r[0] for r in rows}):
        for direction in ("fwd", "bwd"):
            rows.append([impl, direction, 16.0, 1.0, source])
    rows.sort(key=lambda row: (row[0], row[1], row[2]))
    return rows


def write(chip_id, chip, gemm_dir, out_dir):
    gemm = gemm_rows(chip, chip_id, gemm_dir)
    attention = attention_rows(chip)
    occupancy = occupancy_rows(chip)
    fp8 = fp8_rows(chip)
    # The large-shape limit: MAMF, or a measured row above it (XLA's batched 4096-cubed GEMMs on H100).
    best = max([float(chip["best"][0][:-2])] + [float(r[5][:-2]) for r in gemm])
    used = sorted({r[6] for r in gemm} | {r[6] for r in attention} | {r[4] for r in occupancy} | {r[6] for r in fp8} |
                  {chip["best"][1]})
    doc = {
        "schema": "kernels/v1",
        "name": chip["name"],
        "description": chip["description"],
        "sms": chip["sms"],
        "gemm": {
            "about": "16-bit (fp16/bf16) tensor-core GEMMs: (m x k) times (k x n), batch times, as measured; written "
                     "by tools/kernels/build_tables.py",
            "best": rate(best),
            "columns": ["m", "n", "k", "batch", "layout", "rate", "source"],
            "rows": gemm,
        },
        "attention": {
            "about": "fused attention, 16-bit, FLOPs as FlashAttention's benchmark counts them (forward 4 b s^2 h d, "
                     "halved when causal; backward 2.5x forward)",
            "columns": ["impl", "direction", "causal", "head_dim", "seq", "rate", "source"],
            "rows": attention,
            "occupancy": {
                "about": "the rate at few (head, 128-query block) tiles per SM as a fraction of the rate at many, by "
                         "waves of tiles over the SMs (1 from the last row on)",
                "columns": ["impl", "direction", "waves", "fraction", "source"],
                "rows": occupancy,
            },
        },
        "sources": {key: SOURCES[key] for key in used},
    }
    if fp8:
        doc["fp8_gemm"] = {
            "about": "FP8 (E4M3, per-tensor scales, bf16 output) GEMM throughput over bf16's at the same shape, both "
                     "measured side by side; the data- and weight-gradient GEMMs at their own (m, n, k)",
            "columns": ["m", "n", "k", "batch", "layout", "speedup", "source"],
            "rows": fp8,
        }
        doc["sources"] = doc.pop("sources")  # the sources last
    path = os.path.join(out_dir, chip_id + ".json")
    with open(path, "w") as fh:
        fh.write(compact_json(doc))
    print("%s: %d GEMM rows, %d attention rows, %d occupancy rows, %d FP8 rows" % (
        path, len(gemm), len(attention), len(occupancy), len(fp8)), file=sys.stderr)


def compact_json(doc):
    """Indented JSON with every array of plain values (a table row, the column names) on one line."""
    text = json.dumps(doc, indent=2)
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("gemm_dir", nargs="?", help="folder with extract_gemm.py's a100.csv and h100.csv (default: the "
                        "public rows of the tables already written)")
    parser.add_argument("--out", default=os.path.join(HERE, "..", "..", "topologies", "gpus", "kernels"))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for chip_id, chip in CHIPS.items():
        write(chip_id, chip, args.gemm_dir, args.out)


if __name__ == "__main__":
    main()
