// The test chat: ask the live `test` state or a deployment as a bot would (:query-knowledgebases),
// follow-up prompts as buttons with the context carried, and Inspect (/openqna/.../:inspect) to see
// what each confidence is made of.  A test question can become an alternate question of a QnA.
import { all, call, get, operation, project } from "./api.js";
import { can, render } from "./app.js";
import { fail, field, h, say, table } from "./dom.js";
import { highlighted, renderMarkdown } from "./markdown.js";
import { runJob, tabs } from "./projects.js";

function filters(text) {
  const pairs = text.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const [key, ...rest] = s.split(":");
    return { key: key.trim(), value: rest.join(":").trim() };
  });
  return pairs.length ? { metadataFilter: { metadata: pairs, logicalOperation: "AND" } } : undefined;
}

export async function showChat(name) {
  const deployments = (await get(`/openqna/projects`)).value.find((p) => p.projectName.toLowerCase() === name.toLowerCase());
  const deployment = h("select", {}, h("option", { value: "test" }, "test (the live state)"),
    (deployments ? deployments.deployments : []).map((d) => h("option", { value: d }, d)));
  const top = h("input", { type: "number", min: "1", max: "10", value: "3", size: 3 });
  const threshold = h("input", { type: "range", min: "0", max: "1", step: "0.05", value: "0.3" });
  const shown = h("output", {}, threshold.value);
  threshold.addEventListener("input", () => { shown.textContent = threshold.value; });
  const filter = h("input", { placeholder: "category:billing, lang:en" });
  const question = h("input", { autocomplete: "off", required: true, placeholder: "Ask a question" });
  const log = h("ol", { class: "chat", "aria-live": "polite" });
  const inspect = h("div", { class: "inspect" });
  const progress = h("p", { class: "progress", role: "status", hidden: true });
  let context = null;

  function body(text, qnaId) {
    const out = { question: text, top: parseInt(top.value, 10) || 3, confidenceScoreThreshold: parseFloat(threshold.value),
      answerSpanRequest: { enable: true, topAnswersWithSpan: 1 }, filters: filters(filter.value), includeUnstructuredSources: true };
    if (qnaId) out.qnaId = qnaId;
    if (context) out.context = context;
    return out;
  }

  async function ask(text, qnaId) {
    const request = body(text, qnaId);
    log.append(h("li", { class: "me" }, text));
    try {
      const { data } = await call("POST", `/language/:query-knowledgebases?projectName=${encodeURIComponent(name)}&deploymentName=${encodeURIComponent(deployment.value)}`, request);
      const best = data.answers[0];
      const prompts = best && best.dialog ? best.dialog.prompts.slice().sort((a, b) => a.displayOrder - b.displayOrder) : [];
      log.append(h("li", { class: "bot" }, renderMarkdown(best ? best.answer : ""),
        h("p", { class: "meta" }, best && best.id !== -1 ? `QnA ${best.id} · confidence ${best.confidenceScore.toFixed(2)}` : "Default answer"),
        prompts.length ? h("div", { class: "row prompts-bar" }, prompts.map((p) =>
          h("button", { type: "button", class: "secondary", onclick: () => ask(p.displayText, p.qnaId) }, p.displayText))) : null,
        h("button", { type: "button", class: "link", onclick: () => showInspect(text, request) }, "Inspect")));
      context = best && best.id !== -1 ? { previousQnaId: best.id, previousUserQuery: text } : null;
    } catch (error) { fail(error); }
  }

  async function addAlternate(text, id) {
    const qnas = await all(`${project(name)}/qnas`);
    const q = qnas.find((x) => x.id === id);
    if (!q) return say(`There is no QnA ${id} in the live state.`, "error");
    if (q.questions.includes(text)) return say(`QnA ${id} already has this question.`);
    const value = { id, questions: [...q.questions, text], answer: q.answer, metadata: q.metadata, source: q.source,
      dialog: q.dialog, ifLastUpdated: q.lastUpdatedDateTime };
    if (await runJob("Adding the question", progress, (onStatus) => operation("PATCH", `${project(name)}/qnas`, [{ op: "replace", value }], { onStatus }))) {
      say(`"${text}" is now an alternate question of QnA ${id}.`);
    }
  }

  async function showInspect(text, request) {
    try {
      const { data } = await call("POST", `/openqna/projects/${encodeURIComponent(name)}/:inspect?deploymentName=${encodeURIComponent(deployment.value)}`, request);
      const rows = data.candidates.filter((c) => c.id !== -1).map((c) => [String(c.id), c.questions[0] || "",
        c.confidenceScore.toFixed(3) + (c.belowThreshold ? " (below threshold)" : ""),
        h("code", {}, Object.entries(c.parts || {}).map(([k, v]) => `${k}=${v}`).join(" "))]);
      const given = data.answers[0];
      const target = h("input", { type: "number", min: "1", value: data.candidates[0] && data.candidates[0].id > 0 ? String(data.candidates[0].id) : "" });
      inspect.replaceChildren(h("section", { class: "card", "aria-label": "Inspect" }, h("h2", {}, `Inspect: “${text}”`),
        h("p", {}, data.defaultAnswerUsed ? `Default answer given. ${data.defaultAnswerReason}` : `Answered by QnA ${given.id} with confidence ${given.confidenceScore.toFixed(3)} (threshold ${data.threshold}).`),
        given && given.answerSpan ? h("div", {}, h("h3", {}, "Answer span"), highlighted(given.answer, given.answerSpan.offset, given.answerSpan.length)) : null,
        rows.length ? table(["QnA", "Question", "Confidence", "Made of"], rows, "Top candidates: features (qsim, asim, …), the KB adaptation and follow-up context, in logit units") : h("p", {}, "No candidates."),
        can("author", name) ? h("form", { class: "row", onsubmit: (event) => { event.preventDefault(); addAlternate(text, parseInt(target.value, 10)); } },
          field("Add this question to QnA", target), h("button", { type: "submit" }, "Add as alternate question")) : null));
      inspect.querySelector("h2").tabIndex = -1;
      inspect.querySelector("h2").focus();
    } catch (error) { fail(error); }
  }

  const form = h("form", { class: "row ask", onsubmit: (event) => { event.preventDefault(); const t = question.value.trim(); if (t) { question.value = ""; ask(t); } } },
    field("Question", question), h("button", { type: "submit" }, "Ask"),
    h("button", { type: "button", class: "secondary", onclick: () => { context = null; log.replaceChildren(); inspect.replaceChildren(); } }, "New conversation"));
  render(h("section", {}, tabs(name, "chat"), h("h1", {}, `${name}: test`), progress,
    h("div", { class: "row tools" }, field("Ask", deployment), field("Top", top),
      h("div", { class: "field" }, h("label", { for: "threshold" }, "Threshold ", shown), Object.assign(threshold, { id: "threshold" })),
      field("Metadata filter", filter)),
    h("div", { class: "split" }, h("div", { class: "card" }, log, form), inspect)));
  question.focus();
}
