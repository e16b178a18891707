"use strict";
// What both views' scripts use: the page's data, and a way to make elements.
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
