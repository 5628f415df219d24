"""Charts from simtrain sweep CSVs and run reports (see tools/plot for the commands)."""
import argparse
import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    sys.exit(1)


def read_rows(path, needed):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot be read ({e.strerror})")
    if not rows or any(c not in rows[0] for c in needed):
        fail(f"{path}: not a sweep.csv (expected the columns {', '.join(needed)}, as simtrain sweep --out writes)")
    return [r for r in rows if r["outcome"] == "ranked"]


def output(args, suffix):
    if args.output:
        return args.output
    first = args.inputs[0]
    return os.path.join(os.path.dirname(first) or ".", f"{os.path.splitext(os.path.basename(first))[0]}-{suffix}.png")


def save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    print(f"wrote {path}")


def bubble(args):
    rows = read_rows(args.inputs[0], ["schedule", "virtual_stages", "microbatches", "bubble", "bubble_theory"])
    if not rows:
        fail(f"{args.inputs[0]}: no simulated layout")
    series = {}
    for r in rows:
        name = r["schedule"] + (f" (v = {r['virtual_stages']})" if r["schedule"] == "interleaved" else "")
        series.setdefault(name, []).append((int(r["microbatches"]), float(r["bubble"]), float(r["bubble_theory"])))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (name, points) in enumerate(sorted(series.items())):
        points.sort()
        color = f"C{i}"
        m = [p[0] for p in points]
        ax.plot(m, [100 * p[1] for p in points], "os^D"[i % 4] + "-", color=color, markersize=9 - 2 * i,
                label=f"{name}: simulated")
        ax.plot(m, [100 * p[2] for p in points], "--", color=color, alpha=0.7, label=f"{name}: formula")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("micro-batches per step (m)")
    ax.set_ylabel("pipeline bubble (% of the step)")
    ax.set_title("Pipeline bubble against micro-batches")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, output(args, "bubble"))


SHORT = {"micro_batch": "mbs", "virtual_stages": "v", "zero_stage": "ZeRO", "recompute": "recompute",
         "sequence_parallel": "SP", "schedule": ""}


def short_label(label):
    """'tp=4 pp=8 schedule=interleaved virtual_stages=4 sequence_parallel=true' -> 'tp4 pp8 interleaved v4 SP'"""
    parts = []
    for item in label.split():
        key, _, value = item.partition("=")
        name = SHORT.get(key, key)
        if value in ("true", "false"):
            parts += [name] if value == "true" else []
        elif not (key == "virtual_stages" and value == "1"):
            parts.append(f"{name}{'=' if name == 'recompute' else ''}{value}")
    return " ".join(parts)


def layouts(args):
    rows = read_rows(args.inputs[0], ["label", "rank", "step_time_s", "tokens_per_s"])
    if not rows:
        fail(f"{args.inputs[0]}: no simulated layout")
    rows = sorted(rows, key=lambda r: int(r["rank"]))[: args.top]
    fig, ax = plt.subplots(figsize=(10, 0.3 * len(rows) + 1.5))
    y = list(range(len(rows)))[::-1]
    ax.barh(y, [float(r["step_time_s"]) for r in rows], color="C0")
    ax.set_yticks(y)
    ax.set_yticklabels([f"{r['rank']}. {short_label(r['label'])}" for r in rows], fontsize=8)
    for yi, r in zip(y, rows):
        ax.text(0.01 * float(rows[0]["step_time_s"]), yi, f"{float(r['step_time_s']):.3f} s, "
                f"{float(r['tokens_per_s']):,.0f} tokens/s", va="center", fontsize=7, color="white")
    ax.set_xlabel("step time (s)")
    ax.set_title(f"Step time of the {len(rows)} best layouts")
    save(fig, output(args, "layouts"))


def links(args):
    reports = []
    for path in args.inputs:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            fail(f"{path}: not a report ({e})")
        if "links" not in report:
            fail(f"{path}: no \"links\" (expected a report.json of simtrain run --out, or run --format json)")
        reports.append((report.get("scenario", {}).get("name", os.path.basename(path)), report["links"]))
    classes = sorted({c for _, l in reports for c in l})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5), sharey=False)
    width = 0.8 / len(reports)
    for k, (name, l) in enumerate(reports):
        x = [i + k * width for i in range(len(classes))]
        for ax, key in zip(axes, ["avg_util", "peak_util"]):
            # A class none of whose links is measured has no peak (null): drawn as no bar.
            ax.bar(x, [100 * (l.get(c, {}).get(key) or 0.0) for c in classes], width, label=name, color=f"C{k}")
    for ax, title in zip(axes, ["average utilization over the step", "peak utilization"]):
        ax.set_xticks([i + width * (len(reports) - 1) / 2 for i in range(len(classes))])
        ax.set_xticklabels(classes)
        ax.set_ylabel("% of the link's bandwidth")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    save(fig, output(args, "links"))


def systems(args):
    """The best layout of each sweep (one per system): tokens per dollar and days to train the sweep's token budget."""
    best = []
    for path in args.inputs:
        rows = read_rows(path, ["rank", "label", "tokens_per_s", "tokens_per_usd", "time_to_train_s"])
        if not rows:
            fail(f"{path}: no simulated layout")
        top = min(rows, key=lambda r: int(r["rank"]))
        if not top["tokens_per_usd"] or not top["time_to_train_s"]:
            fail(f"{path}: no cost or training budget (expected a sweep of an owned or priced cluster with --tokens)")
        name = os.path.basename(os.path.dirname(os.path.abspath(path)))
        best.append((name, top))
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.45 * len(best) + 2))
    y = list(range(len(best)))[::-1]
    names = [f"{n}\n{short_label(r['label'])}" for n, r in best]
    for ax, key, scale, xlabel in [(axes[0], "tokens_per_usd", 1e-3, "thousand tokens per dollar"),
                                   (axes[1], "time_to_train_s", 1 / 86400, "days to train the budget")]:
        values = [float(r[key]) * scale for _, r in best]
        ax.barh(y, values, color=[f"C{i}" for i in range(len(best))])
        for yi, v in zip(y, values):
            ax.text(v, yi, f" {v:,.0f}", va="center", fontsize=8)
        ax.set_xlabel(xlabel)
        ax.set_yticks(y)
        ax.set_yticklabels(names if ax is axes[0] else [""] * len(best), fontsize=7)
        ax.grid(True, axis="x", alpha=0.3)
        ax.set_xlim(0, max(values) * 1.2)
    axes[0].set_title("Tokens per dollar (best layout)")
    axes[1].set_title("Time to train")
    save(fig, output(args, "systems"))


def main():
    parser = argparse.ArgumentParser(prog="tools/plot", description="PNG charts from simtrain sweep CSVs and reports")
    sub = parser.add_subparsers(dest="chart", required=True)
    for name, helptext in [("bubble", "bubble against micro-batches from a sweep.csv"),
                           ("layouts", "step time per layout from a sweep.csv"),
                           ("links", "link utilization per class from report.json files"),
                           ("systems", "the best layout of each of several sweep.csv files (one per system)")]:
        p = sub.add_parser(name, help=helptext)
        p.add_argument("inputs", nargs="+" if name in ("links", "systems") else 1)
        p.add_argument("-o", "--output", help="PNG file to write")
        if name == "layouts":
            p.add_argument("--top", type=int, default=20, help="layouts shown (default 20)")
    args = parser.parse_args()
    {"bubble": bubble, "layouts": layouts, "links": links, "systems": systems}[args.chart](args)


if __name__ == "__main__":
    main()
