"""Table of the fabric study (see tools/fabric-study) from its reports, written into scenarios/whatif/README.md
between its markers."""
import json
import os
import re
import sys


def main(out, readme):
    rows = []
    for name in os.listdir(out):
        model, gpus, over, nics = name[:-len(".json")].split("-")
        with open(os.path.join(out, name)) as f:
            r = json.load(f)
        rows.append(((model != "dense", int(gpus), int(over), -int(nics)), r, int(over), int(nics)))
    rows.sort(key=lambda row: row[0])
    lines = ["| model | GPUs | fabric | NICs per node | step | tokens/s per GPU | MFU | exposed DP + PP + EP "
             "| network $ per GPU-hour | $ per GPU-hour | $ per M tokens | simulated GPUs | simtrain's time |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (_, r, over, nics) in rows:
        gpus = r["cluster"]["gpus"]
        b = r["breakdown_s"]
        exposed = b["dp_exposed"] + b["pp_exposed"] + b.get("ep_exposed", 0.0)
        cost = r["cost"]
        network = cost["network_usd_per_hour"] / gpus
        lines.append(
            "| {} | {:,} | {} | {} | {:.2f} s | {:,.0f} | {:.1%} | {:.2f} s | ${:.3f} | ${:.3f} | ${:.3f} | {:,} | {:.0f} s |"
            .format(r["model"]["name"], gpus, "full bisection" if over == 1 else f"{over}:1", nics,
                    r["step_time_s"], r["tokens_per_s"] / gpus, r["mfu"], exposed, network,
                    cost["usd_per_gpu_hour"], cost["usd_per_million_tokens"], r["simulated_gpus"],
                    r["sim_wall_s"]))
    table = "\n".join(lines)
    with open(readme) as f:
        text = f.read()
    text = re.sub(r"(<!-- fabric:begin -->\n).*?(<!-- fabric:end -->)",
                  lambda m: m.group(1) + table + "\n" + m.group(2), text, flags=re.S)
    with open(readme, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
