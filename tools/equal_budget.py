"""Table of the equal-budget study from its sweeps (see tools/equal-budget): the best layout per model and system,
written into the scenario's plan and into scenarios/whatif/README.md and README.md between their markers."""
import json
import os
import sys



def value(text):
    """A sweep override's value as JSON: 4, true, null, or a bare string (1f1b)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def main(out, folder):
    rows = []
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name, "sweep.json")) as f:
            sweep = json.load(f)
        ranked = [r for r in sweep["rows"] if r.get("outcome") == "ranked"]
        path = os.path.join(folder, name + ".json")
        with open(path) as f:
            scenario = json.load(f)
        if not ranked:
            rows.append((scenario, None))
            continue
        best = min(ranked, key=lambda r: r["rank"])
        plan = scenario["plan"]
        for override in best["overrides"]:  # plan.tp=4, plan.distributed_optimizer=null (left to its default)
            key, _, text = override.partition("=")
            key = key.removeprefix("plan.")
            if value(text) is None:
                plan.pop(key, None)
            else:
                plan[key] = value(text)
        with open(path, "w") as f:
            json.dump(scenario, f, indent=2)
            f.write("\n")
        rows.append((scenario, best))
    lines = ["| model | system | GPUs | layout `sweep --auto` ranks first | step | tokens/s per GPU | MFU | "
             "tokens per $ | $ per M tokens | 15T tokens: days | 15T tokens: cost |",
             "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    # Per model, best tokens per dollar first; a system where no layout fits last.
    rows.sort(key=lambda r: (r[0]["model"], -(r[1]["tokens_per_usd"] if r[1] else 0)))
    for scenario, best in rows:
        head = f"| {scenario['model']} | {scenario['topology']} | {scenario['gpus']:,} |"
        if best is None:
            lines.append(head + " no layout fits | | | | | | | |")
            continue
        layout = best["label"]
        per_usd = best["tokens_per_usd"]
        lines.append(f"{head} {layout} | {best['step_time_s']:.1f} s | {best['tokens_per_s'] / scenario['gpus']:,.0f} | "
                     f"{100 * best['mfu']:.1f}% | {per_usd:,.0f} | ${1e6 / per_usd:.2f} | "
                     f"{best['time_to_train_s'] / 86400:,.0f} | ${best['cost_to_train_usd'] / 1e6:.1f}M |")
    begin, end = "<!-- equal-budget:begin -->\n", "<!-- equal-budget:end -->"
    for readme in (os.path.join(folder, "README.md"), os.path.join(folder, "..", "..", "README.md")):
        with open(readme) as f:
            text = f.read()
        text = text[: text.index(begin) + len(begin)] + "\n".join(lines) + "\n" + text[text.index(end):]
        with open(readme, "w") as f:
            f.write(text)
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: equal_budget.py SWEEPS_DIR SCENARIO_DIR")
    main(sys.argv[1], sys.argv[2])
