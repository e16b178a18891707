// The attention view: one layer and head at a time, as lines between tokens and as heatmaps.
//
// The JSON in <script id="data"> (written by attention.py) holds the tokens and the weights of
// every layer and head as base64 float32, laid out (layer, head, query, key); dL/dA the same way
// when it was given. Only the chosen head is drawn, so switching heads costs one head's drawing.

const L = data.length, S = data.keyCount;
const weights = floats(data.weights);
const grads = data.grads === null ? null : floats(data.grads);
const state = { layer: 0, head: 0 };

// base64 text -> Float32Array; a plain loop, several times faster than Uint8Array.from with a
// function on GPT-2 small's 12 x 12 heads.
function floats(base64) {
  const text = atob(base64);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return new Float32Array(bytes.buffer);
}

// The value at (query q, key k) of the chosen layer and head.
const offset = () => ((state.layer * data.heads) + state.head) * L * S;
const weightAt = (q, k) => weights[offset() + q * S + k];
const gradAt = (q, k) => grads[offset() + q * S + k];
// A weight of exactly 0 (the causal mask's, or one the softmax underflowed) cannot move: its
// gradient through the softmax, A * (dL/dA - sum), is 0 whatever dL/dA is. Such cells of dL/dA
// are greyed and left out of its colour scale.
const masked = (q, k) => weightAt(q, k) === 0;
const MASKED = "#d9d9d9";

// Colours: weights from white (0) to dark blue (1); gradients from blue (negative) through
// white to red (positive), scaled by the largest |dL/dA| of the head.
function mix(to, t) {
  const c = [255, 255, 255].map((white, i) => Math.round(white + (to[i] - white) * t));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
const weightColour = (w) => mix([8, 48, 107], Math.max(0, Math.min(1, w)));
const gradColour = (g, scale) => (scale === 0 ? "#fff"
  : g >= 0 ? mix([178, 24, 43], Math.min(1, g / scale))
  : mix([33, 102, 172], Math.min(1, -g / scale)));

// ------------------------------------------------------------------ the page's frame
const layerButtons = el("div", { class: "row", id: "layers" }, "layer");
const headButtons = el("div", { class: "row", id: "heads" }, "head");
for (let i = 0; i < data.layers; i++) {
  const button = el("button", { "data-layer": i }, String(i + 1));
  button.addEventListener("click", () => { state.layer = i; draw(); });
  layerButtons.append(button);
}
for (let h = 0; h < data.heads; h++) {
  const button = el("button", { "data-head": h }, String(h + 1));
  button.addEventListener("click", () => { state.head = h; draw(); });
  headButtons.append(button);
}
const readout = el("div", { id: "readout" }, "Hover a token or a cell.");
const panes = el("div", { class: "panes" });
document.body.append(el("header", {}, el("h1", {}, data.title), layerButtons, headButtons),
                     readout, el("main", {}, panes));
if (data.note) {
  document.body.append(el("div", { class: "notes" }, el("p", { id: "note" }, data.note)));
}

const label = (token) => token.replace(/\n/g, "↵").replace(/\t/g, "→");

// ------------------------------------------------------------------ patches as tokens
// A token that is a patch is drawn as its pixels: a p x p canvas, stretched to the size shown
// and kept sharp, inside the SVG (a foreignObject). Each patch's pixels are decoded once, into an
// ImageData that every canvas showing the patch copies. A token that is no patch (the class
// token, or a word) is drawn as text.
const patches = data.patches;
const patchOf = (side, i) => (patches === null ? null
  : (side === "query" ? patches.queries : patches.keys)[i]);
const pictures = [];
if (patches !== null) {
  const p = patches.size;
  const text = atob(patches.pixels);                                  // (n, p, p, 3) RGB bytes
  for (let n = 0; n < patches.count; n++) {
    const image = new ImageData(p, p);                                // (p, p, 4) RGBA
    for (let i = 0; i < p * p; i++) {
      for (let c = 0; c < 3; c++) image.data[i * 4 + c] = text.charCodeAt((n * p * p + i) * 3 + c);
      image.data[i * 4 + 3] = 255;
    }
    pictures.push(image);
  }
}
// The picture of patch n, a square of `size` pixels at (x, y).
function picture(n, x, y, size, attributes = {}) {
  const canvas = el("canvas", { width: patches.size, height: patches.size,
                                style: `width: ${size}px; height: ${size}px` });
  canvas.getContext("2d").putImageData(pictures[n], 0, 0);
  return el("svg:foreignObject", { x, y, width: size, height: size, class: "patch",
                                   "data-patch": n, ...attributes }, canvas);
}

// ------------------------------------------------------------------ lines from token to token
const ROW = patches === null ? 16 : 24, WIDTH = 380, COLUMN = 110;   // COLUMN: room for a token
const middle = (i) => i * ROW + ROW * 0.75;                             // a row's lines meet here

function linesPane() {
  const height = Math.max(L, S) * ROW + 10;
  const svg = el("svg:svg", { width: WIDTH, height, viewBox: `0 0 ${WIDTH} ${height}`,
                              id: "lines" });
  const links = el("svg:g", { class: "links" });
  svg.append(links);
  for (let q = 0; q < L; q++) {
    for (let k = 0; k < S; k++) {
      const w = weightAt(q, k);
      if (w < data.threshold) continue;       // invisible anyway: the legend says so
      links.append(el("svg:line", { class: "link", x1: COLUMN + 6, y1: middle(q),
                                    x2: WIDTH - COLUMN - 6, y2: middle(k),
                                    "stroke-opacity": w, "stroke-width": 2,
                                    "data-q": q, "data-k": k, "data-w": w }));
    }
  }
  const column = (tokens, side) => tokens.forEach((token, i) => {
    const x = side === "query" ? COLUMN : WIDTH - COLUMN;
    const n = patchOf(side, i), size = ROW - 4;
    const text = n === null || n === undefined
      ? el("svg:text", { class: "token", "data-side": side, "data-i": i, x, y: middle(i) + 4,
                         "text-anchor": side === "query" ? "end" : "start" }, label(token))
      : picture(n, side === "query" ? x - size : x, middle(i) - size / 2, size,
                { class: "token patch", "data-side": side, "data-i": i });
    text.addEventListener("mouseenter", () => focusToken(side, i, svg));
    text.addEventListener("mouseleave", () => unfocus(svg));
    svg.append(text);
  });
  column(data.queries, "query");
  column(data.keys, "key");
  return el("div", { class: "pane" },
            el("h2", {}, `query → key (lines for weights ≥ ${data.threshold})`), svg);
}

// Light the lines of one token: those it sends (a query) or receives (a key).
function focusToken(side, i, svg) {
  const attribute = side === "query" ? "q" : "k";
  svg.querySelector(".links").classList.add("focused");
  for (const line of svg.querySelectorAll(".link")) {
    line.classList.toggle("lit", Number(line.dataset[attribute]) === i);
  }
  for (const text of svg.querySelectorAll(".token")) {
    text.classList.toggle("lit", text.dataset.side === side && Number(text.dataset.i) === i);
  }
  for (const cell of document.querySelectorAll(".cell")) {
    cell.classList.toggle("lit", Number(cell.dataset[attribute]) === i);
  }
  const values = side === "query" ? data.keys.map((token, k) => [token, weightAt(i, k)])
                                  : data.queries.map((token, q) => [token, weightAt(q, i)]);
  const top = values.map(([token, w], j) => [token, w, j]).sort((a, b) => b[1] - a[1]).slice(0, 5);
  readout.textContent = (side === "query" ? `query ${i} '${label(data.queries[i])}' attends to: `
                                          : `key ${i} '${label(data.keys[i])}' is attended by: `)
    + top.map(([token, w, j]) => `${j} '${label(token)}' ${w.toFixed(3)}`).join(", ");
}

function unfocus(svg) {
  svg.querySelector(".links").classList.remove("focused");
  for (const lit of document.querySelectorAll(".lit")) lit.classList.remove("lit");
}

// ------------------------------------------------------------------ heatmaps
// A heatmap of value(q, k), coloured by colour(value); the cells where greyed(q, k) is true grey.
function heatmap(id, title, value, colour, greyed = () => false) {
  const cell = Math.max(3, Math.min(24, Math.floor(480 / Math.max(L, S))));
  const margin = cell >= 9 ? 70 : 4;          // token labels only where they can be read
  const width = margin + S * cell + 4, height = margin + L * cell + 4;
  const svg = el("svg:svg", { id, width, height, viewBox: `0 0 ${width} ${height}` });
  for (let q = 0; q < L; q++) {
    for (let k = 0; k < S; k++) {
      const v = value(q, k);
      const grey = greyed(q, k);
      svg.append(el("svg:rect", { class: grey ? "cell masked" : "cell",
                                  x: margin + k * cell, y: margin + q * cell,
                                  width: cell, height: cell, fill: grey ? MASKED : colour(v),
                                  "data-q": q, "data-k": k, "data-v": v }));
    }
  }
  // one listener for all the cells (thousands of them for GPT-2's 64 tokens)
  svg.addEventListener("mouseover", (event) => {
    if (!event.target.classList.contains("cell")) return;
    const q = Number(event.target.dataset.q), k = Number(event.target.dataset.k);
    readout.textContent = `query ${q} '${label(data.queries[q])}' → key ${k} `
      + `'${label(data.keys[k])}': weight ${weightAt(q, k).toFixed(4)}`
      + (grads ? `, dL/dA ${gradAt(q, k).toExponential(3)}` : "")
      + (grads && masked(q, k) ? " (masked: a weight held at 0 cannot move)" : "");
  });
  if (margin > 4) {             // a patch's picture in a cell's size beside it, or its text
    data.queries.forEach((token, q) => {
      const n = patchOf("query", q);
      svg.append(n === null || n === undefined
        ? el("svg:text", { x: margin - 4, y: margin + q * cell + cell - 2, "text-anchor": "end" },
             label(token))
        : picture(n, margin - cell - 3, margin + q * cell + 1, cell - 2, { "data-q": q }));
    });
    // a slanted text reaches over the next column: above the pictures when there are some
    const above = patches !== null && patches.keys.some((n) => n !== null) ? cell : 0;
    const texts = [];
    data.keys.forEach((token, k) => {
      const n = patchOf("key", k);
      if (n === null || n === undefined) {
        texts.push(el("svg:text", { transform: `translate(${margin + k * cell + cell - 2},`
                                               + `${margin - 4 - above}) rotate(-60)` },
                      label(token)));
      } else {
        svg.append(picture(n, margin + k * cell + 1, margin - cell - 3, cell - 2, { "data-k": k }));
      }
    });
    svg.append(...texts);
  }
  return el("div", { class: "pane" }, el("h2", {}, title), svg);
}

function draw() {
  for (const button of layerButtons.querySelectorAll("button")) {
    button.classList.toggle("chosen", Number(button.dataset.layer) === state.layer);
  }
  for (const button of headButtons.querySelectorAll("button")) {
    button.classList.toggle("chosen", Number(button.dataset.head) === state.head);
  }
  const name = `layer ${state.layer + 1}, head ${state.head + 1}`;
  const shown = [linesPane(), heatmap("weights", `weights A (${name}): row = query, column = key`,
                                      weightAt, weightColour)];
  if (grads) {
    let scale = 0;
    for (let q = 0; q < L; q++) {
      for (let k = 0; k < S; k++) {
        if (!masked(q, k)) scale = Math.max(scale, Math.abs(gradAt(q, k)));
      }
    }
    const pane = heatmap("grads", `dL/dA (red +, blue −, grey: masked; largest |dL/dA| `
                         + `${scale.toExponential(2)})`, gradAt, (g) => gradColour(g, scale),
                         masked);
    if (data.noteGrads) pane.append(el("p", { class: "note-grads" }, data.noteGrads));
    shown.push(pane);
  }
  panes.replaceChildren(...shown);
}

draw();
performance.mark("tinyattn-ready");        // what the tests and dev/views.py time
document.body.dataset.ready = "true";
