#!/usr/bin/env bash
# The HTML pages in a real browser (Debian's chromium, headless). report.html loads without a script error, draws
# every stage in the timeline, the bubble and the memory tables, every pass of the step, and its numbers are
# report.json's; opened zoomed (#view=FROM,TO) it draws only the passes in that window. compare.html draws both
# sides' timelines and compare.json's rows; sweep.html lists every layout in rank order (or sorted, #sort=KEY) and
# charts the ranked ones. Exits 77 (skipped) where chromium is missing; tools/test installs it, so CI runs it.
#   html_test.sh SIMTRAIN REPO_ROOT
set -euo pipefail
simtrain=$(realpath "$1")
root=$(realpath "$2")
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "chromium is not installed: skipped"; exit 77; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

dom() { # the page after its scripts ran, and the browser's console on stderr
  "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --user-data-dir="$out/profile" \
    --enable-logging=stderr --v=0 --dump-dom "$1" 2>"$out/console.txt"
}

check() {
  local scenario=$1 passes=$2
  "$simtrain" run "$root/$scenario" --quiet --out "$out/run" >/dev/null
  dom "file://$out/run/report.html" >"$out/dom.html"
  if grep -E "CONSOLE.*(Uncaught|Error)" "$out/console.txt"; then
    echo "FAIL: $scenario: script errors in report.html"
    exit 1
  fi
  python3 - "$out/dom.html" "$out/run/report.json" "$scenario" "$passes" <<'EOF'
import json, sys
from html.parser import HTMLParser

dom_file, report_file, scenario, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
report = json.load(open(report_file))

class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.elements = []
        self.status = None
        self._in_status = False
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.elements.append((tag, a))
        self._in_status = a.get("id") == "status"
    def handle_data(self, data):
        if self._in_status:
            self.status = (self.status or "") + data

page = Page()
page.feed(open(dom_file).read())
def fail(message):
    print(f"FAIL: {scenario}: {message}")
    sys.exit(1)
if (page.status or "").strip() != "ok":
    fail(f"the page's scripts did not finish: {page.status!r}")

pp = report["plan"]["pp"]
rows = [a for t, a in page.elements if t == "g" and "stage-row" in a.get("class", "")]
if sorted(int(a["data-stage"]) for a in rows) != list(range(pp)):
    fail(f"timeline rows {len(rows)} for {pp} stages")
drawn = [a for t, a in page.elements if t == "rect" and a.get("class") == "pass" and a.get("display") != "none"]
if len(drawn) != passes:
    fail(f"{len(drawn)} passes drawn, expected {passes}")
def value_of(path):
    v = report
    for k in path.split("."):
        v = v[k]
    return v
metrics = {a["data-key"]: a["data-value"] for t, a in page.elements if "data-key" in a}
for key, shown in metrics.items():
    expected = max(s["peak_bytes"] for s in report["memory"]["per_stage"]) if key == "memory.peak_bytes" else value_of(key)
    if expected is None and shown == "null":
        continue
    if float(shown) != float(expected):
        fail(f"{key} shows {shown}, report.json has {expected}")
for key in ("step_time_s", "tokens_per_s", "mfu", "bubble.mean", "breakdown_s.compute"):
    if key not in metrics:
        fail(f"{key} is not on the page")
bubbles = [a for t, a in page.elements if t == "tr" and "data-stage" in a and "data-value" in a]
per_stage = {}
for a in bubbles:
    per_stage.setdefault(int(a["data-stage"]), []).append(float(a["data-value"]))
for s in range(pp):
    shown = per_stage.get(s, [])
    if report["bubble"]["per_stage"][s] not in shown or report["memory"]["per_stage"][s]["peak_bytes"] not in shown:
        fail(f"stage {s}: bubble or memory row missing or different ({shown})")
classes = {a["data-class"] for t, a in page.elements if t == "polyline"}
tracked = {c for c, v in report["links"].items() if v["utilization_over_time"]}
if classes != tracked:
    fail(f"utilisation lines for {sorted(classes)}, report.json tracks {sorted(tracked)}")
EOF
}

# Llama-2 13B, 2 stages x 16 micro-batches, a forward and a backward pass each; 1F1B on 4 stages, interleaved in 2
# chunks: 4 x 8 x 2 x 2.
check scenarios/default.json 64
check scenarios/teaching/interleaved.json 128

# Opened on the first tenth of the step, only the passes that start in it are drawn.
step=$(python3 -c "import json; print(json.load(open('$out/run/report.json'))['pipeline_time_s'])")
dom "file://$out/run/report.html#view=0,$(python3 -c "print($step / 10)")" >"$out/zoomed.html"
grep -q 'id="status">ok' "$out/zoomed.html" || { echo "FAIL: the zoomed page did not load"; exit 1; }
shown=$(grep -o '<rect class="pass"[^>]*>' "$out/zoomed.html" | grep -vc 'display="none"' || true)
if [ "$shown" -le 0 ] || [ "$shown" -ge 128 ]; then
  echo "FAIL: zoomed to a tenth of the step, $shown of 128 passes drawn"
  exit 1
fi
# compare.html: both sides' timelines on one scale, every row equal to compare.json's.
"$simtrain" compare "$root/scenarios/teaching/1f1b.json" --set plan.schedule=1f1b --set plan.schedule=gpipe \
  --out "$out/compare" >/dev/null
dom "file://$out/compare/compare.html" >"$out/compare.html"
grep -E "CONSOLE.*(Uncaught|Error)" "$out/console.txt" && { echo "FAIL: script errors in compare.html"; exit 1; }
# sweep.html: every layout in the ranking, in rank order, the ranked ones charted; #sort=step_time_s sorts by time.
"$simtrain" sweep "$root/scenarios/teaching/1f1b.json" --quiet --all --jobs 2 \
  --vary plan.schedule:plan.virtual_stages=1f1b:1,interleaved:2 --vary plan.global_batch=4,8 --vary plan.tp=1,2 \
  --out "$out/sweep" >/dev/null
dom "file://$out/sweep/sweep.html" >"$out/sweep.html"
dom "file://$out/sweep/sweep.html#sort=step_time_s" >"$out/sorted.html"
grep -E "CONSOLE.*(Uncaught|Error)" "$out/console.txt" && { echo "FAIL: script errors in sweep.html"; exit 1; }
python3 - "$out" <<'EOF'
import json, sys
from html.parser import HTMLParser
out = sys.argv[1]

class Page(HTMLParser):
    def __init__(self, text):
        super().__init__()
        self.elements, self.status, self._status, self._svg = [], "", False, None
        self.feed(text)
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg":
            self._svg = a.get("id")
        self.elements.append((tag, a, self._svg))
        self._status = a.get("id") == "status"
    def handle_data(self, data):
        if self._status:
            self.status += data
def fail(message):
    print("FAIL: " + message)
    sys.exit(1)

page = Page(open(f"{out}/compare.html").read())
compare = json.load(open(f"{out}/compare/compare.json"))
if page.status.strip() != "ok":
    fail(f"compare.html did not finish: {page.status!r}")
for side in ("a", "b"):
    rows = [a for t, a, svg in page.elements if svg == f"timeline-{side}" and "stage-row" in a.get("class", "")]
    passes = [a for t, a, svg in page.elements if svg == f"timeline-{side}" and a.get("class") == "pass"]
    if len(rows) != compare[side]["plan"]["pp"] or len(passes) != 4 * 8 * 2:
        fail(f"compare.html side {side}: {len(rows)} stage rows, {len(passes)} passes")
shown = [a for t, a, svg in page.elements if t == "tr" and "data-label" in a]
if len(shown) != len(compare["rows"]):
    fail(f"compare.html shows {len(shown)} rows of {len(compare['rows'])}")
for a, r in zip(shown, compare["rows"]):
    for side in ("a", "b"):
        if (r[side] is None and a[f"data-{side}"] != "null") or (r[side] is not None and float(a[f"data-{side}"]) != r[side]):
            fail(f"compare.html {r['label']}: {side} shows {a[f'data-{side}']}, compare.json has {r[side]}")

sweep = json.load(open(f"{out}/sweep/sweep.json"))
for name, key in (("sweep.html", "rank"), ("sorted.html", "step_time_s")):
    page = Page(open(f"{out}/{name}").read())
    if page.status.strip() != "ok":
        fail(f"{name} did not finish: {page.status!r}")
    order = [int(a["data-index"]) for t, a, svg in page.elements if t == "tr" and "data-index" in a]
    ranked = sorted((r for r in sweep["rows"] if r["outcome"] == "ranked"), key=lambda r: (r[key], r["index"]))
    expected = [r["index"] for r in ranked] + sorted(r["index"] for r in sweep["rows"] if r["outcome"] != "ranked")
    if order != expected:
        fail(f"{name}: rows in the order {order}, expected {expected}")
    bars = [a for t, a, svg in page.elements if a.get("class") == "ranked-bar"]
    if len(bars) != min(30, len(ranked)):
        fail(f"{name}: {len(bars)} bars for {len(ranked)} ranked layouts")
EOF
echo "report.html, compare.html and sweep.html: load, draw every stage and pass, show their JSON's numbers; zoom" \
  "draws $shown of 128 passes"

