// Duplicates: QnAs that ask the same with the same answer (duplicate) or another (conflict), and questions another
// QnA wins (misplaced), each with its fix: merge the two QnAs (after a confirmation) or move the question.
import { call, get } from "./api.js";
import { can, navigation, render } from "./app.js";
import { fail, h, plural, say, table } from "./dom.js";
import { refused, tabs } from "./projects.js";
import { confirmIn } from "./deploy.js";

const KINDS = { duplicate: "Duplicate", conflict: "Conflict", misplaced: "Misplaced question" };

function side(id, question, answer) {
  return h("div", { class: "finding-qna" }, h("strong", {}, `QnA ${id}: `), question, h("p", { class: "hint" }, answer));
}

export async function showDuplicates(name) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  if (!can("author", name)) return render(refused(name, "duplicates", "duplicates"));
  const base = `/openqna/projects/${encodeURIComponent(name)}`;
  const { value } = await get(`${base}/duplicates`);
  const slot = h("div", {});
  const done = async (message) => { await showDuplicates(name); say(message); };
  const merge = (f) => {
    const [keep, drop] = f.qna_ids;
    confirmIn(slot, `Merge QnA ${drop} (“${f.questions[1]}”) into QnA ${keep} (“${f.questions[0]}”)? QnA ${keep} keeps its answer `
      + `and takes QnA ${drop}'s questions; QnA ${drop} is deleted from test (production changes at the next deploy).`,
    "Confirm merge", async () => {
      try {
        const { data } = await call("POST", `${base}/qnas/:merge`, { keep, drop });
        await done(`Merged QnA ${drop} into QnA ${keep}: it now has ${plural(data.questions.length, "question")}.`);
      } catch (error) { fail(error); }
    });
  };
  const move = async (f) => {
    const [from, to] = [f.qna_ids[0], f.winner ?? f.qna_ids[1]];
    try {
      await call("POST", `${base}/qnas/:move-question`, { question: f.question, from, to });
      await done(`Moved “${f.question}” from QnA ${from} to QnA ${to}.`);
    } catch (error) { fail(error); }
  };
  const rows = value.map((f) => {
    const [a, b] = f.qna_ids;
    const action = f.kind === "misplaced"
      ? h("button", { type: "button", "aria-label": `Move “${f.question}” to QnA ${f.winner ?? b}`, onclick: () => move(f) }, "Move question")
      : h("button", { type: "button", "aria-label": `Merge QnA ${b} into QnA ${a}`, onclick: () => merge(f) }, "Merge");
    const what = f.kind === "misplaced"
      ? h("p", {}, `“${f.question}” (of QnA ${a}) is answered by QnA ${f.winner ?? b}.`) : null;
    return [KINDS[f.kind] || f.kind, f.score.toFixed(2),
      h("div", {}, what, side(a, f.questions[0], f.answers[0])), side(b, f.questions[1], f.answers[1]), action];
  });
  render(h("section", {}, tabs(name, "duplicates"), h("h1", {}, `${name}: duplicates`),
    h("section", { class: "card", "aria-label": "Findings" },
      h("p", { class: "hint" }, "Duplicates ask the same and answer the same; conflicts ask the same but answer differently; "
        + "a misplaced question ranks another QnA first. Merging keeps the first QnA's answer. Changes are made in test."),
      value.length ? table(["Kind", "Score", "QnA", "Other QnA", ""], rows) : h("p", {}, "No duplicates, conflicts or misplaced questions."),
      slot)), token);
}
