#include "report/html_report.hpp"

#include <string_view>

namespace sim::report {
namespace {

// JSON inside <script>: "</" would end the element early.
std::string script_safe(std::string text)
{
  for (std::size_t at = text.find("</"); at != std::string::npos; at = text.find("</", at + 3))
    text.replace(at, 2, "<\\/");
  return text;
}

constexpr std::string_view style =
    R"css(body { font-family: Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1240px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #555; margin: 2px 0; }
#summary { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
.metric { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 130px; }
.metric .label { font-size: 12px; color: #666; }
.metric .value { font-size: 20px; font-weight: bold; }
table { border-collapse: collapse; margin-top: 8px; font-size: 13px; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child, #ranking td:nth-child(2), #ranking th:nth-child(2) { text-align: left; }
.bar { display: inline-block; height: 10px; vertical-align: middle; }
.controls button { margin-right: 6px; }
.hint { color: #777; font-size: 12px; }
svg text { font-size: 11px; }
pre { background: #f7f7f7; padding: 10px; overflow: auto; font-size: 12px; max-height: 420px; }
#status { color: #999; font-size: 11px; margin-top: 24px; }
.oom { color: #b30000; font-weight: bold; }
th.sortable { cursor: pointer; text-decoration: underline dotted; }
tr.baseline td { font-weight: bold; }
tr.unranked td { color: #999; }
.sides { display: grid; grid-template-columns: 1fr; gap: 4px; }
)css";

// What every page's script starts with: element and number helpers, and the pipeline timeline.
constexpr std::string_view library = R"js(const NS = "http://www.w3.org/2000/svg";
const colors = { compute: "#6baed6", tp_exposed: "#fd8d3c", pp_exposed: "#9e9ac8", dp_exposed: "#e7969c",
  ep_exposed: "#8c6d31", cp_exposed: "#d6616b", bubble: "#d9d9d9", optimizer: "#74c476", host: "#bcbddc",
  offload_exposed: "#969696" };
const labels = { compute: "compute", tp_exposed: "exposed TP communication", pp_exposed: "exposed PP communication",
  dp_exposed: "exposed DP communication", ep_exposed: "exposed EP all-to-all", cp_exposed: "exposed CP communication",
  bubble: "pipeline bubble", optimizer: "optimizer", host: "waiting for the host",
  offload_exposed: "exposed offload (host)" };

function el(tag, attrs, parent) {
  const e = tag === "svg" || ["rect", "text", "line", "g", "polyline", "title", "path", "circle"].includes(tag)
    ? document.createElementNS(NS, tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") e.textContent = v; else e.setAttribute(k, v);
  }
  if (parent) parent.appendChild(e);
  return e;
}
function time(s) {
  if (s === null || s === undefined) return "-";
  if (s === 0) return "0 s";
  if (s >= 86400) return (s / 86400).toFixed(1) + " d";
  if (s >= 1) return s.toFixed(3) + " s";
  if (s >= 1e-3) return (s * 1e3).toFixed(3) + " ms";
  return (s * 1e6).toFixed(1) + " us";
}
function bytes(b) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return b.toFixed(2) + " " + units[i];
}
function percent(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%"; }
function count(x) { return Math.round(x).toLocaleString("en-US"); }
function row(tbody, cells, attrs) {
  const tr = el("tr", attrs, tbody);
  for (const c of cells) {
    const td = el("td", {}, tr);
    if (c instanceof Node) td.appendChild(c); else td.textContent = c;
  }
  return tr;
}
function bar(share, color, width) {
  return el("span", { class: "bar", style: "width:" + Math.max(1, share * (width || 300)) + "px;background:" + color });
}

// A pipeline timeline in `svg`: one row per stage, a box per forward and backward pass ([stage, chunk, micro-batch,
// kind, start, end, recomputation]), over [0, span]; wheel zooms at the pointer, drag pans, double-click resets.
// Returns {setView(from, to), onChange(f)} so that two timelines can follow each other.
function pipelineTimeline(svg, passes, stages, span, chunked) {
  const left = 80, rowHeight = 30, top = 10, width = 1100;
  let view = [0, span];
  const listeners = [];
  svg.setAttribute("height", top + stages * rowHeight + 44);
  for (let s = 0; s < stages; s++) {
    const g = el("g", { class: "stage-row", "data-stage": s }, svg);
    el("text", { x: 6, y: top + s * rowHeight + rowHeight / 2 + 4, text: "stage " + s }, g);
    el("rect", { x: left, y: top + s * rowHeight + 2, width: width, height: rowHeight - 4, fill: "#f4f4f4" }, g);
  }
  const passLayer = el("g", {}, svg);
  const axis = el("g", {}, svg);
  const kinds = ["forward", "backward", "weight gradients"];
  const fills = ["#6baed6", "#74c476", "#a1d99b"];
  const boxes = passes.map(p => {
    const r = el("rect", { class: "pass", height: rowHeight - 4, y: top + p[0] * rowHeight + 2, fill: fills[p[3]],
      stroke: "white", "stroke-width": 0.5 }, passLayer);
    el("title", { text: "stage " + p[0] + " " + kinds[p[3]] + " micro-batch " + p[2] +
      (chunked ? " chunk " + p[1] : "") + ": " + time(p[4]) + " to " + time(p[5]) +
      (p[6] > 0 ? " (recomputation " + time(p[6]) + ")" : "") }, r);
    const strip = p[6] > 0 ? el("rect", { height: 4, y: top + p[0] * rowHeight + 2, fill: "#e6550d" }, passLayer) : null;
    return [r, p, strip];
  });
  function place(r, from, to, scale) {
    const x0 = Math.max(from, view[0]), x1 = Math.min(to, view[1]);
    if (x1 <= x0) { r.setAttribute("display", "none"); return; }
    r.removeAttribute("display");
    r.setAttribute("x", left + (x0 - view[0]) * scale);
    r.setAttribute("width", Math.max(0.5, (x1 - x0) * scale));
  }
  function draw() {
    const scale = width / (view[1] - view[0]);
    for (const [r, p, strip] of boxes) {
      place(r, p[4], p[5], scale);
      if (strip) place(strip, p[4], p[4] + p[6], scale);
    }
    axis.textContent = "";
    const y = top + stages * rowHeight + 6;
    el("line", { x1: left, y1: y, x2: left + width, y2: y, stroke: "#333" }, axis);
    for (let i = 0; i <= 10; i++) {
      const x = left + width * i / 10;
      el("line", { x1: x, y1: y, x2: x, y2: y + 4, stroke: "#333" }, axis);
      el("text", { x: x, y: y + 17, "text-anchor": "middle", fill: "#444",
        text: time(view[0] + (view[1] - view[0]) * i / 10) }, axis);
    }
  }
  function setView(from, to, quiet) {
    view = [Math.max(0, from), Math.min(span, to)];
    draw();
    if (!quiet) listeners.forEach(f => f(view[0], view[1]));
  }
  function zoom(factor, at) {
    const t = view[0] + (view[1] - view[0]) * at;
    const w = Math.min(span, Math.max(span * 1e-6, (view[1] - view[0]) * factor));
    const a = Math.max(0, Math.min(span - w, t - w * at));
    setView(a, a + w);
  }
  svg.addEventListener("dblclick", () => setView(0, span));
  svg.addEventListener("wheel", e => {
    e.preventDefault();
    zoom(e.deltaY < 0 ? 0.8 : 1.25, Math.min(1, Math.max(0, (e.offsetX - left) / width)));
  });
  let dragging = null;
  svg.addEventListener("mousedown", e => { dragging = [e.clientX, view.slice()]; });
  window.addEventListener("mouseup", () => { dragging = null; });
  window.addEventListener("mousemove", e => {
    if (!dragging) return;
    const w = dragging[1][1] - dragging[1][0];
    const a = Math.max(0, Math.min(span - w, dragging[1][0] - (e.clientX - dragging[0]) / width * w));
    setView(a, a + w);
  });
  const legend = el("g", {}, svg);
  [["forward", fills[0]], ["backward", fills[1]], ["recomputation (in backward)", "#e6550d"]].forEach(([name, c], i) => {
    el("rect", { x: left + 180 * i, y: top + stages * rowHeight + 26, width: 10, height: 10, fill: c }, legend);
    el("text", { x: left + 180 * i + 14, y: top + stages * rowHeight + 35, text: name }, legend);
  });
  draw();
  return { setView: setView, zoom: zoom, onChange: f => listeners.push(f), span: span };
}
// Zoom buttons for a set of timelines that follow each other; a link can open the page zoomed: #view=FROM,TO.
function zoomControls(timelines) {
  document.getElementById("zoom-in").onclick = () => timelines[0].zoom(0.5, 0.5);
  document.getElementById("zoom-out").onclick = () => timelines[0].zoom(2, 0.5);
  document.getElementById("zoom-reset").onclick = () => timelines[0].setView(0, timelines[0].span);
  for (const t of timelines)
    t.onChange((a, b) => timelines.filter(o => o !== t).forEach(o => o.setView(a, b, true)));
  const asked = /view=([0-9.e+-]+),([0-9.e+-]+)/.exec(location.hash);
  if (asked && Number(asked[2]) > Number(asked[1])) timelines[0].setView(Number(asked[1]), Number(asked[2]));
}
function finish() { document.getElementById("status").textContent = "ok"; }
)js";

constexpr std::string_view run_body = R"html(<h1 id="title"></h1>
<p class="sub" id="subtitle"></p>
<p class="sub" id="plan"></p>
<div id="summary"></div>
<h2>Pipeline timeline</h2>
<div class="controls"><button id="zoom-in">zoom in</button><button id="zoom-out">zoom out</button><button
id="zoom-reset">whole step</button> <span class="hint">wheel to zoom at the pointer, drag to pan, double-click to
reset</span></div>
<svg id="timeline" width="1200"></svg>
<h2>Pipeline bubble per stage</h2>
<p class="sub" id="bubble-note"></p>
<table id="bubbles"><thead><tr><th>stage</th><th>measured</th><th>formula</th><th></th></tr></thead><tbody></tbody></table>
<h2>Where the step goes</h2>
<div id="breakdown-bar"></div>
<table id="breakdown"><thead><tr><th>part</th><th>time</th><th>share</th></tr></thead><tbody></tbody></table>
<h2>Link utilisation over the step</h2>
<svg id="links" width="1200" height="260"></svg>
<table id="link-table"><thead><tr><th>class</th><th>links</th><th>bytes</th><th>mean</th><th>peak</th><th>busiest</th></tr></thead><tbody></tbody></table>
<h2>Memory per GPU, by stage</h2>
<table id="memory"><thead><tr><th>stage</th><th>weights</th><th>gradients</th><th>optimizer</th><th>activations</th><th>buffers</th><th>working</th><th>peak</th><th>of HBM</th><th></th></tr></thead><tbody></tbody></table>
<h2>Scenario</h2>
<p class="sub" id="scenario-file"></p>
<pre id="scenario"></pre>
<div id="status">loading</div>
)html";

constexpr std::string_view run_script = R"js(const data = JSON.parse(document.getElementById("data").textContent);
const report = data.report;
// Heading and the numbers that matter.
const plan = report.plan;
document.title = "simtrain: " + report.scenario.name;
document.getElementById("title").textContent = report.scenario.name + ": " + report.model.name;
document.getElementById("subtitle").textContent = report.cluster.gpus + " x " + report.cluster.gpu + " (" +
  report.cluster.name + ", " + report.cluster.nodes + " node" + (report.cluster.nodes > 1 ? "s" : "") + ")";
document.getElementById("plan").textContent = "TP " + plan.tp + " x PP " + plan.pp + " x DP " + plan.dp +
  (plan.cp > 1 ? " x CP " + plan.cp : "") + (plan.ep > 1 ? " (EP " + plan.ep + ")" : "") + ", micro-batch " +
  plan.micro_batch + ", global batch " + plan.global_batch + " (" + plan.microbatches + " micro-batches), sequence " +
  plan.seq_length + ", " + plan.schedule + (plan.virtual_stages > 1 ? " (v = " + plan.virtual_stages + ")" : "") +
  ", recompute " + plan.recompute + ", " + plan.precision;
const summary = document.getElementById("summary");
const peak = Math.max(...report.memory.per_stage.map(s => s.peak_bytes));
const metrics = [
  ["step_time_s", "step time", report.step_time_s, time],
  ["tokens_per_s", "tokens/s", report.tokens_per_s, count],
  ["mfu", "MFU", report.mfu, percent],
  ["hfu", "HFU", report.hfu, percent],
  ["tflops_per_gpu", "TFLOP/s per GPU", report.tflops_per_gpu, x => x.toFixed(1)],
  ["bubble.mean", "bubble (mean)", report.bubble.mean, percent],
  ["memory.peak_bytes", "peak memory per GPU", peak, bytes],
  ["cost.usd_per_million_tokens", "$ per million tokens", report.cost.usd_per_million_tokens,
    x => x === null ? "-" : "$" + x.toFixed(3)],
];
for (const [key, label, value, format] of metrics) {
  const m = el("div", { class: "metric", "data-key": key, "data-value": String(value) }, summary);
  el("div", { class: "label", text: label }, m);
  el("div", { class: "value" + (key === "memory.peak_bytes" && report.memory.oom ? " oom" : ""),
    text: format(value) + (key === "memory.peak_bytes" && report.memory.oom ? " (OOM)" : "") }, m);
}

// The pipeline timeline: one row per stage, a box per forward and backward pass; zoom and pan over time.
const span = report.pipeline_time_s > 0 ? report.pipeline_time_s : report.step_time_s;
zoomControls([pipelineTimeline(document.getElementById("timeline"), data.passes, plan.pp, span,
  plan.virtual_stages > 1)]);

// Bubbles against the formula.
document.getElementById("bubble-note").textContent = report.bubble.per_stage.length === 1
  ? "One stage, no pipeline bubble: the idle share of its forward-backward phase waits on communication. Measured: " +
    percent(report.bubble.mean) + "."
  : "Idle share of each stage's pipeline phase; the formula, " + report.bubble.formula + ", gives " +
    percent(report.bubble.theory) + ". Mean measured: " + percent(report.bubble.mean) + ".";
const bubbles = document.querySelector("#bubbles tbody");
report.bubble.per_stage.forEach((b, s) => {
  const tr = row(bubbles, [String(s), percent(b), percent(report.bubble.theory), bar(b, "#9ecae1")],
    { "data-stage": s, "data-value": String(b) });
});

// Where the step went (mean over GPUs).
const breakdown = document.querySelector("#breakdown tbody");
const barBox = document.getElementById("breakdown-bar");
for (const [k, v] of Object.entries(report.breakdown_s)) {
  if (v <= 0) continue;
  const share = v / report.step_time_s;
  barBox.appendChild(bar(share, colors[k] || "#999", 1100)).title = labels[k] || k;
  row(breakdown, [labels[k] || k, time(v), percent(share)], { "data-key": "breakdown_s." + k, "data-value": String(v) });
}

// Link utilisation per class over time.
const links = document.getElementById("links");
const lw = 1100, lh = 200, lx = 60, ly = 10;
const lineColors = ["#3182bd", "#e6550d", "#31a354", "#756bb1", "#636363", "#d6616b"];
el("line", { x1: lx, y1: ly + lh, x2: lx + lw, y2: ly + lh, stroke: "#333" }, links);
el("line", { x1: lx, y1: ly, x2: lx, y2: ly + lh, stroke: "#333" }, links);
for (let i = 0; i <= 4; i++)
  el("text", { x: lx - 6, y: ly + lh - lh * i / 4 + 4, "text-anchor": "end", text: (25 * i) + "%" }, links);
for (let i = 0; i <= 10; i++)
  el("text", { x: lx + lw * i / 10, y: ly + lh + 16, "text-anchor": "middle", text: time(report.step_time_s * i / 10) },
    links);
const linkTable = document.querySelector("#link-table tbody");
Object.entries(report.links).forEach(([cls, c], i) => {
  const color = lineColors[i % lineColors.length];
  const series = c.utilization_over_time || [];
  if (series.length > 0) {
    const points = series.map((u, b) => (lx + lw * (b + 0.5) / series.length) + "," + (ly + lh - lh * Math.min(1, u)));
    el("polyline", { points: points.join(" "), fill: "none", stroke: color, "stroke-width": 1.5, class: "link-series",
      "data-class": cls }, links);
  }
  el("text", { x: lx + lw - 4, y: ly + 14 + 14 * i, "text-anchor": "end", fill: color, text: c.label || cls }, links);
  row(linkTable, [c.label || cls, String(c.links), bytes(c.bytes), percent(c.avg_util), percent(c.peak_util),
    c.busiest.length ? c.busiest[0].link : "-"], { "data-class": cls, "data-value": String(c.avg_util) });
});

// Memory per stage.
const memory = document.querySelector("#memory tbody");
for (const st of report.memory.per_stage) {
  const capacity = st.capacity_bytes;
  const stack = el("span", {});
  for (const [k, c] of [["weights_bytes", "#6baed6"], ["grads_bytes", "#fd8d3c"], ["optimizer_bytes", "#74c476"],
    ["activations_bytes", "#9e9ac8"], ["buffers_bytes", "#bdbdbd"], ["working_bytes", "#fcbba1"]])
    stack.appendChild(bar(st[k] / capacity, c, 260));
  row(memory, ["stage " + st.stage, bytes(st.weights_bytes), bytes(st.grads_bytes), bytes(st.optimizer_bytes),
    bytes(st.activations_bytes), bytes(st.buffers_bytes), bytes(st.working_bytes), bytes(st.peak_bytes),
    percent(st.peak_bytes / capacity),
    stack], { "data-stage": st.stage, "data-value": String(st.peak_bytes), class: st.oom ? "oom" : "" });
}

// The scenario.
document.getElementById("scenario-file").textContent = report.scenario.file;
document.getElementById("scenario").textContent = JSON.stringify(data.scenario, null, 2);
finish();
)js";

constexpr std::string_view compare_body = R"html(<h1 id="title"></h1>
<p class="sub" id="side-a"></p>
<p class="sub" id="side-b"></p>
<p id="explanation"></p>
<h2>Side by side</h2>
<table id="rows"><thead><tr><th>metric</th><th>A</th><th>B</th><th>B - A</th></tr></thead><tbody></tbody></table>
<h2>What the difference is made of</h2>
<table id="contributions"><thead><tr><th>part</th><th>B - A</th><th>share of the difference</th></tr></thead><tbody></tbody></table>
<h2>Pipeline timelines, on one time scale</h2>
<div class="controls"><button id="zoom-in">zoom in</button><button id="zoom-out">zoom out</button><button
id="zoom-reset">whole step</button> <span class="hint">wheel to zoom at the pointer, drag to pan, double-click to
reset</span></div>
<p class="sub">A</p>
<svg id="timeline-a" width="1200"></svg>
<p class="sub">B</p>
<svg id="timeline-b" width="1200"></svg>
<div id="status">loading</div>
)html";

constexpr std::string_view compare_script = R"js(const data = JSON.parse(document.getElementById("data").textContent);
const c = data.comparison;
document.title = "simtrain: " + c.a_name + " vs " + c.b_name;
document.getElementById("title").textContent = "A: " + c.a_name + "   B: " + c.b_name;
document.getElementById("side-a").textContent = "A: " + c.setup.a;
document.getElementById("side-b").textContent = "B: " + c.setup.b;
document.getElementById("explanation").textContent = c.explanation;
const rows = document.querySelector("#rows tbody");
for (const r of c.rows) {
  const label = r.label.trim();
  const money = x => x === null ? "-" : "$" + x.toPrecision(4);
  const fmt = /bytes|memory/.test(label) ? bytes : /utilisation|MFU|bubble \(mean\)/.test(label) ? percent
    : /^tokens/.test(label) ? (x => x === null ? "-" : count(x)) : /\$|of which/.test(label) ? money
    : /TFLOP/.test(label) ? (x => x === null ? "-" : (x / 1e12).toFixed(1)) : time;
  row(rows, [r.label, fmt(r.a), fmt(r.b), r.delta === null ? "-" : (r.delta > 0 ? "+" : r.delta < 0 ? "-" : "") +
    fmt(Math.abs(r.delta))], { "data-label": label, "data-a": String(r.a), "data-b": String(r.b) });
}
const parts = document.querySelector("#contributions tbody");
for (const p of c.contributions)
  row(parts, [p.part, (p.delta_s >= 0 ? "+" : "-") + time(Math.abs(p.delta_s)), percent(p.share)]);
const span = Math.max(...[c.a, c.b].map(r => r.pipeline_time_s > 0 ? r.pipeline_time_s : r.step_time_s));
const timelines = [];
[["a", data.passes_a, c.a], ["b", data.passes_b, c.b]].forEach(([side, passes, report]) => {
  const svg = document.getElementById("timeline-" + side);
  if (!passes) {
    el("text", { x: 10, y: 20, text: "no timeline: compared from a saved report" }, svg);
    svg.setAttribute("height", 30);
    return;
  }
  timelines.push(pipelineTimeline(svg, passes, report.plan.pp, span, report.plan.virtual_stages > 1));
});
if (timelines.length > 0) zoomControls(timelines);
finish();
)js";

constexpr std::string_view sweep_body = R"html(<h1 id="title"></h1>
<p class="sub" id="subtitle"></p>
<h2>Ranking</h2>
<p class="hint">Click a column to sort by it (again to reverse). The scenario's own layout is in bold; layouts that were not simulated or did not fit are grey.</p>
<table id="ranking"><thead></thead><tbody></tbody></table>
<h2 id="chart-title"></h2>
<svg id="chart" width="1200"></svg>
<h2>Step time against peak memory per GPU</h2>
<svg id="scatter" width="1200" height="340"></svg>
<div id="status">loading</div>
)html";

constexpr std::string_view sweep_script = R"js(const data = JSON.parse(document.getElementById("data").textContent);
const sweep = data.sweep;
const metric = sweep.rank_by;
document.title = "simtrain sweep: " + sweep.scenario;
document.getElementById("title").textContent = "Sweep of " + sweep.scenario;
document.getElementById("subtitle").textContent = sweep.layouts_total + " layouts, ranked by " + metric + "; " +
  sweep.rows.filter(r => r.outcome === "ranked").length + " simulated and ranked here";
const columns = [["rank", "rank", x => x ? String(x) : "-"], ["label", "layout", x => x],
  ["step_time_s", "step time", x => x ? time(x) : "-"], ["tokens_per_s", "tokens/s", count], ["mfu", "MFU", percent],
  ["bubble", "bubble", percent], ["bubble_theory", "formula", percent], ["peak_memory_bytes", "peak memory", bytes],
  ["tokens_per_usd", "tokens per $", x => x ? count(x) : "-"], ["outcome", "outcome", x => x]];
const head = el("tr", {}, document.querySelector("#ranking thead"));
let order = ["rank", 1];
const sortAsked = /sort=([a-z_]+)(-?)/.exec(location.hash);
if (sortAsked && columns.some(c => c[0] === sortAsked[1])) order = [sortAsked[1], sortAsked[2] === "-" ? -1 : 1];
// Layouts that were not ranked sort last whatever the column.
function value(r, key) {
  const v = r[key];
  return r.outcome !== "ranked" || v === null || v === undefined || v === "" ? Infinity : v;
}
function render() {
  const tbody = document.querySelector("#ranking tbody");
  tbody.textContent = "";
  const rows = sweep.rows.slice().sort((a, b) => {
    const x = value(a, order[0]), y = value(b, order[0]);
    if (x === Infinity || y === Infinity) return x === y ? a.index - b.index : x === Infinity ? 1 : -1;
    return (x < y ? -1 : x > y ? 1 : a.index - b.index) * order[1];
  });
  for (const r of rows)
    row(tbody, columns.map(([k, , f]) => f(r[k])), { "data-index": r.index, "data-rank": r.rank === undefined ?
      "" : String(r.rank), "data-value": String(r[metric]), class: (r.baseline ? "baseline " : "") +
      (r.outcome === "ranked" ? "" : "unranked"), title: r.reason || "" });
}
for (const [k, label] of columns) {
  const th = el("th", { class: "sortable", "data-key": k, text: label }, head);
  th.onclick = () => { order = [k, order[0] === k ? -order[1] : (k === "tokens_per_s" || k === "mfu" ||
    k === "tokens_per_usd" ? -1 : 1)]; render(); };
}
render();

// The ranked layouts by the ranking metric (the first 30).
const ranked = sweep.rows.filter(r => r.outcome === "ranked").sort((a, b) => a.rank - b.rank).slice(0, 30);
document.getElementById("chart-title").textContent = (metric === "tokens_per_usd" ? "Tokens per dollar" :
  "Tokens per second") + " of the ranked layouts";
const chart = document.getElementById("chart");
const best = Math.max(...ranked.map(r => r[metric]), 1e-12);
chart.setAttribute("height", 20 * ranked.length + 20);
ranked.forEach((r, i) => {
  const w = 700 * r[metric] / best;
  el("text", { x: 380, y: 20 * i + 14, "text-anchor": "end", text: r.label.length > 60 ? r.label.slice(0, 57) +
    "..." : r.label }, chart);
  el("rect", { class: "ranked-bar", x: 390, y: 20 * i + 3, width: Math.max(1, w), height: 14,
    fill: r.baseline ? "#fd8d3c" : "#6baed6", "data-index": r.index }, chart);
  el("text", { x: 395 + w, y: 20 * i + 14, text: metric === "tokens_per_usd" ? count(r[metric]) :
    count(r[metric]) + " tokens/s" }, chart);
});

// Step time against memory: the layouts that ran, the ones that did not fit at their memory.
const scatter = document.getElementById("scatter");
const points = sweep.rows.filter(r => r.step_time_s > 0 || r.peak_memory_bytes > 0);
const sx = 80, sy = 10, sw = 1080, sh = 280;
const maxT = Math.max(...points.map(r => r.step_time_s || 0), 1e-12);
const maxM = Math.max(...points.map(r => r.peak_memory_bytes || 0), 1);
el("line", { x1: sx, y1: sy + sh, x2: sx + sw, y2: sy + sh, stroke: "#333" }, scatter);
el("line", { x1: sx, y1: sy, x2: sx, y2: sy + sh, stroke: "#333" }, scatter);
for (let i = 0; i <= 4; i++) {
  el("text", { x: sx - 6, y: sy + sh - sh * i / 4 + 4, "text-anchor": "end", text: time(maxT * i / 4) }, scatter);
  el("text", { x: sx + sw * i / 4, y: sy + sh + 16, "text-anchor": "middle", text: bytes(maxM * i / 4) }, scatter);
}
for (const r of points) {
  const dot = el("circle", { cx: sx + sw * (r.peak_memory_bytes || 0) / maxM, cy: sy + sh - sh * (r.step_time_s || 0) /
    maxT, r: 4, fill: r.outcome === "ranked" ? (r.baseline ? "#fd8d3c" : "#3182bd") : "#bbb" }, scatter);
  el("title", { text: r.label + ": " + time(r.step_time_s) + ", " + bytes(r.peak_memory_bytes || 0) }, dot);
}
finish();
)js";

// A page: its body, its data (one JSON object, as <script type="application/json">) and its script, run once the
// page is parsed; an error it throws shows in #status, which reads "ok" when it finished.
std::string page(std::string_view title, std::string_view body, const core::Json& data, std::string_view script)
{
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>";
  html += title;
  html += "</title>\n<style>\n";
  html += style;
  html += "</style>\n</head>\n<body>\n";
  html += body;
  html += R"(<script id="data" type="application/json">)";
  html += script_safe(data.dump(-1, ' ', false, core::Json::error_handler_t::replace));
  html += "</script>\n<script>\n\"use strict\";\nwindow.onerror = function (message) {\n"
          "  document.getElementById(\"status\").textContent = \"error: \" + message;\n};\n(function () {\n";
  html += library;
  html += script;
  html += "})();\n</script>\n</body>\n</html>\n";
  return html;
}

} // namespace

core::Json passes_json(const std::vector<PassBox>& boxes)
{
  core::Json passes = core::Json::array();
  for (const auto& b : boxes)
    passes.push_back({b.stage, b.chunk, b.microbatch,
                      b.weight     ? 2
                      : b.backward ? 1
                                   : 0,
                      b.start_s, b.end_s, b.recompute_s});
  return passes;
}

std::string run_html(const core::Json& report, const std::vector<PassBox>& boxes, const core::Json& scenario)
{
  return page("simtrain report", run_body,
              core::Json{{"report", report}, {"passes", passes_json(boxes)}, {"scenario", scenario}}, run_script);
}

std::string compare_html(const core::Json& comparison, const core::Json& passes_a, const core::Json& passes_b)
{
  return page("simtrain comparison", compare_body,
              core::Json{{"comparison", comparison}, {"passes_a", passes_a}, {"passes_b", passes_b}}, compare_script);
}

std::string sweep_html(const core::Json& sweep)
{
  return page("simtrain sweep", sweep_body, core::Json{{"sweep", sweep}}, sweep_script);
}

} // namespace sim::report
