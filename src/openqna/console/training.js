// Save and train: the Deploy tab's card that trains the project's own model on its questions and shows what the
// train job measured (held-out questions, before and after), and which deployments hold which trained model.
import { get, operation } from "./api.js";
import { route } from "./app.js";
import { h, say, table } from "./dom.js";
import { runJob } from "./projects.js";

function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : ""; }
function pct(x) { return `${(100 * x).toFixed(1)}%`; }

// One row per vector space the job trained: held-out questions, top answer right and right at the threshold,
// before → after, and whether the model was kept (and why).
export function reportTable(report) {
  return table(["Space", "Held-out questions", "Top answer right", `Right at ${report.threshold}`, "Kept"],
    report.spaces.map((s) => [s.space, s.before.questions ? `${s.before.questions} (${s.heldOutKind})` : "none",
      s.before.questions ? `${pct(s.before.top1)} → ${pct(s.after.top1)}` : "–",
      s.before.questions ? `${pct(s.before.rightAtThreshold)} → ${pct(s.after.rightAtThreshold)}` : "–",
      `${s.kept ? "yes" : "no"}: ${s.reason}`]));
}

export async function trainingCard(name, progress) {
  const base = `/openqna/projects/${encodeURIComponent(name)}`;
  const status = await get(`${base}/training`);
  const result = h("div", { class: "train-result" });
  const test = status.deployments.test;
  const held = Object.entries(status.deployments).filter(([d]) => d !== "test").map(([d, t]) =>
    `${d}: ${t ? (test && t.hash === test.hash ? "the same model as test" : `a model trained ${when(t.trainedDateTime)}`) : "no trained model"}`);
  const train = async () => {
    let job = null;
    if (await runJob("Training", progress, async (onStatus) => {
      job = await operation("POST", `${base}:train`, undefined, { onStatus });
    })) {
      const report = job.result;
      say(report.kept ? `Trained ${name}: the new model is in test; deploy to use it in production.`
        : `Trained ${name}: the model did not answer the held-out questions better, so nothing changed.`);
      await route();
      const shown = document.querySelector(".train-result");
      if (shown) shown.replaceChildren(h("h3", {}, "Last training"), reportTable(report));
    }
  };
  return h("section", { class: "card", "aria-label": "Save and train" }, h("h2", {}, "Save and train"),
    h("p", {}, "Learn from this project's own questions, answers and accepted suggestions. Part of its questions is "
      + "held out and asked before and after; the new model is kept only if it answers them better."),
    h("p", {}, test ? `test: a model trained ${when(test.trainedDateTime)}` : "test: no trained model"),
    held.length ? h("p", {}, held.join(" · ")) : null,
    test && test.report && test.report.spaces ? reportTable(test.report) : null,
    h("button", { type: "button", onclick: train }, "Train"), result);
}
