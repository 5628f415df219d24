#!/usr/bin/env python3
"""A shipped scenario's screening against its simulation: its layout swept alone (`sweep --vary description=...
--all`), the sweep's lower bound must not exceed the simulated step and its estimate must not fall below the bound.
Prints the three numbers.   screen_check.py SIMTRAIN SCENARIO"""
import json
import subprocess
import sys

simtrain, scenario = sys.argv[1], sys.argv[2]
out = subprocess.run([simtrain, "--log-level", "off", "sweep", scenario, "--vary", "description=screened", "--all",
                      "--jobs", "1", "--format", "json", "-q"], capture_output=True, text=True, check=False)
if out.returncode != 0:
    sys.exit(f"{scenario}: sweep failed ({out.returncode}): {out.stderr.strip()[:500]}")
row = json.loads(out.stdout)["rows"][0]
if row["outcome"] != "ranked":
    sys.exit(f"{scenario}: not simulated: {row['outcome']}: {row['reason']}")
step, bound, estimate = row["step_time_s"], row["bound_s"], row["estimate_s"]
print(f"{scenario}: step {step:.6f} s, bound {bound:.6f} s ({bound / step:.1%}), estimate {estimate:.6f} s "
      f"({estimate / step - 1:+.1%})")
if not 0 < bound <= step * (1 + 1e-9):
    sys.exit(f"{scenario}: the bound {bound} s is above the simulated step {step} s")
if estimate < bound:
    sys.exit(f"{scenario}: the estimate {estimate} s is below the bound {bound} s")
