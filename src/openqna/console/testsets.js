// Test sets: upload a named set (TSV, CSV or Excel) or make one from the confirmed questions of the log, run it against test or a deployment, read the run's figures and
// its confusion list, the run history, and the per-question diff between two runs (worse and better).
import { all, call, get, project } from "./api.js";
import { can, navigation, render } from "./app.js";
import { confirmIn } from "./deploy.js";
import { fail, field, h, plural, say, table } from "./dom.js";
import { refused, tabs } from "./projects.js";

const FILES = ".tsv,.txt,.csv,.xlsx";

function when(iso) { return iso ? iso.replace("T", " ").replace(/\.\d+/, "").replace("Z", " UTC") : ""; }
function pct(share) { return share === null || share === undefined ? "–" : `${Math.round(share * 1000) / 10}%`; }
function conf(x) { return typeof x === "number" ? x.toFixed(2) : "–"; }

function qna(id, question) {
  if (id === null || id === undefined) return "no answer";
  if (typeof id === "string") return `the answer “${id}”`;
  return question ? `QnA ${id}: ${question}` : `QnA ${id}`;
}

function figures(run) {
  return h("dl", { class: "figures" },
    h("dt", {}, "Questions"), h("dd", {}, String(run.questions)),
    h("dt", {}, "Top-1"), h("dd", {}, pct(run.top1)),
    h("dt", {}, `Right at threshold ${conf(run.threshold)}`), h("dd", {}, pct(run.right_at_threshold)),
    h("dt", {}, "No-answer rejected"), h("dd", {}, pct(run.no_answer_rejected)),
    // counted as misses, though no ranking can make them right: the set or the state needs the edit
    run.expected_missing ? [h("dt", {}, "Expected QnA not in this state"), h("dd", {}, String(run.expected_missing))] : null);
}

// A miss whose expectation the state run does not hold (the server counts these as `expected_missing`): a QnA id no QnA
// has (or one deleted since), or an answer no QnA gives.
function missing(w) { return w.expected !== null && w.expected !== undefined && !w.expected_question; }

function expectedText(w) {
  if (!missing(w)) return qna(w.expected, w.expected_question);
  return h("span", { class: "missing" }, typeof w.expected === "string"
    ? `No QnA in this state gives the answer “${w.expected}”` : `QnA ${w.expected} is not in this state`);
}

function runCard(run) {
  const wrong = run.wrong || [];
  const lacking = wrong.filter(missing).length;
  return h("section", { class: "card", "aria-label": "Run result" },
    h("h2", {}, `Run ${run.run_id}: ${run.test_set} against ${run.deployment}`),
    h("p", {}, when(run.created)), figures(run),
    lacking ? h("p", { class: "hint" }, `${plural(lacking, "question")} expect${lacking === 1 ? "s" : ""} a QnA this state `
      + "does not hold (an id no QnA has, one deleted since, or an answer none gives): no ranking can make "
      + `${lacking === 1 ? "it" : "them"} right; fix the test set, or add the QnA.`) : null,
    wrong.length
      ? table(["Question", "Expected", "Got", "Confidence"],
        wrong.map((w) => [w.question, expectedText(w), qna(w.got, w.got_question), conf(w.confidence)]),
        `Confusion list: ${wrong.length} not right`)
      : h("p", {}, "Every question got what it expected."));
}

function diffCard(diff) {
  const rows = (items) => items.map((x) => [x.question, qna(x.expected), `${qna(x.before.got, x.before.got_question)} (${conf(x.before.confidence)})`,
    `${qna(x.after.got, x.after.got_question)} (${conf(x.after.confidence)})`]);
  const part = (label, items) => items.length
    ? table(["Question", "Expected", `Run ${diff.old}`, `Run ${diff.new}`], rows(items), `${label}: ${items.length}`)
    : h("p", {}, `${label}: none.`);
  const s = diff.summary;
  const line = (label, key) => `${label} ${pct(s[key].old)} → ${pct(s[key].new)}`;
  return h("section", { class: "card", "aria-label": "Comparison" },
    h("h2", {}, `Run ${diff.old} → run ${diff.new}`),
    h("p", {}, [line("Top-1", "top1"), line("right at threshold", "right_at_threshold"), line("no-answer rejected", "no_answer_rejected")].join(" · ")),
    part("Worse", diff.worse), part("Better", diff.better),
    diff.only_old.length || diff.only_new.length
      ? h("p", {}, `Asked in one run only: ${[...diff.only_old, ...diff.only_new].join("; ")}`) : null);
}

export async function showTestSets(name, shown = {}) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  if (!can("author", name)) return render(refused(name, "tests", "test sets"));
  const base = `/openqna/projects/${encodeURIComponent(name)}`;
  const [sets, runs, deployments] = await Promise.all([get(`${base}/test-sets`), get(`${base}/test-runs`),
    all(`${project(name)}/deployments`)]);
  const progress = h("p", { class: "progress", role: "status", hidden: true });
  const result = h("div", {});

  // upload
  const setName = h("input", { pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*" });
  const file = h("input", { type: "file", accept: FILES, required: true });
  const upload = h("form", { class: "card", "aria-label": "Upload a test set", onsubmit: async (event) => {
    event.preventDefault();
    const f = file.files[0];
    if (!f) return;
    const target = setName.value.trim() || f.name.replace(/\.[^.]*$/, "");
    try {
      const { data } = await call("PUT", `${base}/test-sets/${encodeURIComponent(target)}?fileName=${encodeURIComponent(f.name)}`,
        f, { raw: true });
      say(`Uploaded test set ${data.name}: ${data.questions} questions.`);
      await showTestSets(name);
    } catch (error) { fail(error); }
  } }, h("h2", {}, "Upload a test set"),
  field("Set name", setName, "Empty: the file's name. Uploading a set of the same name replaces it."),
  field("Test-set file", file, ["TSV, CSV or Excel with a header row: ", h("code", {}, "question"), " and ",
    h("code", {}, "expected_qna_id"), " or ", h("code", {}, "expected_answer"), ", optionally ", h("code", {}, "metadata"),
    "; an empty expectation means the question should get no answer."]),
  h("button", { type: "submit" }, "Upload"));

  // made from the questions someone confirmed: accepted suggestions and logged questions with feedback
  const logName = h("input", { value: "from-log", pattern: "[A-Za-z0-9][A-Za-z0-9_\\-]*" });
  const fromLog = h("form", { class: "card", "aria-label": "Make a test set from the log", onsubmit: async (event) => {
    event.preventDefault();
    const target = logName.value.trim() || "from-log";
    try {
      const { data } = await call("POST", `${base}/test-sets/${encodeURIComponent(target)}/:from-log`);
      const left = data.skipped.gone + data.skipped.ambiguous + data.skipped.over;
      say(`Made test set ${data.name}: ${plural(data.questions, "question")} (${plural(data.accepted, "accepted suggestion")}, ` +
        `${plural(data.feedback, "logged question")} with feedback${left ? `; ${left} left out` : ""}).`);
      await showTestSets(name);
    } catch (error) { fail(error); }
  } }, h("h2", {}, "Make a test set from the log"),
  h("p", { class: "hint" }, "Takes every question whose answer someone confirmed: suggestions accepted (Improve), questions ",
    "added to a QnA from Analytics, and logged questions whose users' feedback names one QnA. Questions nobody confirmed ",
    "are left out: the answer they got is only what was ranked first."),
  field("Set name", logName, "Making a set of the same name again replaces it with what the log holds now."),
  h("button", { type: "submit" }, "Make from log"));

  // run, or delete a set
  const slot = h("div", {});
  const remove = async (setName) => {
    try {
      await call("DELETE", `${base}/test-sets/${encodeURIComponent(setName)}`);
      say(`Deleted test set ${setName}.`);
      await showTestSets(name);
    } catch (error) { fail(error); }
  };
  const which = h("select", {}, sets.value.map((s) => h("option", { value: s.name }, `${s.name} (${s.questions} questions)`)));
  const against = h("select", {}, h("option", { value: "test" }, "test (not deployed)"),
    deployments.map((d) => h("option", { value: d.deploymentName }, d.deploymentName)));
  const runForm = sets.value.length ? h("form", { class: "card", "aria-label": "Run a test set", onsubmit: async (event) => {
    event.preventDefault();
    progress.hidden = false;
    progress.textContent = `Running ${which.value} against ${against.value}…`;
    try {
      const { data } = await call("POST", `${base}/test-sets/${encodeURIComponent(which.value)}/:run?deploymentName=${encodeURIComponent(against.value)}`);
      say(`Ran ${data.test_set} against ${data.deployment}: ${data.questions} questions, top-1 ${pct(data.top1)}, ${(data.wrong || []).length} not right.`);
      await showTestSets(name, { run: data });
    } catch (error) { progress.textContent = "The run failed."; fail(error); }
  } }, h("h2", {}, "Run a test set"),
  table(["Set", "Questions", "Modified", ""], sets.value.map((s) => [s.name, String(s.questions), when(s.modified),
    h("button", { type: "button", class: "secondary", "aria-label": `Delete ${s.name}`, onclick: () => confirmIn(slot,
      `Delete test set ${s.name} (${plural(s.questions, "question")})? Its runs stay in the history.`, "Confirm delete",
      () => remove(s.name)) }, "Delete")])),
  slot, field("Test set", which), field("Against", against), h("button", { type: "submit" }, "Run"))
    : h("p", { class: "card" }, "No test sets yet: upload one above.");

  // history and compare
  const show = async (id) => {
    try {
      result.replaceChildren(runCard(await get(`${base}/test-runs/${id}`)));
      result.scrollIntoView({ block: "nearest" });
    } catch (error) { fail(error); }
  };
  const label = (r) => `Run ${r.run_id}: ${r.test_set} against ${r.deployment}, ${when(r.created)}`;
  const older = h("select", {}, runs.value.map((r) => h("option", { value: String(r.run_id) }, label(r))));
  const newer = h("select", {}, runs.value.map((r) => h("option", { value: String(r.run_id) }, label(r))));
  if (runs.value.length > 1) older.value = String(runs.value[1].run_id);
  const compare = async () => {
    try {
      const diff = await get(`${base}/test-runs/compare?old=${older.value}&new=${newer.value}`);
      result.replaceChildren(diffCard(diff));
    } catch (error) { fail(error); }
  };
  const history = runs.value.length ? h("section", { class: "card", "aria-label": "Run history" }, h("h2", {}, "Run history"),
    table(["Run", "Set", "Against", "When", "Questions", "Top-1", "Right at threshold", "No-answer rejected", ""],
      runs.value.map((r) => [String(r.run_id), r.test_set, r.deployment, when(r.created), String(r.questions), pct(r.top1),
        pct(r.right_at_threshold), pct(r.no_answer_rejected),
        h("button", { type: "button", class: "secondary", "aria-label": `Show run ${r.run_id}`, onclick: () => show(r.run_id) }, "Show")])),
    runs.value.length > 1 ? h("form", { class: "compare", onsubmit: (event) => { event.preventDefault(); compare(); } },
      field("Older run", older), field("Newer run", newer), h("button", { type: "submit" }, "Compare")) : null) : null;

  if (shown.run) result.replaceChildren(runCard(shown.run));
  render(h("section", {}, tabs(name, "tests"), h("h1", {}, `${name}: test sets`), progress, result,
    h("div", { class: "grid" }, upload, runForm), fromLog, history), token);
}
