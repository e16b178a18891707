"use strict";
// What both views' scripts use: the page's data, a way to make elements, and the page's side of
// a notebook's frame.
const data = JSON.parse(document.getElementById("data").textContent);
const SVG = "http://www.w3.org/2000/svg";

// A new element: el("div", {class: "x"}, "text", child, ...); "svg:rect" makes an SVG element.
function el(tag, attributes, ...children) {
  const element = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4))
                                         : document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) element.setAttribute(name, value);
  for (const child of children) element.append(child);
  return element;
}

// In a notebook the page runs in a frame (page.py, View._repr_html_). It tells the notebook its
// height whenever that changes, so that the frame fits it, and after a click it asks for the
// keyboard to be taken back, so that the notebook's keys keep working; keys it does not use it
// never stops. Opened on its own (from a file), it does neither.
const embedded = window.parent !== window;
if (embedded) {
  document.documentElement.classList.add("embedded");
  const tell = (message) => window.parent.postMessage({ tinyattn: true, ...message }, "*");
  const height = () => Math.ceil(document.documentElement.getBoundingClientRect().height);
  new ResizeObserver(() => tell({ height: height() })).observe(document.documentElement);
  window.addEventListener("pointerup", () => tell({ release: true }));
  // the notebook's script may begin to listen after the first height was told: it asks again
  window.addEventListener("message", (event) => {
    if (event.source === window.parent && event.data && event.data.tinyattn === "height?") {
      tell({ height: height() });
    }
  });
}
