// Calibration: upload a development file (question, QnA id or `none` per line), see how many in-scope
// questions are answered right and how many off-topic ones are rejected at each threshold, before and
// after `openqna calibrate`'s fit, then save the fit or go back to the shipped calibration.
import { call } from "./api.js";
import { fail, field, h, say } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text;
  return node;
}

function plot(result) {
  const W = 520, H = 220, L = 40, B = 30;
  const x = (t) => L + t * (W - L - 10), y = (v) => H - B - v * (H - B - 10);
  const root = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "plot", role: "img",
    "aria-label": "In-scope answered right and off-topic rejected against the threshold, before and after the fit" });
  root.append(svg("line", { x1: L, y1: y(0), x2: x(1), y2: y(0), class: "axis-line" }),
    svg("line", { x1: L, y1: y(0), x2: L, y2: y(1), class: "axis-line" }));
  for (const t of [0, 0.25, 0.5, 0.75, 1]) {
    root.append(svg("text", { x: x(t), y: H - 12, "text-anchor": "middle", class: "axis" }, String(t)));
    root.append(svg("text", { x: L - 6, y: y(t) + 4, "text-anchor": "end", class: "axis" }, `${t * 100}%`));
  }
  const line = (curve, key, cls) => {
    const pts = curve.filter((p) => p[key] !== null).map((p) => `${x(p.threshold)},${y(p[key])}`).join(" ");
    if (pts) root.append(svg("polyline", { points: pts, class: cls }));
  };
  line(result.before.curve, "answered", "l-answered before");
  line(result.before.curve, "rejected", "l-rejected before");
  line(result.fitted.curve, "answered", "l-answered");
  line(result.fitted.curve, "rejected", "l-rejected");
  root.append(svg("text", { x: W / 2, y: H - 0, "text-anchor": "middle", class: "axis" }, "threshold"));
  return root;
}

export function calibrationCard(name, editable) {
  const file = h("input", { type: "file", accept: ".tsv,.csv,.txt" });
  const out = h("div", { "aria-live": "polite" });
  const send = async (save) => {
    if (!file.files.length) return say("Choose a development file first.", "error");
    const f = file.files[0];
    try {
      const { data } = await call("POST", `/openqna/projects/${encodeURIComponent(name)}/calibration?save=${save}&name=${encodeURIComponent(f.name)}`,
        await f.text(), { raw: true, headers: { "Content-Type": "text/plain" } });
      const at = (c) => c.curve.find((p) => p.threshold === data.threshold) || {};
      const pct = (v) => (v === null || v === undefined ? "n/a" : `${(v * 100).toFixed(0)}%`);
      out.replaceChildren(plot(data),
        h("p", { class: "hint" }, "Solid: after the fit; dashed: now. Blue: in-scope answered right; red: off-topic rejected."),
        h("p", {}, `${data.questions} questions (${data.inScope} in scope, ${data.offTopic} off-topic). At threshold ${data.threshold}: `
          + `now ${pct(at(data.before).answered)} answered right, ${pct(at(data.before).rejected)} rejected; `
          + `fitted ${pct(at(data.fitted).answered)} / ${pct(at(data.fitted).rejected)}; `
          + `cross-validated ${pct(data.crossValidated.answered)} / ${pct(data.crossValidated.rejected)}.`));
      say(save ? `Calibration saved: scale ${data.fitted.scale}, shift ${data.fitted.shift}.` : ""); // an earlier error is over
    } catch (e) { fail(e); }
  };
  return h("section", { class: "card", "aria-label": "Calibration" }, h("h2", {}, "Calibration"),
    h("p", { class: "hint" }, "A development file: one question per line, a tab, and the id of the QnA that should answer it, or none."),
    field("Development file", file),
    h("div", { class: "row" }, h("button", { type: "button", class: "secondary", onclick: () => send(false) }, "Measure"),
      editable ? h("button", { type: "button", onclick: () => send(true) }, "Calibrate and save") : null,
      editable ? h("button", { type: "button", class: "secondary", onclick: async () => {
        try { await call("DELETE", `/openqna/projects/${encodeURIComponent(name)}/calibration`); say("Back to the shipped calibration."); } catch (e) { fail(e); }
      } }, "Reset to shipped") : null),
    out);
}
