// The test chat: ask the live `test` state or a deployment as a bot would (:query-knowledgebases),
// follow-up prompts as buttons with the context carried, and Inspect (/openqna/.../:inspect) to see
// what each confidence is made of.  A test question can become an alternate question of a QnA.
import { ApiError, all, call, get, operation, project } from "./api.js";
import { can, navigation, render } from "./app.js";
import { fail, field, h, say, table } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { describe, qnaInput, qnaList } from "./picker.js";
import { runJob, tabs } from "./projects.js";

function filters(text) {
  const pairs = text.split(",").map((s) => s.trim()).filter(Boolean).map((s) => {
    const [key, ...rest] = s.split(":");
    return { key: key.trim(), value: rest.join(":").trim() };
  });
  return pairs.length ? { metadataFilter: { metadata: pairs, logicalOperation: "AND" } } : undefined;
}

const pct = (x) => `${Math.round(x * 100)}%`;

// A candidate's confidence in words, from the :inspect parts (the raw numbers stay behind a toggle).
export function inWords(c, asked) {
  const p = c.parts || {};
  const passage = c.kind === "passage";
  const out = [];
  const q = c.questions || [];
  const same = p.exact_match ? q.find((x) => x.trim().toLowerCase() === String(asked).trim().toLowerCase()) : null;
  if (p.exact_match) out.push(same ? `matched its question “${same}” word for word` : "one of its questions is yours, word for word");
  if (p.qsim !== undefined && !same) {
    // the question the server says matched (`matchedQuestion`); without it, its count alone: naming the first one
    // ("such as") named a question that had not matched
    const score = `(${p.qsim.toFixed(2)})`;
    out.push(passage ? `its text is close in meaning to your question ${score}`
      : q.length === 1 ? `matched the question “${q[0]}” ${score}`
        : c.matchedQuestion ? `matched “${c.matchedQuestion}”, the closest in meaning of its ${q.length} questions ${score}`
          : `matched the closest in meaning of its ${q.length} questions ${score}`);
  }
  if (!passage && p.asim !== undefined) out.push(`its answer's meaning is ${p.asim.toFixed(2)} similar to your question`);
  if (!passage && p.qcov !== undefined) out.push(`its question holds ${pct(p.qcov)} of your words`);
  if (p.acov !== undefined) out.push(`the ${passage ? "passage" : "answer"}'s words cover ${pct(p.acov)} of yours`);
  if (p.bm25 !== undefined) out.push(p.bm25 > 0 ? `keyword score ${p.bm25.toFixed(2)}` : "no keyword in common");
  if (p.context) out.push(`the conversation so far ${p.context > 0 ? "raised" : "lowered"} it`);
  if (p.kb_adaptation) out.push(`this project's tuning ${p.kb_adaptation > 0 ? "raised" : "lowered"} it`);
  const text = out.join("; ");
  return text ? text.charAt(0).toUpperCase() + text.slice(1) + "." : "No explanation was recorded.";
}

// The span as Markdown would show it: markers a cut left unpaired are dropped rather than shown raw.
function spanText(text) {
  let out = String(text || "");
  for (const marker of ["**", "`"]) if (out.split(marker).length % 2 === 0) out = out.split(marker).join("");
  return out;
}

export async function showChat(name) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  const deployments = (await get(`/openqna/projects`)).value.find((p) => p.projectName.toLowerCase() === name.toLowerCase());
  if (!deployments) throw new ApiError(404, "ProjectNotFound", `There is no project ${name}.`);
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
    log.append(h("li", { class: "me", dir: "auto" }, text));
    // the newest exchange in view: after a few, answers landed below the chat box's visible part
    const latest = () => { log.scrollTop = log.scrollHeight; };
    latest();
    try {
      const { data } = await call("POST", `/language/:query-knowledgebases?projectName=${encodeURIComponent(name)}&deploymentName=${encodeURIComponent(deployment.value)}`, request);
      const best = data.answers[0];
      const prompts = best && best.dialog ? best.dialog.prompts.slice().sort((a, b) => a.displayOrder - b.displayOrder) : [];
      log.append(h("li", { class: "bot", dir: "auto" }, renderMarkdown(best ? best.answer : ""),
        h("p", { class: "meta" }, best && best.id !== -1 ? `QnA ${best.id} · confidence ${best.confidenceScore.toFixed(2)}` : "Default answer"),
        prompts.length ? h("div", { class: "row prompts-bar" }, prompts.map((p) =>
          h("button", { type: "button", class: "secondary", onclick: () => ask(p.displayText, p.qnaId) }, p.displayText))) : null,
        h("button", { type: "button", class: "link", onclick: () => showInspect(text, request) }, "Inspect")));
      context = best && best.id !== -1 ? { previousQnaId: best.id, previousUserQuery: text } : null;
      say(""); // an earlier question's error is over
    } catch (error) { fail(error); }
    latest();
  }

  let qnaCache = null; // the project's QnAs, for picking one by its question (authors only)
  async function liveQnas() {
    if (qnaCache) return qnaCache;
    return (qnaCache = await all(`${project(name)}/qnas`)); // QnAs only, passages left out
  }

  async function addAlternate(text, id) {
    const qnas = await all(`${project(name)}/qnas`);
    const q = qnas.find((x) => x.id === id);
    if (!q) return say(`There is no QnA ${id} in the live state.`, "error");
    if (q.questions.includes(text)) return say(`QnA ${id} already has this question.`);
    const value = { id, questions: [...q.questions, text], answer: q.answer, metadata: q.metadata, source: q.source,
      dialog: q.dialog, ifLastUpdated: q.lastUpdatedDateTime };
    if (await runJob("Adding the question", progress, (onStatus) => operation("PATCH", `${project(name)}/qnas`, [{ op: "replace", value }], { onStatus }))) {
      qnaCache = null;
      say(`"${text}" is now an alternate question of QnA ${id}.`);
    }
  }

  async function showInspect(text, request) {
    try {
      const { data } = await call("POST", `/openqna/projects/${encodeURIComponent(name)}/:inspect?deploymentName=${encodeURIComponent(deployment.value)}`, request);
      const author = can("author", name);
      const qnas = author ? await liveQnas() : [];
      const candidates = data.candidates.filter((c) => c.id !== -1);
      const kindOf = new Map(candidates.map((c) => [c.id, c.kind === "passage" ? "Passage" : "QnA"]));
      const rows = candidates.map((c) => [`${kindOf.get(c.id)} ${c.id}`, c.questions[0] || "",
        c.confidenceScore.toFixed(2) + (c.belowThreshold ? " (below threshold)" : ""),
        h("div", {}, h("p", { class: "why" }, inWords(c, text)),
          h("details", {}, h("summary", {}, "Raw features"),
            h("code", {}, Object.entries(c.parts || {}).map(([k, v]) => `${k}=${v}`).join(" "))))]);
      const given = data.answers[0];
      const top = candidates.find((c) => c.kind !== "passage");
      const picker = qnaInput("inspect-qnas", () => qnas, { value: top ? describe(top) : "" });
      picker.update();
      const span = given && given.answerSpan ? spanText(given.answerSpan.text || given.answer.slice(given.answerSpan.offset, given.answerSpan.offset + given.answerSpan.length)) : "";
      inspect.replaceChildren(h("section", { class: "card", "aria-label": "Inspect" }, h("h2", {}, `Inspect: “${text}”`),
        data.readAs ? h("p", { class: "hint" }, `Read as “${data.readAs}” (typos corrected, synonyms expanded).`) : null,
        h("p", {}, data.defaultAnswerUsed ? `Default answer given. ${data.defaultAnswerReason}` : `Answered by ${kindOf.get(given.id) || "QnA"} ${given.id} with confidence ${given.confidenceScore.toFixed(2)} (threshold ${data.threshold}).`),
        span ? h("div", {}, h("h3", {}, "Answer span (the part of the answer that answers the question)"), h("blockquote", { class: "span" }, renderMarkdown(span))) : null,
        rows.length ? table(["Answer", "Question or title", "Confidence", "Why"], rows, "Top candidates, and what each confidence is made of") : h("p", {}, "No candidates."),
        author ? h("form", { class: "row", onsubmit: (event) => {
          event.preventDefault();
          const q = picker.read();
          if (q instanceof Error) return say(q.message, "error");
          addAlternate(text, q.id);
        } }, field("Add this question to QnA", picker.input, picker.shown), h("button", { type: "submit" }, "Add as alternate question"), qnaList("inspect-qnas", qnas)) : null));
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
    h("div", { class: "split" }, h("div", { class: "card" }, log, form), inspect)), token);
  question.focus();
}
