// Improve: active-learning suggestions to accept, the synonyms, and the project's settings.
import { all, call, get, operation, project } from "./api.js";
import { can, guard, navigation, render, route } from "./app.js";
import { fail, field, h, say, table } from "./dom.js";
import { refused, runJob, tabs } from "./projects.js";
import { calibrationCard, nearTopicCard } from "./calibration.js";

export async function showImprove(name) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  if (!can("author", name)) return render(refused(name, "improve", "improving"));
  const [qnas, synonyms, settings] = await Promise.all([all(`${project(name)}/qnas`), all(`${project(name)}/synonyms`), get(project(name))]);
  const author = can("author", name);
  const progress = h("p", { class: "progress", role: "status", hidden: true });
  const rows = [];
  for (const q of qnas) {
    for (const cluster of q.activeLearningSuggestions || []) {
      for (const s of cluster.suggestedQuestions) {
        rows.push([String(q.id), q.questions[0] || "", s.question, String(s.userSuggestedCount + s.autoSuggestedCount),
          author ? h("button", { type: "button", onclick: async () => {
            const value = { id: q.id, questions: [...q.questions, s.question], answer: q.answer, metadata: q.metadata,
              source: q.source, dialog: q.dialog, ifLastUpdated: q.lastUpdatedDateTime };
            if (await runJob("Accepting", progress, (onStatus) => operation("PATCH", `${project(name)}/qnas`, [{ op: "replace", value }], { onStatus }))) route();
          } }, "Accept") : "",
          author ? h("button", { type: "button", class: "secondary", onclick: async () => {
            try {
              await call("POST", `/openqna/projects/${encodeURIComponent(name)}/suggestions/:reject`, { qnaId: q.id, question: s.question });
              say(`Rejected "${s.question}".`);
              route();
            } catch (e) { fail(e); }
          } }, "Reject") : ""]);
      }
    }
  }
  const groups = h("textarea", { rows: 6, value: synonyms.map((g) => g.alterations.join(", ")).join("\n") });
  // edits not yet saved, which leaving the tab would lose without a word (the editor's guard, here too)
  const unsaved = { synonyms: false, settings: false };
  const synForm = h("form", { class: "card", oninput: () => { unsaved.synonyms = true; }, onsubmit: async (event) => {
    event.preventDefault();
    const lines = groups.value.split("\n").map((l) => l.split(",").map((s) => s.trim()).filter(Boolean));
    // a line of one word is no group: refused by name (it was dropped, and "Synonyms saved." said nothing of it)
    const alone = lines.findIndex((g) => g.length === 1);
    if (alone >= 0) {
      groups.focus();
      return fail(new Error(`Line ${alone + 1}: a synonym group needs two words or more: '${lines[alone][0]}'. Add the words `
        + "it means (separated by commas), or delete the line."));
    }
    const value = lines.filter((g) => g.length > 1).map((alterations) => ({ alterations }));
    try { await call("PUT", `${project(name)}/synonyms`, { value }); unsaved.synonyms = false; say("Synonyms saved."); } catch (e) { fail(e); }
  } }, h("h2", {}, "Synonyms"), field("Groups (one per line, words separated by commas)", groups), author ? h("button", { type: "submit" }, "Save synonyms") : null);
  const answer = h("input", { value: settings.settings.defaultAnswer || "" });
  const language = h("input", { value: settings.language || "en", size: 6 });
  const description = h("input", { value: settings.description || "" });
  const setForm = h("form", { class: "card", oninput: () => { unsaved.settings = true; }, onsubmit: async (event) => {
    event.preventDefault();
    try {
      await call("PATCH", project(name), { description: description.value, language: language.value, settings: { defaultAnswer: answer.value } });
      unsaved.settings = false;
      say("Settings saved.");
    } catch (e) { fail(e); }
  } }, h("h2", {}, "Settings"), field("Default answer", answer), field("Language", language), field("Description", description),
  author ? h("button", { type: "submit" }, "Save settings") : null,
  h("p", { class: "hint" }, "To export this project (JSON, TSV or Excel), use Export on the ", h("a", { href: "#/projects" }, "Projects"), " page."));
  render(h("section", {}, tabs(name, "improve"), h("h1", {}, `${name}: improve`), progress,
    h("section", { class: "card" }, h("h2", {}, "Suggestions"),
      rows.length ? table(["QnA", "Question", "User question", "Count", "", ""], rows) : h("p", {}, "No suggestions: they come from feedback and QnA Maker's train calls.")),
    h("div", { class: "grid" }, synForm, setForm), calibrationCard(name, author), nearTopicCard(name, author)), token);
  if (author) guard(() => unsaved.synonyms || unsaved.settings, token);
}
