// Calibration: upload a development file (question, QnA id or `none` per line), see how many in-scope
// questions are answered right and how many off-topic ones are rejected at each threshold, before and
// after `openqna calibrate`'s fit, then save the fit or go back to the shipped calibration.  Near-topic
// questions: the project's own OPENQNA_NEAR_TOPIC, with what the share in force does on this KB.
import { call } from "./api.js";
import { errorText, fail, field, h, say } from "./dom.js";

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

const pct = (v) => `${Math.round(v * 100)}%`;

// What the share in force does, in words: the GET/PUT .../near-topic answer (api/near_topic_api.py).
function nearTopicEffect(data) {
  const server = data.serverDefault === "off" ? "off" : `a share of ${data.serverDefault}`;
  const own = data.nearTopic === "off" ? "off" : `a share of ${data.nearTopic}`;
  const lines = [h("p", {}, data.nearTopic === "default" ? `This project follows the server's default (OPENQNA_NEAR_TOPIC): ${server}.`
    : `This project: ${own}. The server's default (OPENQNA_NEAR_TOPIC): ${server}.`)];
  if (!data.adapted) {
    lines.push(h("p", { class: "near-effect" }, `No effect on this knowledge base: ${data.reason}`));
  } else if (data.effective === "off") {
    lines.push(h("p", { class: "near-effect" }, `Off. Of this KB's ${data.heldOut} held-out alternate questions, each asked without the QnA it belongs to `
      + `(they stand for questions on its subject it has no answer for), ${pct(data.nearRate)} get an answer at 0.5 or more.`));
  } else {
    lines.push(h("p", { class: "near-effect" }, `At ${data.effective}: of this KB's ${data.heldOut} held-out alternate questions, each asked without the QnA it belongs to, `
      + `${pct(data.nearRate)} got an answer at 0.5 or more before the margin and ${pct(data.nearRateAfter)} with it: `
      + `confidences read ${data.margin} logit units lower${data.margin >= 6 ? " (the most it goes)" : ""}, which also costs right answers at 0.5.`));
  }
  return lines;
}

export function nearTopicCard(name, editable) {
  const url = `/openqna/projects/${encodeURIComponent(name)}/near-topic`;
  const mode = h("select", {}, h("option", { value: "default" }, "Server default"), h("option", { value: "off" }, "Off"),
    h("option", { value: "share" }, "A share of its own"));
  const share = h("input", { type: "number", min: "0", max: "1", step: "0.05", value: "0.1", size: 5 });
  const shown = () => { share.disabled = mode.value !== "share" || !editable; };
  mode.addEventListener("change", shown);
  mode.disabled = !editable;
  const out = h("div", { "aria-live": "polite" }, h("p", { class: "hint" }, "Measuring…"));
  const show = (data) => {
    mode.value = data.nearTopic === "default" || data.nearTopic === "off" ? data.nearTopic : "share";
    if (typeof data.nearTopic === "number") share.value = String(data.nearTopic);
    shown();
    out.replaceChildren(...nearTopicEffect(data));
  };
  const load = async () => {
    try { show((await call("GET", url)).data); } catch (e) { out.replaceChildren(h("p", { class: "status error" }, errorText(e))); }
  };
  const save = async (event) => {
    event.preventDefault();
    const value = mode.value === "share" ? Number(share.value === "" ? NaN : share.value) : mode.value;
    if (typeof value === "number" && !(value >= 0 && value <= 1)) return say("The share must be a number from 0 to 1, such as 0.1.", "error");
    try {
      out.replaceChildren(h("p", { class: "hint" }, "Measuring…"));
      const { data } = await call("PUT", url, { nearTopic: value });
      show(data);
      say(`Near-topic setting saved: ${data.nearTopic === "default" ? "the server's default" : data.nearTopic}. It applies at once to test and every deployment.`);
    } catch (e) { fail(e); load(); }
  };
  load();
  return h("form", { class: "card", "aria-label": "Near-topic questions", novalidate: true, onsubmit: save }, h("h2", {}, "Near-topic questions"),
    h("p", { class: "hint" }, "Questions on this knowledge base's subject that no QnA answers can still get an answer. "
      + "A share lowers its confidences by as little as keeps that share of its own alternate questions, asked without their QnA, under 0.5: "
      + "fewer wrong answers, and fewer right ones at 0.5. It applies at once to test and every deployment, as a calibration does."),
    h("div", { class: "row" }, field("Near-topic setting", mode), field("Share (0 to 1)", share)),
    editable ? h("button", { type: "submit" }, "Save near-topic setting") : null, out);
}
