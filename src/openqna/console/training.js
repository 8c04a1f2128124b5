// Save and train: the Deploy tab's card that trains the project's own model on its questions and shows what the
// train job measured (held-out questions, before and after), and which deployments hold which trained model.
import { get, operation } from "./api.js";
import { route } from "./app.js";
import { h, say, table } from "./dom.js";
import { runJob } from "./projects.js";

function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : ""; }
function pct(x) { return `${(100 * x).toFixed(1)}%`; }

// Per vector space the job trained: what it asked before and after (its own held-out questions, and the test
// sets' questions when the project has them), top answer right and right at the threshold, and whether the model
// was kept (and why).
export function reportTable(report) {
  const rows = [];
  for (const s of report.spaces) {
    const asked = [];
    if (s.before.questions) asked.push([`${s.before.questions} held out (${s.heldOutKind})`, s.before, s.after]);
    const sets = s.testSets;
    if (sets && sets.before.questions) {
      const from = s.judgedBy === "feedback, cross-validated" ? "users' feedback, cross-validated" : "the test sets";
      asked.push([`${sets.before.questions} from ${from}`, sets.before, sets.after]);
    }
    const other = s.feedbackOtherQnas;
    if (other && other.before.questions) {
      asked.push([`the same, each without its QnA's feedback (${pct(s.feedbackCoverage)} of QnAs have some)`,
        other.before, other.after]);
    }
    if (!asked.length) asked.push(["none", null, null]);
    asked.forEach(([what, before, after], i) => rows.push([i ? "" : s.space, what,
      before ? `${pct(before.top1)} → ${pct(after.top1)}` : "–",
      before ? `${pct(before.rightAtThreshold)} → ${pct(after.rightAtThreshold)}` : "–",
      i ? "" : `${s.kept ? "yes" : "no"}: ${s.reason}${s.kept && s.offset ? ` (confidence offset +${s.offset.toFixed(2)})` : ""}`]));
  }
  return table(["Space", "Questions asked", "Top answer right", `Right at ${report.threshold}`, "Kept"], rows);
}

export async function trainingCard(name, progress) {
  const base = `/openqna/projects/${encodeURIComponent(name)}`;
  const status = await get(`${base}/training`);
  const result = h("div", { class: "train-result" });
  const test = status.deployments.test;
  // a model with no adapter for the space the deployment's vectors are in now (after `openqna reembed` with another
  // embedder) is stored and deployed but never applied: say so rather than list it as if it served
  const stale = (t) => (t && t.notApplied ? ` (${t.notApplied})` : "");
  const held = Object.entries(status.deployments).filter(([d]) => d !== "test").map(([d, t]) =>
    `${d}: ${t ? (test && t.hash === test.hash ? "the same model as test" : `a model trained ${when(t.trainedDateTime)}`) + stale(t) : "no trained model"}`);
  const train = async () => {
    let job = null;
    if (await runJob("Training", progress, async (onStatus) => {
      job = await operation("POST", `${base}:train`, undefined, { onStatus });
    })) {
      const report = job.result;
      const judged = report.spaces.map((x) => x.judgedBy);
      // nothing measured (too few QnAs, no vectors): say why, not that a model did no better (none was judged)
      const unmeasured = report.spaces.filter((x) => !x.judgedBy).map((x) => x.reason).filter(Boolean);
      say(report.kept ? `Trained ${name}: the new model is in test; deploy to use it in production.`
        : !judged.some(Boolean) ? `Nothing was trained for ${name}: ${unmeasured.join("; ") || "nothing to judge a model by"}.`
          : `Trained ${name}: the model did not answer ${judged.includes("test sets") ? "the test sets' questions"
            : judged.includes("feedback, cross-validated") ? "the users' questions sent as feedback"
              : "the held-out questions"} better, so nothing changed.`);
      await route();
      const shown = document.querySelector(".train-result");
      if (shown) shown.replaceChildren(h("h3", {}, "Last training"), reportTable(report));
    }
  };
  return h("section", { class: "card", "aria-label": "Save and train" }, h("h2", {}, "Save and train"),
    h("p", {}, "Learn from this project's own questions, answers, feedback and accepted suggestions. Part of its "
      + "questions is held out, and its test sets' questions are never learnt from: both are asked before and after, "
      + "and the new model is kept only if it answers them better (the test sets decide when there are ten or more)."),
    h("p", {}, test ? `test: a model trained ${when(test.trainedDateTime)}${stale(test)}` : "test: no trained model"),
    held.length ? h("p", {}, held.join(" · ")) : null,
    test && test.report && test.report.spaces ? reportTable(test.report) : null,
    h("button", { type: "button", onclick: train }, "Train"), result);
}
