#!/usr/bin/env bash
# tools/plot draws each chart from a real sweep and report, and refuses a file that is not one.
#   plot_test.sh SIMTRAIN REPO_ROOT
set -euo pipefail
simtrain=$1
root=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$simtrain" --log-level off sweep "$root/scenarios/teaching/1f1b.json" --quiet --all --jobs 2 \
  --vary plan.schedule:plan.virtual_stages=1f1b:1,interleaved:2 --vary plan.global_batch=4,8 --out "$out/sweep" >/dev/null
"$simtrain" --log-level off run "$root/scenarios/teaching/1f1b.json" --out "$out/run" >/dev/null
for m in 4 8; do
  "$simtrain" --log-level off sweep "$root/scenarios/teaching/1f1b.json" --quiet --jobs 2 --tokens 1e9 \
    --vary plan.global_batch=$m --out "$out/m$m" >/dev/null
done
"$root/tools/plot" systems "$out/m4/sweep.csv" "$out/m8/sweep.csv" -o "$out/systems.png"
"$root/tools/plot" bubble "$out/sweep/sweep.csv" -o "$out/bubble.png"
"$root/tools/plot" layouts "$out/sweep/sweep.csv" -o "$out/layouts.png"
"$root/tools/plot" links "$out/run/report.json" -o "$out/links.png"
"$root/tools/plot" bubble "$out/sweep/sweep.csv" # beside the input
for f in bubble.png layouts.png links.png systems.png sweep/sweep-bubble.png; do
  [ "$(head -c 4 "$out/$f" | tail -c 3)" = PNG ] || { echo "$f is not a PNG"; exit 1; }
done
if "$root/tools/plot" bubble "$root/scenarios/default.json" 2>"$out/err"; then
  echo "a scenario file was plotted as a sweep"
  exit 1
fi
grep -q "not a sweep.csv" "$out/err" || { cat "$out/err"; exit 1; }
if "$root/tools/plot" systems "$out/sweep/sweep.csv" 2>"$out/err"; then
  echo "a sweep without a training budget was plotted as a system"
  exit 1
fi
grep -q "no cost or training budget" "$out/err" || { cat "$out/err"; exit 1; }
echo "plot: all charts drawn"
