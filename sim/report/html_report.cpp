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

constexpr std::string_view page_head = R"html(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>simtrain report</title>
<style>
body { font-family: Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1240px; color: #222; padding: 0 16px; }
h1 { font-size: 22px; margin-bottom: 4px; }
h2 { font-size: 17px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #555; margin: 2px 0; }
#summary { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
.metric { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 130px; }
.metric .label { font-size: 12px; color: #666; }
.metric .value { font-size: 20px; font-weight: bold; }
table { border-collapse: collapse; margin-top: 8px; font-size: 13px; }
th, td { padding: 3px 10px; text-align: right; border-bottom: 1px solid #eee; }
th:first-child, td:first-child { text-align: left; }
.bar { display: inline-block; height: 10px; vertical-align: middle; }
.controls button { margin-right: 6px; }
.hint { color: #777; font-size: 12px; }
svg text { font-size: 11px; }
pre { background: #f7f7f7; padding: 10px; overflow: auto; font-size: 12px; max-height: 420px; }
#status { color: #999; font-size: 11px; margin-top: 24px; }
.oom { color: #b30000; font-weight: bold; }
</style>
</head>
<body>
<h1 id="title"></h1>
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
<table id="memory"><thead><tr><th>stage</th><th>weights</th><th>gradients</th><th>optimizer</th><th>activations</th><th>buffers</th><th>peak</th><th>of HBM</th><th></th></tr></thead><tbody></tbody></table>
<h2>Scenario</h2>
<p class="sub" id="scenario-file"></p>
<pre id="scenario"></pre>
<div id="status">loading</div>
<script id="data" type="application/json">)html";

constexpr std::string_view page_script = R"html(</script>
<script>
"use strict";
window.onerror = function (message) { document.getElementById("status").textContent = "error: " + message; };
(function () {
const data = JSON.parse(document.getElementById("data").textContent);
const report = data.report;
const NS = "http://www.w3.org/2000/svg";
const colors = { compute: "#6baed6", tp_exposed: "#fd8d3c", pp_exposed: "#9e9ac8", dp_exposed: "#e7969c",
  ep_exposed: "#8c6d31", cp_exposed: "#d6616b", bubble: "#d9d9d9", optimizer: "#74c476" };
const labels = { compute: "compute", tp_exposed: "exposed TP communication", pp_exposed: "exposed PP communication",
  dp_exposed: "exposed DP communication", ep_exposed: "exposed EP all-to-all", cp_exposed: "exposed CP communication",
  bubble: "pipeline bubble", optimizer: "optimizer" };

function el(tag, attrs, parent) {
  const e = tag === "svg" || ["rect", "text", "line", "g", "polyline", "title", "path"].includes(tag)
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
const timeline = document.getElementById("timeline");
const left = 80, rowHeight = 30, top = 10, width = 1100;
const stages = plan.pp;
const span = report.pipeline_time_s > 0 ? report.pipeline_time_s : report.step_time_s;
let view = [0, span];
timeline.setAttribute("height", top + stages * rowHeight + 44);
for (let s = 0; s < stages; s++) {
  const g = el("g", { class: "stage-row", "data-stage": s }, timeline);
  el("text", { x: 6, y: top + s * rowHeight + rowHeight / 2 + 4, text: "stage " + s }, g);
  el("rect", { x: left, y: top + s * rowHeight + 2, width: width, height: rowHeight - 4, fill: "#f4f4f4" }, g);
}
const passLayer = el("g", {}, timeline);
const axis = el("g", {}, timeline);
const kinds = ["forward", "backward", "weight gradients"];
const fills = ["#6baed6", "#74c476", "#a1d99b"];
const boxes = data.passes.map(p => {
  const r = el("rect", { class: "pass", height: rowHeight - 4, y: top + p[0] * rowHeight + 2, fill: fills[p[3]],
    stroke: "white", "stroke-width": 0.5 }, passLayer);
  el("title", { text: "stage " + p[0] + " " + kinds[p[3]] + " micro-batch " + p[2] +
    (plan.virtual_stages > 1 ? " chunk " + p[1] : "") + ": " + time(p[4]) + " to " + time(p[5]) +
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
function zoom(factor, at) {
  const t = view[0] + (view[1] - view[0]) * at;
  const w = Math.min(span, Math.max(span * 1e-6, (view[1] - view[0]) * factor));
  let a = t - w * at;
  a = Math.max(0, Math.min(span - w, a));
  view = [a, a + w];
  draw();
}
document.getElementById("zoom-in").onclick = () => zoom(0.5, 0.5);
document.getElementById("zoom-out").onclick = () => zoom(2, 0.5);
document.getElementById("zoom-reset").onclick = () => { view = [0, span]; draw(); };
timeline.addEventListener("dblclick", () => { view = [0, span]; draw(); });
timeline.addEventListener("wheel", e => {
  e.preventDefault();
  const at = Math.min(1, Math.max(0, (e.offsetX - left) / width));
  zoom(e.deltaY < 0 ? 0.8 : 1.25, at);
});
let dragging = null;
timeline.addEventListener("mousedown", e => { dragging = [e.clientX, view.slice()]; });
window.addEventListener("mouseup", () => { dragging = null; });
window.addEventListener("mousemove", e => {
  if (!dragging) return;
  const w = dragging[1][1] - dragging[1][0];
  let a = dragging[1][0] - (e.clientX - dragging[0]) / width * w;
  a = Math.max(0, Math.min(span - w, a));
  view = [a, a + w];
  draw();
});
// A link can open the page zoomed: report.html#view=FROM,TO (seconds).
const asked = /view=([0-9.e+-]+),([0-9.e+-]+)/.exec(location.hash);
if (asked && Number(asked[2]) > Number(asked[1])) view = [Math.max(0, Number(asked[1])), Math.min(span, Number(asked[2]))];
draw();
const legend = el("g", {}, timeline);
[["forward", fills[0]], ["backward", fills[1]], ["recomputation (in backward)", "#e6550d"]].forEach(([name, c], i) => {
  el("rect", { x: left + 180 * i, y: top + stages * rowHeight + 26, width: 10, height: 10, fill: c }, legend);
  el("text", { x: left + 180 * i + 14, y: top + stages * rowHeight + 35, text: name }, legend);
});

// Bubbles against the formula.
document.getElementById("bubble-note").textContent = "Idle share of each stage's pipeline phase; the formula, " +
  "(p-1)/(m+p-1) (over v when interleaved), gives " + percent(report.bubble.theory) + ". Mean measured: " +
  percent(report.bubble.mean) + ".";
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
  el("text", { x: lx + lw - 4, y: ly + 14 + 14 * i, "text-anchor": "end", fill: color, text: cls }, links);
  row(linkTable, [cls, String(c.links), bytes(c.bytes), percent(c.avg_util), percent(c.peak_util),
    c.busiest.length ? c.busiest[0].link : "-"], { "data-class": cls, "data-value": String(c.avg_util) });
});

// Memory per stage.
const memory = document.querySelector("#memory tbody");
const capacity = report.memory.capacity_bytes;
for (const st of report.memory.per_stage) {
  const stack = el("span", {});
  for (const [k, c] of [["weights_bytes", "#6baed6"], ["grads_bytes", "#fd8d3c"], ["optimizer_bytes", "#74c476"],
    ["activations_bytes", "#9e9ac8"], ["buffers_bytes", "#bdbdbd"]])
    stack.appendChild(bar(st[k] / capacity, c, 260));
  row(memory, ["stage " + st.stage, bytes(st.weights_bytes), bytes(st.grads_bytes), bytes(st.optimizer_bytes),
    bytes(st.activations_bytes), bytes(st.buffers_bytes), bytes(st.peak_bytes), percent(st.peak_bytes / capacity),
    stack], { "data-stage": st.stage, "data-value": String(st.peak_bytes), class: st.oom ? "oom" : "" });
}

// The scenario.
document.getElementById("scenario-file").textContent = report.scenario.file;
document.getElementById("scenario").textContent = JSON.stringify(data.scenario, null, 2);
document.getElementById("status").textContent = "ok";
})();
</script>
</body>
</html>
)html";

} // namespace

std::string run_html(const core::Json& report, const std::vector<PassBox>& boxes, const core::Json& scenario)
{
  core::Json passes = core::Json::array();
  for (const auto& b : boxes)
    passes.push_back({b.stage, b.chunk, b.microbatch,
                      b.weight     ? 2
                      : b.backward ? 1
                                   : 0,
                      b.start_s, b.end_s, b.recompute_s});
  const core::Json data{{"report", report}, {"passes", passes}, {"scenario", scenario}};
  std::string html(page_head);
  html += script_safe(data.dump(-1, ' ', false, core::Json::error_handler_t::replace));
  html += page_script;
  return html;
}

} // namespace sim::report
