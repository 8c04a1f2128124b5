// The QnA editor: search, sort and page the QnAs (all in memory: 10,000 QnAs filter in milliseconds,
// and only one page is drawn), edit one as a QnA update operation, passages listed apart by source.
// Bulk: select QnAs (one by one, or every one the search finds), then set or remove a metadata pair or
// delete them, as QnA update operations of BULK at a time, each holding the QnA as it was read
// (ifLastUpdated), so that a QnA changed elsewhere meanwhile is reported, not overwritten.
import { all, get, operation, project } from "./api.js";
import { can, guard, navigation, render } from "./app.js";
import { fail, field, fold, h, say, table } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { importForm, refused, runJob, tabs } from "./projects.js";
import { describe, qnaInput, qnaList } from "./picker.js";
import { pending } from "./analytics.js";
import { sourcesCard } from "./sources.js";

const PAGE = 25;
const BULK = 200; // operations a call: well inside the API's 1,000 and its body limit with long answers

function metadataText(meta) { return Object.entries(meta || {}).map(([k, v]) => `${k}:${v}`).join("\n"); }
function parseMetadata(text) {
  const out = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf(":");
    if (i < 1) throw new Error(`Metadata line "${line}" must be key:value.`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

// What the list's search reads: the questions, the answer, the metadata (as key:value) and the source; a search
// for a metadata value ("reviewed") found nothing.
const byText = new Intl.Collator(undefined, { sensitivity: "base", numeric: true }); // the browser's language's order

function searchText(q) {
  const meta = Object.entries(q.metadata || {}).map(([k, v]) => `${k}:${v}`).join(" ");
  return fold([q.questions.join(" "), q.answer, meta, q.source || ""].join(" "));
}

export async function showEditor(name) {
  const token = navigation(); // drawn only if no newer navigation began meanwhile
  if (!can("author", name)) return render(refused(name, "edit", "editing QnAs"));
  const [qnas, passages] = await Promise.all([all(`${project(name)}/qnas`), get(`/openqna/projects/${encodeURIComponent(name)}/passages`)]);
  const state = { items: qnas, query: "", sort: "id", page: 0, open: null,
    selected: new Set() };
  for (const q of state.items) q._text = searchText(q);
  const byId = new Map(state.items.map((q) => [q.id, q]));
  const editable = can("author", name);
  const progress = h("p", { class: "progress", role: "status", hidden: true });

  const search = h("input", { type: "search", placeholder: "Search questions, answers, metadata (key:value) and source", oninput: () => { state.query = fold(search.value); state.page = 0; draw(); if (editable) drawBulk(); } });
  const sort = h("select", { onchange: () => { state.sort = sort.value; draw(); } },
    h("option", { value: "id" }, "Id"), h("option", { value: "question" }, "Question"), h("option", { value: "updated" }, "Last updated"));
  const listBox = h("div", { class: "list" });
  const editBox = h("div", { class: "editpane" });

  function visible() {
    const words = state.query.split(/\s+/).filter(Boolean);
    const found = words.length ? state.items.filter((q) => words.every((w) => q._text.includes(w))) : state.items.slice();
    if (state.sort === "question") return found.sort((a, b) => byText.compare(a.questions[0] || "", b.questions[0] || ""));
    const key = { id: (q) => q.id, updated: (q) => q.lastUpdatedDateTime || "" }[state.sort];
    return found.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0) * (state.sort === "updated" ? -1 : 1));
  }

  function draw() {
    const found = visible();
    const pages = Math.max(1, Math.ceil(found.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    const rows = found.slice(state.page * PAGE, (state.page + 1) * PAGE).map((q) => [
      ...(editable ? [h("input", { type: "checkbox", checked: state.selected.has(q.id), "aria-label": `Select QnA ${q.id}`,
        onchange: (event) => { event.target.checked ? state.selected.add(q.id) : state.selected.delete(q.id); drawBulk(); } })] : []),
      String(q.id),
      h("button", { type: "button", class: "link", onclick: () => open(q) }, q.questions[0] || "(no question)")]);
    listBox.replaceChildren(table(editable ? ["Select", "Id", "Question"] : ["Id", "Question"], rows,
      `${found.length} of ${state.items.length} QnAs`),
      h("div", { class: "row pager" },
        h("button", { type: "button", class: "secondary", disabled: state.page === 0, onclick: () => { state.page--; draw(); } }, "Previous"),
        h("span", {}, `Page ${state.page + 1} of ${pages}`),
        h("button", { type: "button", class: "secondary", disabled: state.page >= pages - 1, onclick: () => { state.page++; draw(); } }, "Next")));
  }

  // -- bulk actions on the selected QnAs ---------------------------------------------------------------
  const selectedCount = h("span", { role: "status" });
  const metaSet = h("input", { placeholder: "key:value" });
  const metaKey = h("input", { placeholder: "key" });
  function drawBulk() {
    for (const id of [...state.selected]) if (!byId.has(id)) state.selected.delete(id);
    const n = state.selected.size;
    const shown = new Set(visible().map((q) => q.id));
    const hidden = [...state.selected].filter((id) => !shown.has(id)).length;
    // a selection the search hides still counts: say so (a search for "weather" read "0 of 96 QnAs · 2 selected")
    selectedCount.textContent = `${n} selected` + (hidden ? ` (${hidden} not shown by the search)` : "");
    for (const b of bulkBox.querySelectorAll("button.needs-selection")) b.disabled = n === 0;
  }
  function selectedItems() { return state.items.filter((q) => state.selected.has(q.id)); }
  // the QnA as it was read, to be written back whole (a replace replaces every field) with new metadata
  function rewritten(q, metadata) {
    const { _text, lastUpdatedDateTime, ...value } = q;
    return { op: "replace", value: { ...value, metadata, ifLastUpdated: lastUpdatedDateTime } };
  }
  async function bulk(label, ops, done) {
    if (state.dirty && !confirm("You have unsaved changes. Discard them?")) return;
    state.dirty = false;
    let sent = 0;
    for (let i = 0; i < ops.length; i += BULK) {
      const chunk = ops.slice(i, i + BULK);
      const ok = await runJob(`${label} (${i + chunk.length} of ${ops.length})`, progress, (onStatus) =>
        operation("PATCH", `${project(name)}/qnas`, chunk, { onStatus }));
      if (!ok) {
        if (sent) say(`${sent} of ${ops.length} QnAs were changed before this error: ${document.getElementById("status").textContent}`, "error");
        await reload(null, true);
        return;
      }
      sent += chunk.length;
    }
    state.selected.clear();
    say(done(ops.length));
    await reload(null);
  }
  async function setMetadata() {
    const text = metaSet.value.trim();
    const i = text.indexOf(":");
    if (i < 1 || !text.slice(i + 1).trim()) return fail(new Error("Write the metadata to set as key:value, e.g. team:billing."));
    const [key, value] = [text.slice(0, i).trim(), text.slice(i + 1).trim()];
    const chosen = selectedItems();
    const ops = chosen.filter((q) => (q.metadata || {})[key] !== value)
      .map((q) => rewritten(q, { ...(q.metadata || {}), [key]: value }));
    if (!ops.length) return say(`All ${chosen.length} selected QnAs already have ${key}:${value}.`);
    await bulk("Setting metadata", ops, (n) => `${key}:${value} set on ${n} QnA${n === 1 ? "" : "s"}.`);
  }
  async function removeMetadata() {
    const key = metaKey.value.trim();
    if (!key) return fail(new Error("Write the metadata key to remove, e.g. team."));
    const chosen = selectedItems();
    const has = (q) => Object.keys(q.metadata || {}).find((k) => k.toLowerCase() === key.toLowerCase());
    const ops = chosen.filter(has).map((q) => {
      const metadata = { ...q.metadata };
      delete metadata[has(q)];
      return rewritten(q, metadata);
    });
    if (!ops.length) return say(`None of the ${chosen.length} selected QnAs has the metadata key ${key}.`);
    await bulk("Removing metadata", ops, (n) => `${key} removed from ${n} QnA${n === 1 ? "" : "s"}.`);
  }
  async function deleteSelected() {
    const chosen = selectedItems();
    const named = chosen.slice(0, 5).map((q) => `\n· ${q.id}: ${q.questions[0] || "(no question)"}`).join("")
      + (chosen.length > 5 ? `\n· and ${chosen.length - 5} more` : "");
    if (!confirm(`Delete ${chosen.length} QnA${chosen.length === 1 ? "" : "s"}?${named}\nDeploy to publish the change.`)) return;
    await bulk("Deleting", chosen.map((q) => ({ op: "delete", value: { id: q.id, ifLastUpdated: q.lastUpdatedDateTime } })),
      (n) => `${n} QnA${n === 1 ? "" : "s"} deleted.`);
  }
  const bulkBox = editable ? h("div", { class: "row tools bulk", role: "group", "aria-label": "Selected QnAs" },
    h("button", { type: "button", class: "secondary", onclick: () => { for (const q of visible()) state.selected.add(q.id); draw(); drawBulk(); } }, "Select all found"),
    h("button", { type: "button", class: "secondary needs-selection", onclick: () => { state.selected.clear(); draw(); drawBulk(); } }, "Clear selection"),
    selectedCount,
    field("Metadata to set (key:value)", metaSet),
    h("button", { type: "button", class: "needs-selection", onclick: setMetadata }, "Set on selected"),
    field("Metadata key to remove", metaKey),
    h("button", { type: "button", class: "secondary needs-selection", onclick: removeMetadata }, "Remove from selected"),
    h("button", { type: "button", class: "danger needs-selection", onclick: deleteSelected }, "Delete selected")) : null;

  function promptRow(p = { displayText: "", qnaId: "", displayOrder: 0 }) {
    const text = h("input", { value: p.displayText, class: "prompt-text" });
    const start = p.qnaId ? (byId.has(p.qnaId) ? describe(byId.get(p.qnaId)) : String(p.qnaId)) : "";
    const target = qnaInput("qna-targets", () => state.items, { value: start, class: "prompt-target" });
    const order = h("input", { type: "number", value: String(p.displayOrder || 0), min: "0", class: "prompt-order" });
    const row = h("li", { class: "prompt" }, field("Display text", text, "The button the user sees"),
      field("Leads to QnA", target.input, target.shown), field("Order", order),
      h("button", { type: "button", class: "secondary", "aria-label": "Remove prompt", onclick: () => { row.remove(); state.dirty = true; } }, "Remove"));
    target.update();
    row.read = () => {
      const q = target.read();
      if (q instanceof Error) throw new Error(`Prompt "${text.value}": ${q.message}`);
      return { displayText: text.value.trim(), qnaId: q.id, displayOrder: parseInt(order.value, 10) || 0 };
    };
    return row;
  }

  // `mine`: the edit a Save could not write (the QnA was changed elsewhere), shown beside the QnA as it is now
  function open(q, mine = null) {
    if (state.dirty && !confirm("You have unsaved changes. Discard them?")) return;
    state.open = q;
    state.dirty = false;
    const isNew = !q;
    q = q || { id: 0, questions: [], answer: "", metadata: {}, source: "Editorial", dialog: { isContextOnly: false, prompts: [] } };
    const questions = h("textarea", { rows: 4, value: q.questions.join("\n") });
    const answer = h("textarea", { rows: 6, value: q.answer });
    const preview = h("div", { class: "preview", "aria-label": "Answer preview" }, renderMarkdown(q.answer));
    answer.addEventListener("input", () => preview.replaceChildren(renderMarkdown(answer.value)));
    const meta = h("textarea", { rows: 3, value: metadataText(q.metadata) });
    const source = h("input", { value: q.source || "Editorial" });
    const contextOnly = h("input", { type: "checkbox", checked: q.dialog.isContextOnly });
    const prompts = h("ol", { class: "prompts" }, q.dialog.prompts.map(promptRow));
    const form = h("form", { class: "card", oninput: () => { state.dirty = true; }, onsubmit: async (event) => {
      event.preventDefault();
      let value;
      try {
        value = { questions: questions.value.split("\n").map((s) => s.trim()).filter(Boolean), answer: answer.value,
          metadata: parseMetadata(meta.value), source: source.value.trim() || "Editorial",
          dialog: { isContextOnly: contextOnly.checked, prompts: [...prompts.children].map((li) => li.read()) } };
      } catch (error) { return fail(error); }
      if (!isNew) { value.id = q.id; value.ifLastUpdated = q.lastUpdatedDateTime; }
      let conflict = false;
      const ok = await runJob("Saving", progress, (onStatus) =>
        operation("PATCH", `${project(name)}/qnas`, [{ op: isNew ? "add" : "replace", value }], { onStatus })
          .catch((error) => { conflict = error.code === "Conflict"; throw error; }));
      if (ok) { state.dirty = false; say(isNew ? "QnA added." : `QnA ${q.id} saved.`); await reload(isNew ? null : q.id); }
      else if (conflict) {
        // changed elsewhere since it was read: every later Save of this copy would be refused the same way (the list
        // kept the old version too), so read it again and show it as it is now, with the edit that was not saved
        const error = document.getElementById("status").textContent;
        state.dirty = false;
        await reload(q.id, true, { questions: questions.value, answer: answer.value, metadata: meta.value });
        if (byId.has(q.id)) say(`${error} Read again: QnA ${q.id} is shown below as it is now, with your edit (not saved) above it.`, "error");
      }
    } },
    h("h2", {}, isNew ? "New QnA" : `QnA ${q.id}`),
    mine ? h("details", { class: "unsaved", open: true }, h("summary", {}, "Your edit, not saved (copy what you need)"),
      h("p", { class: "hint" }, "Questions"), h("pre", {}, mine.questions), h("p", { class: "hint" }, "Answer"),
      h("pre", {}, mine.answer), mine.metadata.trim() ? [h("p", { class: "hint" }, "Metadata"), h("pre", {}, mine.metadata)] : null) : null,
    field("Questions (one per line; the first is the primary one)", questions),
    field("Answer (Markdown)", answer), h("p", { class: "hint" }, "Preview:"), preview,
    field("Metadata (key:value, one per line)", meta), field("Source", source),
    h("div", { class: "field check" }, h("label", {}, contextOnly, " Context-only (reachable only as a follow-up)")),
    h("fieldset", {}, h("legend", {}, "Follow-up prompts"), prompts,
      h("button", { type: "button", class: "secondary", onclick: () => { prompts.append(promptRow()); state.dirty = true; } }, "Add follow-up prompt")),
    editable ? h("div", { class: "row" }, h("button", { type: "submit" }, isNew ? "Add QnA" : "Save"),
      isNew ? null : h("button", { type: "button", class: "danger", onclick: async () => {
        // the QnAs whose follow-up prompts lead here lose those prompts with it: say so before
        const from = state.items.filter((x) => x.id !== q.id && ((x.dialog || {}).prompts || []).some((p) => p.qnaId === q.id));
        const also = from.length ? ` The follow-up prompts of QnA${from.length === 1 ? "" : "s"} ${from.map((x) => x.id).join(", ")} `
          + "lead to it and are removed with it." : "";
        if (!confirm(`Delete QnA ${q.id}?${also} Deploy to publish the change.`)) return;
        // as it was read: a QnA changed elsewhere since is reported, not deleted
        const op = { op: "delete", value: { id: q.id, ifLastUpdated: q.lastUpdatedDateTime } };
        if (await runJob("Deleting", progress, (onStatus) => operation("PATCH", `${project(name)}/qnas`, [op], { onStatus }))) {
          state.dirty = false; say(`QnA ${q.id} deleted.`); await reload(null);
        } else await reload(q.id, true); // the QnA as it is now, beside the error
      } }, "Delete")) : h("p", { class: "hint" }, "This key may read but not edit this project."));
    if (!editable) for (const c of form.querySelectorAll("input, textarea, button")) c.disabled = true;
    editBox.replaceChildren(form);
    questions.focus();
  }

  async function reload(openId, keepStatus = false, mine = null) {
    try {
      const fresh = await all(`${project(name)}/qnas`);
      for (const q of fresh) q._text = searchText(q);
      state.items = fresh;
      byId.clear();
      for (const q of fresh) byId.set(q.id, q);
      draw();
      if (bulkBox) drawBulk();
      targets.replaceWith(targets = qnaList("qna-targets", fresh));
      if (openId !== null && byId.has(openId)) open(byId.get(openId), mine); else editBox.replaceChildren();
    } catch (error) { if (!keepStatus) fail(error); }
  }

  let targets = qnaList("qna-targets", state.items);
  const sources = new Map();
  for (const p of passages.value) sources.set(p.source, (sources.get(p.source) || []).concat([p]));
  const passageList = h("details", { class: "card" }, h("summary", {}, `Passages (${passages.value.length})`),
    [...sources].map(([src, items]) => h("section", {}, h("h3", {}, `${src} (${items.length})`),
      h("ul", { class: "passages" }, items.slice(0, 200).map((p) => h("li", {}, h("strong", {}, p.title), " — ", p.text.slice(0, 240)))))));
  guard(() => state.dirty, token);
  // adding a source inside the project: on top while the project is empty or just after an import
  const empty = !state.items.length && !passages.value.length;
  const adder = editable ? importForm(progress, name) : null;
  const first = adder && (empty || adder.querySelector(".import-result:not([hidden])"));
  const sourceList = empty ? null : await sourcesCard(name, editable, () => showEditor(name));
  if (!render(h("section", {}, tabs(name, "edit"), h("h1", {}, `${name}: QnAs`), progress,
    empty ? h("p", { class: "card" }, "This project is empty: add a source (a file or a URL) below, or write a QnA with New QnA.") : null,
    first ? adder : null,
    h("div", { class: "row tools" }, field("Search", search), field("Sort by", sort),
      editable ? h("button", { type: "button", onclick: () => open(null) }, "New QnA") : null),
    bulkBox,
    h("div", { class: "split" }, listBox, editBox), targets, sourceList, passageList, first ? null : adder), token)) return;
  draw();
  if (bulkBox) drawBulk();
  if (pending.question && editable) { // "New QnA" from Analytics: a new QnA that starts with the logged question
    const question = pending.question;
    pending.question = null;
    open(null);
    editBox.querySelector("textarea").value = question;
    state.dirty = true;
  }
}
