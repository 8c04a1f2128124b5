// Analytics: the opt-in query log's figures over a period (unanswered, low-confidence and most-asked
// questions, a chart per day), and one click to add a logged question to a QnA or open a new QnA with it.
import { all, call, get, operation, project } from "./api.js";
import { can, navigation, render, route } from "./app.js";
import { fail, field, h, plural, say, table } from "./dom.js";
import { refused, runJob, tabs } from "./projects.js";
import { describe, qnaInput, qnaList } from "./picker.js";

export const pending = { question: null }; // a logged question the editor opens as a new QnA

const SVG = "http://www.w3.org/2000/svg";
function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

// Bars per day: the questions asked, and in red the ones that got the default answer.
function chart(daily) {
  const width = 600, height = 120, max = Math.max(1, ...daily.map((d) => d.total));
  const bar = width / daily.length;
  const root = svg("svg", { viewBox: `0 0 ${width} ${height + 18}`, class: "chart", role: "img",
    "aria-label": `Questions per day: ${daily.map((d) => `${d.date} ${d.total} (${d.unanswered} unanswered)`).join(", ")}` });
  daily.forEach((d, i) => {
    const total = (d.total / max) * height, miss = (d.unanswered / max) * height;
    root.append(svg("rect", { x: i * bar + 2, y: height - total, width: Math.max(1, bar - 4), height: total, class: "bar" }));
    root.append(svg("rect", { x: i * bar + 2, y: height - miss, width: Math.max(1, bar - 4), height: miss, class: "bar-miss" }));
    if (daily.length <= 14 || i % Math.ceil(daily.length / 14) === 0) {
      const label = svg("text", { x: Math.max(i * bar + bar / 2, 14), y: height + 14, "text-anchor": "middle", class: "axis" });
      label.textContent = d.date.slice(5);
      root.append(label);
    }
  });
  return root;
}

export async function showAnalytics(name, days = 7) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  if (!can("author", name)) return render(refused(name, "analytics", "analytics"));
  const settings = await get(`/openqna/projects/${encodeURIComponent(name)}/analytics/settings`);
  const report = await get(`/openqna/projects/${encodeURIComponent(name)}/analytics?days=${days}&lowConfidence=0.5`);
  const qnas = await all(`${project(name)}/qnas`); // QnAs only: a passage is not a QnA, and Azure's list says so
  const progress = h("p", { class: "progress", role: "status", hidden: true });

  async function addTo(question, id) {
    const q = (await all(`${project(name)}/qnas`)).find((x) => x.id === id);
    if (!q) return say(`There is no QnA ${id} in the live state.`, "error");
    const value = { id, questions: [...q.questions, question], answer: q.answer, metadata: q.metadata, source: q.source,
      dialog: q.dialog, ifLastUpdated: q.lastUpdatedDateTime };
    if (await runJob("Adding the question", progress, (onStatus) => operation("PATCH", `${project(name)}/qnas`, [{ op: "replace", value }], { onStatus }))) {
      say(`"${question}" is now an alternate question of QnA ${id}; deploy to answer it in production.`);
    }
  }

  function actions(question, suggested) {
    const start = qnas.find((q) => q.id === suggested);
    const picker = qnaInput("analytics-qnas", () => qnas, { class: "qna-pick", value: start ? describe(start) : "",
      "aria-label": `QnA to add "${question}" to` });
    picker.update();
    return h("form", { class: "row inline", onsubmit: (event) => {
      event.preventDefault();
      const q = picker.read();
      if (q instanceof Error) return say(q.message, "error");
      addTo(question, q.id).catch(fail);
    } },
      h("div", { class: "pick" }, picker.input, picker.shown), h("button", { type: "submit", class: "secondary" }, "Add to QnA"),
      h("button", { type: "button", class: "secondary", onclick: () => { pending.question = question; location.hash = `#/p/${encodeURIComponent(name)}/edit`; } }, "New QnA"));
  }

  const enabled = h("input", { type: "checkbox", checked: settings.enabled });
  const retention = h("input", { type: "number", min: "1", max: "365", value: String(settings.retentionDays) });
  const settingsForm = h("form", { class: "card", onsubmit: async (event) => {
    event.preventDefault();
    if (!enabled.checked && settings.enabled && !confirm("Turning the log off forgets every logged question. Continue?")) return;
    try {
      await call("PUT", `/openqna/projects/${encodeURIComponent(name)}/analytics/settings`, { enabled: enabled.checked, retentionDays: parseInt(retention.value, 10) });
      say(enabled.checked ? "The query log is on." : "The query log is off.");
      route();
    } catch (e) { fail(e); }
  } }, h("h2", {}, "Query log"),
  h("p", { class: "hint" }, "Questions asked of this project's deployments (not of test) are kept for the retention period; user ids only as a keyed hash."),
  h("div", { class: "field check" }, h("label", {}, enabled, " Log questions")), field("Keep for (days)", retention),
  h("button", { type: "submit" }, "Save"));

  // the period's log as a CSV file, for review in a spreadsheet (fetched with the key, saved from memory)
  async function download() {
    try {
      const { data, response } = await call("GET", `/openqna/projects/${encodeURIComponent(name)}/analytics/queries?days=${days}&format=csv`);
      const file = (/filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "") || [])[1] || `${name}-queries.csv`;
      const url = URL.createObjectURL(new Blob(["\ufeff" + data], { type: "text/csv" }));
      h("a", { href: url, download: file }).click();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      say(`Downloaded ${file}: ${response.headers.get("X-Total-Count")} questions${response.headers.get("X-Truncated") === "true" ? " (the newest 100,000 of them)" : ""}.`);
    } catch (e) { fail(e); }
  }

  const period = h("select", { onchange: () => showAnalytics(name, parseInt(period.value, 10)).catch(fail) },
    [1, 7, 30, 90].map((d) => h("option", { value: String(d), selected: d === days }, d === 1 ? "Today" : `Last ${d} days`)));
  const body = report.total === 0
    ? h("p", { class: "card" }, settings.enabled ? "No questions logged in this period yet." : "The query log is off: turn it on to see what users ask.")
    : [h("section", { class: "card" }, h("h2", {}, report.users ? `${plural(report.total, "question")} from ${plural(report.users, "user")}` : plural(report.total, "question")), chart(report.daily),
        h("p", { class: "hint" }, "Blue: questions asked; red: those that got the default answer.")),
      h("section", { class: "card", "aria-label": "Unanswered" }, h("h2", {}, "Unanswered (default answer given)"),
        report.unanswered.length ? table(["Question", "Count", "Last asked", ""], report.unanswered.map((x) => [x.question, String(x.count), x.lastAsked, actions(x.question, 0)])) : h("p", {}, "None.")),
      h("section", { class: "card", "aria-label": "Low confidence" }, h("h2", {}, `Answered with low confidence (under ${report.lowConfidence})`),
        report.lowConfidenceAnswers.length ? table(["Question", "QnA", "Count", "Confidence", ""], report.lowConfidenceAnswers.map((x) => [x.question, String(x.qnaId), String(x.count), x.confidence.toFixed(2), actions(x.question, x.qnaId)])) : h("p", {}, "None.")),
      h("section", { class: "card", "aria-label": "Most asked" }, h("h2", {}, "Most asked"),
        table(["Question", "Count", "Answered by"], report.mostAsked.map((x) => [x.question, String(x.count), x.qnaId === -1 ? "default answer" : `QnA ${x.qnaId}`])))];
  render(h("section", {}, tabs(name, "analytics"), h("h1", {}, `${name}: analytics`), progress,
    h("div", { class: "row tools" }, field("Period", period),
      report.total ? h("button", { type: "button", class: "secondary", onclick: download }, "Download the log (CSV)") : null),
    body, settingsForm, qnaList("analytics-qnas", qnas)), token);
}
