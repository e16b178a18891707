// The graph view: the graph backward walks, stepped through one node at a time.
//
// Everything shown comes from the JSON in <script id="data"> (written by graph.py):
//   nodes[i]   label, kind, shape, value (forward), step (when the sweep visits it), grad (what
//              reached it), arrived (who sent it what), checks (its backward against finite
//              differences), cluster (the innermost module it ran in)
//   sweep      node indices in the order the engine's backward visited them
//   clusters   module calls, each folded into one box when the graph is large
//   views      laid-out boxes and edges: views[0] the whole graph, views[c + 1] inside cluster c
// At step k the nodes sweep[0..k-1] have been visited, sweep[k-1] being the current one.

const state = { step: 0, view: 0, selected: null, follow: true, timer: null };
let boxes = {};            // box id -> its <g>, in the view drawn now

const shapeText = (shape) => "(" + shape.join(", ") + (shape.length === 1 ? ",)" : ")");

// ------------------------------------------------------------------ the page's frame
const stepButton = el("button", { id: "step", title: "visit the next node (right arrow)" },
                      "Step ▶");
const backButton = el("button", { id: "back", title: "one step back (left arrow)" }, "◀ Back");
const resetButton = el("button", { id: "reset", title: "before the sweep (Home)" }, "|◀ Reset");
const runButton = el("button", { id: "run", title: "step on its own until the end" }, "Run ▶▶");
const counter = el("span", { id: "counter" });
const followBox = el("input", { type: "checkbox", id: "follow", checked: "" });
const checkBox = el("input", { type: "checkbox", id: "colour-check" });
const header = el("header", {}, el("h1", {}, data.title), resetButton, backButton, stepButton,
                  runButton, counter,
                  el("label", { title: "open the module the current node is in" }, followBox,
                     " follow the sweep"));
if (data.checked) {
  header.append(el("label", { title: "each op's backward against finite differences" },
                   checkBox, " colour by gradient check"),
                el("span", { class: "legend" }, el("span", { style: "background:#d9ead3" }),
                   "error ≤ " + data.thresholds[0], el("span", { style: "background:#ffe599" }),
                   "≤ " + data.thresholds[1], el("span", { style: "background:#f4b6b6" }),
                   "larger: a wrong rule"));
}
const crumbs = el("nav", { id: "crumbs" });
const canvas = el("div", { id: "canvas" });
const panel = el("aside", { id: "panel" });
const notes = el("div", { class: "notes" }, ...data.notes.map((note) => el("p", {}, note)));
document.body.append(header, crumbs, el("main", {}, canvas, panel), notes);

// ------------------------------------------------------------------ where each node stands
// "current", "done" (visited before), "pending" (some gradient has reached it, it waits for
// the rest) or "waiting", at step `step`.
function standing(i, step) {
  const node = data.nodes[i];
  if (node.step !== null && node.step === step) return "current";
  if (node.step !== null && node.step < step) return "done";
  const reached = node.arrived.some((a) => a.from === null || data.nodes[a.from].step <= step);
  return reached ? "pending" : "waiting";
}

// The view that shows node i as a box of its own: its innermost folded cluster's, or the whole
// graph's when nothing is folded.
function viewOf(i) {
  const cluster = data.nodes[i].cluster;
  const found = data.views.findIndex((view) => view.cluster === cluster);
  return found === -1 ? 0 : found;
}

// ------------------------------------------------------------------ drawing one view
// A view is drawn fitted to the canvas's width, but never smaller than MIN_SCALE (below it the
// labels could not be read): a larger graph scrolls. EDGE: room around the boxes, in pixels.
const MIN_SCALE = 0.8, EDGE = 4;

function fit(svg, view) {
  const width = view.width + 2 * EDGE, height = view.height + 2 * EDGE;
  const scale = Math.max(MIN_SCALE, Math.min(1, canvas.clientWidth / width));
  svg.setAttribute("width", width * scale);
  svg.setAttribute("height", height * scale);
}

function drawView(index) {
  state.view = index;
  const view = data.views[index];
  const svg = el("svg:svg", { viewBox: `${-EDGE} ${-EDGE} ${view.width + 2 * EDGE} `
                                       + `${view.height + 2 * EDGE}` });
  svg.append(el("svg:defs", {}, el("svg:marker", {
    id: "arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7,
    markerUnits: "userSpaceOnUse", orient: "auto" },
    el("svg:path", { d: "M0,0 L10,5 L0,10 z", fill: "#999" }))));
  for (const [from, to, path] of view.edges) {
    svg.append(el("svg:path", { class: "edge", d: path, "data-from": from, "data-to": to,
                                "marker-end": "url(#arrow)" }));
  }
  boxes = {};
  for (const box of view.boxes) {
    const g = el("svg:g", { class: "box " + box.kind, "data-id": box.id,
                            transform: `translate(${box.x - box.w / 2},${box.y - box.h / 2})` });
    const node = box.kind === "cluster" ? null : data.nodes[box.ref];
    if (node) g.classList.add(node.kind);
    const rounded = node && (node.kind === "leaf" || node.kind === "parameter") ? 0 : 7;
    g.append(el("svg:rect", { width: box.w, height: box.h, rx: rounded }));
    const lines = box.kind === "cluster"
      ? [data.clusters[box.ref].name, data.clusters[box.ref].members.length + " nodes", ""]
      : [node.label, shapeText(node.shape), ""].slice(0, box.kind === "outside" ? 2 : 3);
    lines.forEach((line, n) => g.append(el("svg:text", {
      x: box.w / 2, y: 16 + 13 * n, "text-anchor": "middle", class: n ? "muted" : "" }, line)));
    g.addEventListener("click", () => clicked(box));
    boxes[box.id] = g;
    svg.append(g);
  }
  canvas.replaceChildren(svg);
  fit(svg, view);
  drawCrumbs(view);
}

// Scroll the canvas, and only the canvas (never the notebook around the page), so that `box`
// is in sight.
function reveal(box) {
  const shown = box.getBoundingClientRect(), outer = canvas.getBoundingClientRect();
  const top = outer.top + canvas.clientTop, left = outer.left + canvas.clientLeft;
  const bottom = top + canvas.clientHeight, right = left + canvas.clientWidth;   // no scrollbars
  const margin = 12;
  if (shown.top < top) canvas.scrollTop -= top - shown.top + margin;
  else if (shown.bottom > bottom) canvas.scrollTop += shown.bottom - bottom + margin;
  if (shown.left < left) canvas.scrollLeft -= left - shown.left + margin;
  else if (shown.right > right) canvas.scrollLeft += shown.right - right + margin;
}

function drawCrumbs(view) {
  const trail = [];
  for (let c = view.cluster; c !== null; c = data.clusters[c].parent) trail.unshift(c);
  const link = (text, index) => {
    const a = el("a", {}, text);
    a.addEventListener("click", () => { drawView(index); update(); });
    return a;
  };
  crumbs.replaceChildren(data.views.length > 1 ? link("whole graph", 0) : "whole graph");
  for (const c of trail) {
    const index = data.views.findIndex((view) => view.cluster === c);
    crumbs.append(" › ", link(data.clusters[c].name, index));
  }
  if (data.views.length > 1) crumbs.append("   (a dashed box is a module: click to open it)");
}

function clicked(box) {
  if (box.kind === "cluster") {
    drawView(data.views.findIndex((view) => view.cluster === box.ref));
  } else {
    if (box.kind === "outside") drawView(viewOf(box.ref));
    state.selected = box.ref;
  }
  update();
}

// ------------------------------------------------------------------ one step's picture
function update() {
  const step = state.step, total = data.sweep.length;
  const current = step > 0 ? data.sweep[step - 1] : null;
  counter.textContent = `step ${step} of ${total}`;
  stepButton.disabled = step === total;
  backButton.disabled = resetButton.disabled = step === 0;
  canvas.classList.toggle("checked", checkBox.checked);
  const view = data.views[state.view];
  for (const box of view.boxes) {
    const g = boxes[box.id];
    g.classList.remove("current", "done", "pending", "waiting", "selected", "good", "doubtful",
                       "wrong");
    const status = g.querySelectorAll("text")[2];
    if (box.kind === "cluster") {
      const members = data.clusters[box.ref].members;
      const stands = members.map((i) => standing(i, step));
      const done = stands.filter((s) => s === "done").length;
      g.classList.add(stands.includes("current") ? "current" : done === members.length ? "done"
                      : stands.includes("pending") || done ? "pending" : "waiting");
      status.textContent = `${done} of ${members.length} done`;
      continue;
    }
    const node = data.nodes[box.ref];
    g.classList.add(standing(box.ref, step));
    if (node.verdict) g.classList.add(node.verdict);
    if (box.ref === state.selected) g.classList.add("selected");
    if (status) {
      const visited = node.step !== null && node.step <= step && node.grad;
      status.textContent = visited ? "|grad| " + node.grad.norm
                                   : node.value ? "|value| " + node.value.norm : "";
    }
  }
  // the edges along which the current node's backward sends gradients to its inputs
  for (const edge of canvas.querySelectorAll(".edge")) {
    const to = view.boxes.find((box) => box.id === edge.dataset.to);
    edge.classList.toggle("flowing", current !== null && to.kind !== "cluster"
                                     && to.ref === current);
  }
  const stepped = canvas.querySelector(".box.current");
  if (stepped && state.selected === null) reveal(stepped);
  showPanel(state.selected !== null ? state.selected : current);
}

// ------------------------------------------------------------------ the panel: one node in full
function numbersOf(summary) {
  const more = summary.size > summary.numbers.length ? ", …" : "";
  return "[" + summary.numbers.join(", ") + more + "]";
}

function showPanel(i) {
  if (i === null) {
    panel.replaceChildren(el("h2", {}, "Before the sweep"),
      el("p", {}, "Each box is a node: an op, or a leaf (square corners); arrows point the way " +
                  "the forward pass went, gradients flow against them. Press Step (or the right " +
                  "arrow key) to run backward one node at a time, in the engine's order: newest " +
                  "node first. Click a box to see it here."));
    panel.removeAttribute("data-node");
    return;
  }
  const node = data.nodes[i];
  panel.dataset.node = i;
  const where = node.cluster !== null ? " · in " + data.clusters[node.cluster].name : "";
  const parts = [el("h2", {}, node.label + " ", el("small", {}, shapeText(node.shape))),
                 el("div", { class: "muted" }, `node ${i} · ${node.kind}${where}`)];
  parts.push(el("h3", {}, "forward value"));
  parts.push(node.value
    ? el("div", {}, "norm ", el("b", { "data-field": "value-norm" }, node.value.norm), " ",
         el("div", { class: "numbers", "data-field": "value-numbers" }, numbersOf(node.value)))
    : el("div", {}, "not kept (build the graph inside viz.recording(...) to keep it)"));
  parts.push(el("h3", {}, "gradient dL/d(this)"));
  if (node.step === null) {
    parts.push(el("div", {}, "no gradient reaches this node"));
  } else if (node.step > state.step) {
    parts.push(el("div", {}, `arrives at step ${node.step}`));
  } else if (node.grad === null) {
    parts.push(el("div", { "data-field": "grad-not-kept" }, `visited at step ${node.step}; `
                  + "its gradient was not kept (see the note below the graph)"));
  } else {
    parts.push(el("div", {}, `visited at step ${node.step}: norm `,
                  el("b", { "data-field": "grad-norm" }, node.grad.norm),
                  el("div", { class: "numbers", "data-field": "grad-numbers" },
                     numbersOf(node.grad))));
    parts.push(el("div", {}, node.arrived.length > 1
      ? `the sum of ${node.arrived.length} parts, one from each use of this node:` : "from:"));
    parts.push(el("ul", {}, ...node.arrived.map(arrivedItem)));
  }
  if (node.checks) parts.push(...checkLines(node));
  panel.replaceChildren(...parts);
}

function arrivedItem(part) {
  if (part.from === null) return el("li", {}, "the seed of backward, " + shapeText(part.shape));
  const sender = data.nodes[part.from];
  const sent = part.shape === null ? "its part" : shapeText(part.shape);
  const item = el("li", {}, `${sender.label} (node ${part.from}, step ${sender.step}) sent `
                            + sent);
  if (part.summed.length) {
    item.append(el("b", {}, ` → un-broadcast: summed over axis ${part.summed.join(", ")}`));
  }
  return item;
}

function checkLines(node) {
  const lines = [el("h3", {}, "its backward against finite differences")];
  for (const check of node.checks) {
    lines.push(el("div", { "data-field": "check" }, `input ${check.input}: backward `
      + `${check.analytic}, numeric ${check.numeric}, error `
      + (check.error === null ? "not a number" : check.error.toExponential(1))));
  }
  const verdict = { good: "the rule is right", doubtful: "doubtful: a kink or rounding?",
                    wrong: "this rule is wrong" }[node.verdict];
  lines.push(el("b", {}, verdict));
  return lines;
}

// ------------------------------------------------------------------ moving through the sweep
function go(step) {
  state.step = Math.max(0, Math.min(data.sweep.length, step));
  state.selected = null;
  if (state.follow && state.step > 0) {
    const target = viewOf(data.sweep[state.step - 1]);
    if (target !== state.view) drawView(target);
  }
  update();
}

function run() {
  if (state.timer !== null || state.step === data.sweep.length) return stop();
  runButton.textContent = "Pause ‖";
  state.timer = setInterval(() => (state.step < data.sweep.length ? go(state.step + 1) : stop()),
                            400);
}

function stop() {
  clearInterval(state.timer);
  state.timer = null;
  runButton.textContent = "Run ▶▶";
}

stepButton.addEventListener("click", () => go(state.step + 1));
backButton.addEventListener("click", () => go(state.step - 1));
resetButton.addEventListener("click", () => { stop(); go(0); });
runButton.addEventListener("click", run);
followBox.addEventListener("change", () => { state.follow = followBox.checked; });
checkBox.addEventListener("change", update);
document.addEventListener("keydown", (event) => {
  const moves = { ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1 };
  if (event.key in moves) go(state.step + moves[event.key]);
  else if (event.key === "Home") go(0);
  else if (event.key === "End") go(data.sweep.length);
  else return;
  event.preventDefault();
});

window.addEventListener("resize", () => fit(canvas.querySelector("svg"), data.views[state.view]));

drawView(0);
update();
performance.mark("tinyattn-ready");        // what the tests and dev/views.py time
document.body.dataset.ready = "true";
