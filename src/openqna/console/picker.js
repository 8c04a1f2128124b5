// Picking a QnA by its question: a text input backed by a <datalist> of "#id question" that the
// browser filters as one types; what is typed may be that option, an id, a whole question or a
// piece of exactly one QnA's questions.
import { fold, h } from "./dom.js";

export function describe(q) { return `#${q.id} ${q.questions[0] || "(no question)"}`; }

// The <datalist> (id `id`) of the QnAs, at most 2000 (the browser filters it as one types).
export function qnaList(id, qnas) {
  return h("datalist", { id }, qnas.slice(0, 2000).map((q) => h("option", { value: describe(q) })));
}

// The QnA `raw` names among `qnas`, or an Error saying why none (or several) does.
export function pickQna(raw, qnas) {
  const text = String(raw || "").trim();
  if (!text) return new Error("Pick a QnA: type a few words of its question, or its id.");
  const id = text.match(/^#?(\d+)(\s|$)/);
  if (id) {
    const q = qnas.find((x) => x.id === parseInt(id[1], 10));
    return q || new Error(`There is no QnA ${id[1]} in this project.`);
  }
  const lower = fold(text);
  const exact = qnas.filter((q) => q.questions.some((x) => fold(x) === lower));
  if (exact.length === 1) return exact[0];
  const some = exact.length ? exact : qnas.filter((q) => q.questions.some((x) => fold(x).includes(lower)));
  if (some.length === 1) return some[0];
  if (!some.length) return new Error(`No QnA has a question with "${text}".`);
  return new Error(`${some.length} QnAs have a question with "${text}" (${some.slice(0, 3).map(describe).join("; ")}…): pick one.`);
}

// A labelled-by-caller input with a live line saying which QnA it names.
export function qnaInput(listId, qnas, attrs = {}) {
  const input = h("input", { autocomplete: "off", list: listId, placeholder: "Search by question, or #id", ...attrs });
  const shown = h("small", { class: "hint picked", "aria-live": "polite" });
  const update = () => {
    if (!input.value.trim()) return shown.replaceChildren();
    const q = pickQna(input.value, qnas());
    shown.textContent = q instanceof Error ? q.message : `→ QnA ${q.id}: ${q.questions[0] || ""}`;
  };
  input.addEventListener("input", update);
  input.addEventListener("change", update);
  return { input, shown, update, read: () => pickQna(input.value, qnas()) };
}
