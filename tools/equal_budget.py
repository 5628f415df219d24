"""The equal-budget study (see tools/equal-budget).

  equal_budget.py sizes SIMTRAIN SCENARIO_DIR   sets each buy-*.json's GPU count to what the hourly cost of its
                                                model's dgx-h100 scenario buys of its system, from simtrain's cost model
  equal_budget.py check SIMTRAIN SCENARIO_DIR   exits 1 when a buy-*.json holds another count than that (a price
                                                changed since the study was run)
  equal_budget.py SWEEPS_DIR SCENARIO_DIR       the best layout per model and system from the sweeps, written into the
                                                scenario's plan and into SCENARIO_DIR/README.md (scenarios/whatif/)
                                                between its markers; a scenario with no sweep in SWEEPS_DIR keeps its
                                                row of the table
"""
import functools
import json
import math
import os
import re
import subprocess
import sys
import tempfile

BUDGET_SYSTEM = "dgx-h100"  # the budget is the hourly cost of this system's scenario of each model
GROUP = 64  # 8-GPU nodes are bought 64 GPUs at a time; a larger NVLink domain (GB200 NVL72) a whole domain at a time


@functools.lru_cache(maxsize=None)
def cluster_usd_per_hour(simtrain, topology, gpus):
    """What simtrain's cost model charges per hour for GPUS of TOPOLOGY, owned (capital over the amortisation years,
    the network its topology counts, power): from a run of a small data-parallel probe, whose plan does not enter
    the price."""
    probe = {"schema": "scenario/v1", "name": "price-probe", "model": "llama3-8b", "topology": topology, "gpus": gpus,
             "plan": {"tp": 8, "pp": 1, "dp": gpus // 8, "micro_batch": 1, "global_batch": gpus // 8,
                      "precision": "bf16"}}
    with tempfile.NamedTemporaryFile("w", suffix=".json") as fh:
        json.dump(probe, fh)
        fh.flush()
        report = json.loads(subprocess.run([simtrain, "run", fh.name, "--format", "json"], check=True,
                                           capture_output=True, text=True).stdout)
    return report["cost"]["cluster_usd_per_hour"]


@functools.lru_cache(maxsize=None)
def node_gpus(simtrain, topology):
    out = subprocess.run([simtrain, "inspect", topology, "--format", "json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["gpus_per_node"]


def sizes(simtrain, folder, write=True):
    """The GPU count each buy-*.json should hold: set (write) or compared; returns the scenarios whose count differs."""
    stale = []
    names = sorted(n for n in os.listdir(folder) if n.startswith("buy-") and n.endswith(".json"))
    scenarios = {n: json.load(open(os.path.join(folder, n))) for n in names}
    for name, scenario in scenarios.items():
        if scenario["topology"] == BUDGET_SYSTEM:
            continue
        reference = [s for s in scenarios.values() if s["model"] == scenario["model"] and s["topology"] == BUDGET_SYSTEM]
        if len(reference) != 1:
            sys.exit(f"{name}: no single {BUDGET_SYSTEM} scenario of {scenario['model']} to take the budget from")
        budget = cluster_usd_per_hour(simtrain, BUDGET_SYSTEM, reference[0]["gpus"])
        per_node = node_gpus(simtrain, scenario["topology"])
        group = per_node if per_node > 8 else GROUP
        per_group = cluster_usd_per_hour(simtrain, scenario["topology"], group * 16) / 16
        gpus = group * (math.floor(budget / per_group) + 1)
        while gpus > group and cluster_usd_per_hour(simtrain, scenario["topology"], gpus) > budget:
            gpus -= group  # a larger cluster can need another network tier: count down until it fits
        print(f"{name}: {gpus} GPUs of {scenario['topology']} for ${budget:,.2f} per hour"
              + ("" if gpus == scenario["gpus"] else f" (holds {scenario['gpus']})"))
        if gpus != scenario["gpus"]:
            stale.append(name)
        if write:
            resize(scenario, gpus)
            with open(os.path.join(folder, name), "w") as fh:
                json.dump(scenario, fh, indent=2)
                fh.write("\n")
    return stale


def resize(scenario, gpus):
    """GPUS for the scenario, two sequences per GPU per step, its plan reset to plain data parallelism where the count
    changed (the sweep picks the layout; the base plan need not fit in memory)."""
    if scenario["gpus"] == gpus:
        return
    plan = scenario["plan"]
    for key in ("cp", "ep", "etp", "virtual_stages"):
        plan.pop(key, None)
    plan.update({"tp": 1, "pp": 1, "dp": gpus, "schedule": "1f1b", "global_batch": 2 * gpus})
    scenario["gpus"] = gpus
    scenario["description"] = re.sub(r"on the \d+ GPUs", f"on the {gpus} GPUs", scenario["description"])


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
    header = ["| model | system | GPUs | layout `sweep --auto` ranks first | step | tokens/s per GPU | MFU | "
              "tokens per $ | $ per M tokens | 15T tokens: days | 15T tokens: cost |",
              "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    begin, end = "<!-- equal-budget:begin -->\n", "<!-- equal-budget:end -->"
    readme = os.path.join(folder, "README.md")
    with open(readme) as f:
        text = f.read()
    # (model, system, tokens per $ or 0, line): the sweeps' rows, and the table's own rows of the scenarios not swept
    # this time (tools/equal-budget --reuse over a folder holding some of the sweeps).
    table = []
    for scenario, best in rows:
        head = f"| {scenario['model']} | {scenario['topology']} | {scenario['gpus']:,} |"
        if best is None:
            table.append((scenario["model"], scenario["topology"], 0, head + " no layout fits | | | | | | | |"))
            continue
        per_usd = best["tokens_per_usd"]
        table.append((scenario["model"], scenario["topology"], per_usd,
                      f"{head} {best['label']} | {best['step_time_s']:.1f} s | "
                      f"{best['tokens_per_s'] / scenario['gpus']:,.0f} | {100 * best['mfu']:.1f}% | {per_usd:,.0f} | "
                      f"${1e6 / per_usd:.2f} | {best['time_to_train_s'] / 86400:,.0f} | "
                      f"${best['cost_to_train_usd'] / 1e6:.1f}M |"))
    swept = {(model, system) for model, system, _, _ in table}
    for line in text[text.index(begin) + len(begin): text.index(end)].splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 11 and (cells[0], cells[1]) not in swept:
            table.append((cells[0], cells[1], float(cells[7].replace(",", "") or 0), line))
    # Per model, best tokens per dollar first; a system where no layout fits last.
    table.sort(key=lambda r: (r[0], -r[2]))
    lines = header + [line for _, _, _, line in table]
    text = text[: text.index(begin) + len(begin)] + "\n".join(lines) + "\n" + text[text.index(end):]
    with open(readme, "w") as f:
        f.write(text)
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "sizes":
        sizes(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        if sizes(sys.argv[2], sys.argv[3], write=False):
            sys.exit("the equal-budget scenarios do not hold what the budget buys at today's prices: run tools/equal-budget")
    elif len(sys.argv) == 3:
        main(sys.argv[1], sys.argv[2])
    else:
        sys.exit("usage: equal_budget.py sizes|check SIMTRAIN SCENARIO_DIR | equal_budget.py SWEEPS_DIR SCENARIO_DIR")
